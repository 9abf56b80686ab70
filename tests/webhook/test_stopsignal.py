"""``webhook.stopsignal.StopSignals``: the commands' wait for SIGTERM or SIGINT ends on a signal
that comes before the wait or during it, whichever thread takes it, and its handler takes no lock
(a handler that sets a ``threading.Event`` can deadlock against the main thread's own
``Event.wait``)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
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


def test_another_signal_with_a_handler_does_not_end_the_wait(stop: StopSignals) -> None:
    other = signal.SIGUSR2
    before = signal.signal(other, lambda signum, frame: None)
    try:
        os.kill(os.getpid(), other)
        os.kill(os.getpid(), SIGNAL)
        assert stop.wait() == SIGNAL
    finally:
        signal.signal(other, before)


def test_close_gives_the_wakeup_back() -> None:
    before = signal.getsignal(SIGNAL)
    stopping = StopSignals((SIGNAL,))
    stopping.close()
    try:
        assert signal.set_wakeup_fd(-1) == -1
    finally:
        signal.signal(SIGNAL, before)


READ_SYSCALL = {"x86_64": 0, "aarch64": 63}  # what /proc/<pid>/task/<tid>/syscall names first

# The process's main thread blocks in its wait; another thread, once it sees (in /proc) that the
# main thread sleeps in read(2), takes the signal itself. Python runs handlers in the main
# thread only, and nothing interrupts that read: the wait must end without them.
TAKEN_BY_ANOTHER_THREAD = """
    import signal, threading
    from tests.waiting import eventually
    from webhook.stopsignal import StopSignals

    main = threading.get_native_id()
    stopping = StopSignals((signal.SIGUSR1,))

    def in_read() -> bool:
        with open(f"/proc/self/task/{main}/syscall") as said:
            return said.read().split()[0] == "%d"

    def take() -> None:
        try:
            eventually(in_read, 60, "the main thread sleeps in read(2)")
        finally:  # taken even so: the wait ends and the failure is printed
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

    threading.Thread(target=take).start()
    print(stopping.wait())
"""


@pytest.mark.skipif(
    platform.machine() not in READ_SYSCALL or not Path("/proc/self/task").exists(),
    reason="reads Linux's /proc for the main thread's system call",
)
def test_a_signal_taken_by_another_thread_ends_the_main_threads_wait() -> None:
    script = textwrap.dedent(TAKEN_BY_ANOTHER_THREAD) % READ_SYSCALL[platform.machine()]
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("the wait did not end on a signal another thread took") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(int(signal.SIGUSR1))]
