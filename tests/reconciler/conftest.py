"""The sandbox fixtures (a real HTTPS API server per test, and a client for it), reused, and a
time limit for tests that talk to it."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from tests.sandbox.conftest import api_client, kubeconfig, sandbox

__all__ = ["api_client", "kubeconfig", "sandbox", "time_limit"]


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the test if it runs past ``seconds`` (SIGALRM, main thread)."""

    def expire(*_: object) -> None:
        raise TimeoutError(f"test took more than {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
