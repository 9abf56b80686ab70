"""``collector_paused``: no automatic collection inside, the previous setting restored after."""

from __future__ import annotations

import gc

import pytest

from engine.gcpause import collector_paused


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
