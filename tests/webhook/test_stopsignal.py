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


def test_the_handler_runs_while_the_main_thread_holds_a_lock(stop: StopSignals) -> None:
    """What made the Event deadlock: the handler runs between two bytecodes of whatever the
    main thread does, here while it holds a lock. This one only writes to its pipe."""
    lock = threading.Lock()
    with lock:
        os.kill(os.getpid(), SIGNAL)  # the handler runs here, before the block ends
    assert stop.wait() == SIGNAL


def test_a_signal_after_close_is_ignored(stop: StopSignals) -> None:
    os.kill(os.getpid(), SIGNAL)
    assert stop.wait() == SIGNAL
    stop.close()
    os.kill(os.getpid(), SIGNAL)  # the handler finds its pipe closed and says nothing
