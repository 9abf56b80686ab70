"""The ``type=`` converters of the command lines: what they take, and the error for what not."""

from __future__ import annotations

import argparse
import datetime as dt

import pytest

from engine import argtypes


def test_positive_int():
    assert argtypes.positive_int("3") == 3
    for text, message in (("0", "at least 1, got 0"), ("-2", "at least 1"), ("x", "'x'")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            argtypes.positive_int(text)


def test_rfc3339():
    assert argtypes.rfc3339("2026-01-01T00:00:00Z") == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    with pytest.raises(argparse.ArgumentTypeError, match="not an RFC 3339 time: 'soon'"):
        argtypes.rfc3339("soon")


def test_workers():
    assert argtypes.workers("5") == 5
    for text in ("0", "65"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be 1…64"):
            argtypes.workers(text)


def test_the_sandbox_command_takes_the_detectors_worker_count():
    from sandbox.cli import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["sandbox", "--concurrent-resource-template-syncs", "3"])
    assert args.concurrent_resource_template_syncs == 3
    assert parser.parse_args(["sandbox"]).concurrent_resource_template_syncs == 5
