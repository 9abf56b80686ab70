"""``collector_paused``: no automatic collection inside, the previous setting restored after;
``FreezeOnce``: the warm state frozen out of the collector once."""

from __future__ import annotations

import gc

import pytest

from engine.gcpause import FreezeOnce, collector_paused


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_back_on_after_an_error() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("the cycle failed")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_freeze_once_freezes_what_is_alive_after_the_first_pass_only():
    hook = FreezeOnce()
    before = gc.get_freeze_count()
    try:
        hook(None, None)  # as Reconciler._notify calls an observer: (result, summary)
        frozen = gc.get_freeze_count()
        assert frozen > before
        later = [[i] for i in range(1000)]  # made after: left to the collector
        hook(None, None)
        assert gc.get_freeze_count() == frozen and len(later) == 1000
    finally:
        gc.unfreeze()  # the rest of this test process's objects back in the collector's view
