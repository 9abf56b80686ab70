"""``fleetgate serve``'s scheduler-estimator options (reconciler.estimatorargs): Karmada's names
and defaults, the address each cluster is asked at, and clear usage errors."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli import add_parser
from reconciler.estimatorargs import (
    EstimatorSettings,
    EstimatorSettingsError,
    duration,
    estimator_address,
    settings_of,
)
from tests.conftest import REPO

BASE = ["serve", "--kubeconfig", "k", "--policies", "p"]


def parse(*options: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fleetgate")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args([*BASE, *options])


def test_no_option_asks_no_estimator():
    assert settings_of(parse()) is None


def test_karmada_s_defaults_name_each_cluster_s_service():
    settings = settings_of(parse("--enable-scheduler-estimator"))
    assert settings is not None
    assert (settings.port, settings.timeout) == (10352, 3.0)
    assert settings.ca_file is None
    assert settings.address("gpu-east") == (
        "karmada-scheduler-estimator-gpu-east.karmada-system.svc.cluster.local:10352"
    )


def test_explicit_addresses_alone_ask_only_their_clusters():
    settings = settings_of(
        parse(
            "--scheduler-estimator",
            "gpu-east=127.0.0.1:5001",
            "--scheduler-estimator",
            "gpu-west=[::1]:5002",
            "--scheduler-estimator-timeout",
            "500ms",
        )
    )
    assert settings == EstimatorSettings(
        addresses={"gpu-east": "127.0.0.1:5001", "gpu-west": "[::1]:5002"}, timeout=0.5
    )
    assert settings.address("cpu-spot") is None


def test_explicit_addresses_win_over_service_names():
    settings = settings_of(
        parse(
            "--enable-scheduler-estimator",
            "--scheduler-estimator",
            "a=est-a:1",
            "--scheduler-estimator-service-prefix",
            "est",
            "--scheduler-estimator-service-namespace",
            "ops",
            "--scheduler-estimator-port",
            "9000",
        )
    )
    assert settings is not None
    assert settings.address("a") == "est-a:1"
    assert settings.address("b") == "est-b.ops.svc.cluster.local:9000"


@pytest.mark.parametrize(
    ("text", "seconds"), [("3s", 3.0), ("500ms", 0.5), ("1m", 60.0), ("2", 2.0), ("1.5s", 1.5)]
)
def test_timeouts_read_as_go_durations_or_seconds(text: str, seconds: float):
    assert duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo", "expected CLUSTER=HOST:PORT, got 'foo'"),
        ("=h:1", "expected CLUSTER=HOST:PORT"),
        ("a=h", "expected HOST:PORT after '='"),
        ("a=h:0", "the port must be 1…65535"),
        ("a=h:http", "the port must be 1…65535"),
        ("a=::1:80", "IPv6 host in brackets"),
    ],
)
def test_bad_addresses_say_what_is_expected(text: str, message: str):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        estimator_address(text)


@pytest.mark.parametrize("text", ["0s", "-1s", "3h", "s", ""])
def test_bad_timeouts_are_refused(text: str):
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--scheduler-estimator", "a=h:1", "--scheduler-estimator", "a=h:2"], "twice"),
        (["--enable-scheduler-estimator", "--scheduler-estimator-cert-file", "c"], "go together"),
        (
            [
                "--enable-scheduler-estimator",
                "--scheduler-estimator-cert-file",
                "c",
                "--scheduler-estimator-key-file",
                "k",
            ],
            "needs --scheduler-estimator-ca-file",
        ),
        (["--scheduler-estimator-ca-file", "ca"], "need --enable-scheduler-estimator"),
    ],
)
def test_options_that_do_not_go_together(options: list[str], message: str):
    with pytest.raises(EstimatorSettingsError, match=message):
        settings_of(parse(*options))


def serve(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``fleetgate serve`` over policies/ and a kubeconfig that does not exist (never read:
    each of these ends before)."""
    command = [sys.executable, "-m", "reconciler.cli", "--kubeconfig", str(tmp_path / "k")]
    return subprocess.run(
        [*command, "--policies", "policies", *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_bad_address_is_a_usage_error_of_the_command(tmp_path: Path):
    done = serve(tmp_path, "--scheduler-estimator", "foo")
    assert done.returncode == 2
    assert "argument --scheduler-estimator: expected CLUSTER=HOST:PORT, got 'foo'" in done.stderr


def test_options_that_do_not_go_together_are_a_usage_error_of_the_command(tmp_path: Path):
    done = serve(tmp_path, "--scheduler-estimator-ca-file", "ca.crt")
    assert done.returncode == 2, done.stderr
    assert "fleetgate serve: the estimator's TLS files need" in done.stderr


def test_an_unreadable_ca_file_stops_the_start(tmp_path: Path):
    missing = tmp_path / "missing.crt"
    done = serve(
        tmp_path, "--enable-scheduler-estimator", "--scheduler-estimator-ca-file", str(missing)
    )
    assert done.returncode == 1, done.stderr
    assert f"scheduler estimator TLS: [Errno 2] No such file or directory: '{missing}'" in (
        done.stderr
    )
