"""``webhook.stopsignal.StopSignals``: the commands' wait for SIGTERM or SIGINT ends on a signal
that comes before the wait or during it, and its handler takes no lock (a handler that sets a
``threading.Event`` can deadlock against the main thread's own ``Event.wait``)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from webhook.stopsignal import StopSignals

SIGNAL = signal.SIGUSR1


@pytest.fixture
def stop() -> Iterator[StopSignals]:
    before = signal.getsignal(SIGNAL)
    stopping = StopSignals((SIGNAL,))
    yield stopping
    stopping.close()
    signal.signal(SIGNAL, before)


def test_a_signal_before_the_wait_ends_it(stop: StopSignals) -> None:
    os.kill(os.getpid(), SIGNAL)
    assert stop.wait() == SIGNAL


def test_a_signal_from_another_thread_ends_the_wait(stop: StopSignals) -> None:
    sender = threading.Thread(target=os.kill, args=(os.getpid(), SIGNAL))
    sender.start()
    assert stop.wait() == SIGNAL
    sender.join()


def test_a_signal_after_close_is_ignored(stop: StopSignals) -> None:
    os.kill(os.getpid(), SIGNAL)
    assert stop.wait() == SIGNAL
    stop.close()
    os.kill(os.getpid(), SIGNAL)  # the handler finds its pipe closed and says nothing
