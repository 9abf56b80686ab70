"""The flags of a managed serving certificate (``webhook.certmanager``), shared by
``fleetgate webhook`` and ``fleetgate serve``. Importing this module costs argparse only."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import kubernetes

    from webhook.certmanager import CertManager


def _secret(text: str) -> tuple[str, str]:
    from webhook.certmanager import parse_secret

    try:
        return parse_secret(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _target(text: str) -> Any:
    from webhook.certmanager import Target

    try:
        return Target.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _interval(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tls-secret`` and the flags that go with it."""
    group = parser.add_argument_group(
        "managed certificate",
        "instead of --tls-cert/--tls-key: fleetgate keeps a CA and a serving certificate in a "
        "Secret of the API server of --kubeconfig, renews them before they expire, and writes "
        "the CA into the caBundle of the --ca-inject objects (docs/install.md)",
    )
    group.add_argument(
        "--tls-secret",
        type=_secret,
        metavar="NAMESPACE/NAME",
        help="the Secret holding the managed CA and serving certificate (created if missing)",
    )
    group.add_argument(
        "--tls-dns-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a DNS name of the serving certificate (repeat it; the first is its common name)",
    )
    group.add_argument(
        "--tls-dir",
        type=Path,
        metavar="DIR",
        help="where the certificate files are written for the server (default: a new "
        "directory under the temporary directory)",
    )
    group.add_argument(
        "--ca-inject",
        type=_target,
        action="append",
        default=[],
        metavar="KIND/NAME",
        help="an object whose caBundle is kept equal to the managed CA: "
        "mutatingwebhookconfigurations/NAME, validatingwebhookconfigurations/NAME or "
        "apiservices/NAME (repeat it)",
    )
    group.add_argument(
        "--tls-check-interval",
        type=_interval,
        default=60.0,
        metavar="SECONDS",
        help="how often the Secret and the caBundles are checked (60)",
    )


def problem(args: argparse.Namespace) -> str | None:
    """A usage error of these flags, or None."""
    if args.tls_secret is None:
        if args.tls_dns_name or args.ca_inject:
            return "--tls-dns-name and --ca-inject need --tls-secret"
        return None
    if args.tls_cert is not None or args.tls_key is not None:
        return "--tls-secret replaces --tls-cert and --tls-key: give one or the other"
    if args.kubeconfig is None:
        return "--tls-secret needs --kubeconfig (the API server that holds the Secret)"
    if not args.tls_dns_name:
        return "--tls-secret needs at least one --tls-dns-name"
    return None


def manager(args: argparse.Namespace, api: kubernetes.client.ApiClient) -> CertManager:
    """The :class:`~webhook.certmanager.CertManager` these flags describe."""
    from webhook.certmanager import CertManager

    directory = args.tls_dir or Path(tempfile.mkdtemp(prefix="fleetgate-tls-"))
    return CertManager(
        api,
        args.tls_secret,
        args.tls_dns_name,
        directory,
        inject=args.ca_inject,
        interval=args.tls_check_interval,
    )
