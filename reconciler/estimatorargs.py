"""The ``fleetgate serve`` options that ask the members' karmada-scheduler-estimators, named and
defaulted as karmada-scheduler's (``cmd/scheduler/app/options``), and the settings they make.

Cheap to import (argparse only): ``reconciler.cli`` registers them on every ``fleetgate`` run.

Which clusters are asked: with ``--enable-scheduler-estimator``, every Ready cluster, at
``<prefix>-<cluster>.<namespace>.svc.cluster.local:<port>`` (the name Karmada's scheduler dials
when the karmada-apiserver has no ExternalName Service of that name), unless
``--scheduler-estimator CLUSTER=HOST:PORT`` names its address; without it, only the clusters
named by ``--scheduler-estimator``. Transport as Karmada's: plain (insecure) gRPC unless
``--scheduler-estimator-ca-file`` is given, then TLS verified against that CA, with a client
certificate when ``--scheduler-estimator-cert-file`` and ``-key-file`` are given (mutual TLS).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import FleetgateError

DEFAULT_PREFIX = "karmada-scheduler-estimator"
DEFAULT_NAMESPACE = "karmada-system"
DEFAULT_PORT = 10352
DEFAULT_TIMEOUT = 3.0  # seconds
_DURATION = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>ms|s|m)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


class EstimatorSettingsError(FleetgateError, ValueError):
    """Estimator options that do not go together; the message names them."""


@dataclass(frozen=True, slots=True)
class EstimatorSettings:
    """Where and how to ask the estimators (:class:`reconciler.estimator.EstimatorClient`)."""

    addresses: Mapping[str, str] = field(default_factory=dict)  # cluster → host:port
    every_cluster: bool = False  # --enable-scheduler-estimator: the others by service name
    service_prefix: str = DEFAULT_PREFIX
    service_namespace: str = DEFAULT_NAMESPACE
    port: int = DEFAULT_PORT
    timeout: float = DEFAULT_TIMEOUT  # seconds a pass waits for all answers
    ca_file: Path | None = None  # TLS when given
    cert_file: Path | None = None  # with key_file: mutual TLS
    key_file: Path | None = None

    def address(self, cluster: str) -> str | None:
        """The estimator of ``cluster``, or None when it is not asked."""
        explicit = self.addresses.get(cluster)
        if explicit is not None or not self.every_cluster:
            return explicit
        service = f"{self.service_prefix}-{cluster}"
        return f"{service}.{self.service_namespace}.svc.cluster.local:{self.port}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "scheduler estimator",
        "ask each member's karmada-scheduler-estimator (gRPC) how many pods of each pending "
        "shape its nodes hold now, as karmada-scheduler does; on any error or timeout the "
        "cluster's resource models are used (docs/reconciler.md)",
    )
    group.add_argument(
        "--enable-scheduler-estimator",
        action="store_true",
        help="ask every Ready cluster's estimator, at "
        "<prefix>-<cluster>.<namespace>.svc.cluster.local:<port> unless --scheduler-estimator "
        "names it",
    )
    group.add_argument(
        "--scheduler-estimator",
        dest="scheduler_estimators",
        type=estimator_address,
        action="append",
        default=[],
        metavar="CLUSTER=HOST:PORT",
        help="the estimator of one cluster (repeatable); alone, only these clusters are asked",
    )
    group.add_argument(
        "--scheduler-estimator-service-prefix",
        type=_nonempty,
        default=DEFAULT_PREFIX,
        metavar="PREFIX",
        help="(%(default)s)",
    )
    group.add_argument(
        "--scheduler-estimator-service-namespace",
        type=_nonempty,
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help="(%(default)s)",
    )
    group.add_argument(
        "--scheduler-estimator-port",
        type=_port,
        default=DEFAULT_PORT,
        metavar="N",
        help="(%(default)s)",
    )
    group.add_argument(
        "--scheduler-estimator-timeout",
        type=duration,
        default=DEFAULT_TIMEOUT,
        metavar="DURATION",
        help="how long a pass waits for all answers, e.g. 3s, 500ms or 2 (seconds) (3s)",
    )
    group.add_argument(
        "--scheduler-estimator-ca-file",
        type=Path,
        metavar="FILE",
        help="verify the estimators' TLS certificates against this CA (PEM); without it the "
        "channel is plain gRPC",
    )
    group.add_argument(
        "--scheduler-estimator-cert-file",
        type=Path,
        metavar="FILE",
        help="client certificate for mutual TLS (PEM; with --scheduler-estimator-key-file)",
    )
    group.add_argument(
        "--scheduler-estimator-key-file", type=Path, metavar="FILE", help="its private key (PEM)"
    )


def estimator_address(text: str) -> tuple[str, str]:
    """``CLUSTER=HOST:PORT`` → (cluster, "host:port"); ``[::1]:10352`` for IPv6."""
    cluster, sep, address = text.partition("=")
    if not sep or not cluster or not address:
        raise argparse.ArgumentTypeError(f"expected CLUSTER=HOST:PORT, got {text!r}")
    host, colon, port = address.rpartition(":")
    if not colon or not host or host == "[]":
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT after '='")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise argparse.ArgumentTypeError(f"{text!r}: write an IPv6 host in brackets: [::1]:PORT")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: the port must be 1…65535, got {port!r}")
    return cluster, f"{host}:{int(port)}"


def duration(text: str) -> float:
    """Seconds from ``3s``, ``500ms``, ``1m`` (Go's durations, as Karmada's flag takes) or a plain
    number of seconds; more than zero."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 3s or 500ms, got {text!r}")
    seconds = float(match["number"]) * _UNIT_SECONDS[match["unit"]]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return seconds


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be 1…65535, got {text!r}")
    return int(text)


def _nonempty(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def settings_of(args: Any) -> EstimatorSettings | None:
    """The settings the parsed options make; None when no estimator is asked."""
    pairs: list[tuple[str, str]] = list(getattr(args, "scheduler_estimators", None) or [])
    enabled = bool(getattr(args, "enable_scheduler_estimator", False))
    addresses: dict[str, str] = {}
    for cluster, address in pairs:
        if cluster in addresses and addresses[cluster] != address:
            raise EstimatorSettingsError(
                f"--scheduler-estimator names cluster {cluster!r} twice "
                f"({addresses[cluster]} and {address})"
            )
        addresses[cluster] = address
    ca = getattr(args, "scheduler_estimator_ca_file", None)
    cert = getattr(args, "scheduler_estimator_cert_file", None)
    key = getattr(args, "scheduler_estimator_key_file", None)
    if (cert is None) != (key is None):
        raise EstimatorSettingsError(
            "--scheduler-estimator-cert-file and --scheduler-estimator-key-file go together"
        )
    if cert is not None and ca is None:
        raise EstimatorSettingsError(
            "--scheduler-estimator-cert-file needs --scheduler-estimator-ca-file (TLS)"
        )
    if not enabled and not addresses:
        if ca is not None or cert is not None:
            raise EstimatorSettingsError(
                "the estimator's TLS files need --enable-scheduler-estimator or "
                "--scheduler-estimator CLUSTER=HOST:PORT"
            )
        return None
    return EstimatorSettings(
        addresses=addresses,
        every_cluster=enabled,
        service_prefix=getattr(args, "scheduler_estimator_service_prefix", DEFAULT_PREFIX),
        service_namespace=getattr(args, "scheduler_estimator_service_namespace", DEFAULT_NAMESPACE),
        port=getattr(args, "scheduler_estimator_port", DEFAULT_PORT),
        timeout=getattr(args, "scheduler_estimator_timeout", DEFAULT_TIMEOUT),
        ca_file=ca,
        cert_file=cert,
        key_file=key,
    )
