"""Serving the app: cheroot (a threaded, in-process production WSGI server) with reloadable TLS.

Slow and idle clients cannot stall it (``webhook.slowclients``): a worker thread gets a
connection only once a whole request has arrived (TLS handshake included, done off the accept
loop), within ``request_timeout`` of its first byte; connections idle longer than
``idle_timeout`` are closed; at most ``max_connections`` are open at once. ``/healthz`` and
``/readyz`` of an app made by ``webhook.app.create_app`` are answered without a worker thread
(``webhook.probes``), so they stay fast while every worker evaluates costly CEL.

cert-manager renews the serving certificate by rewriting the Secret; the kubelet then swaps the
mounted files. A poller (``webhook.poll``) notices a change of either file (mtime, size or
inode, symlinks followed), builds a complete new ``ssl.SSLContext`` and swaps it in with one
assignment: new connections use the new certificate, open ones keep theirs. A half-written
pair (certificate and key that do not match yet) fails to load and is logged; the old context
stays in use until the second file changes too.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable, Hashable
from pathlib import Path

from cheroot.ssl.builtin import BuiltinSSLAdapter
from flask import Flask

from engine.errors import FleetgateError, cannot_read
from webhook.poll import Poller, fingerprint
from webhook.probes import PROBES_EXTENSION
from webhook.slowclients import GuardedServer, LazyHandshakeAdapter

log = logging.getLogger(__name__)


class CertificateError(FleetgateError):
    """A serving certificate or key that cannot be loaded; the message names the file."""


def tls_context(cert: Path, key: Path, client_ca: bytes | None = None) -> ssl.SSLContext:
    """A server context for ``cert`` (PEM, chain allowed) and ``key``; TLS 1.2 or newer. With
    ``client_ca`` (PEM), a client certificate is asked for and, when sent, must chain to it (a
    client may send none: the app decides what such a request may do)."""
    for what, path in (("certificate", cert), ("key", key)):
        try:
            with Path(path).open("rb"):
                pass
        except OSError as err:  # OpenSSL's own error would not say which file
            raise CertificateError(f"{what} {path}: {cannot_read(err)}") from err
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except OSError as err:  # ssl.SSLError is one
        why = err.strerror or str(err)
        raise CertificateError(
            f"certificate {cert} and key {key} do not load as a PEM certificate (chain) and "
            f"its private key: {why}"
        ) from err
    if client_ca is not None:
        try:
            context.load_verify_locations(cadata=client_ca.decode())
        except (ssl.SSLError, ValueError, UnicodeDecodeError) as err:
            raise CertificateError(f"the client CA does not load as PEM: {err}") from err
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def not_after(cert: Path) -> float | None:
    """When the first certificate of the PEM file ``cert`` expires (Unix seconds); None when
    it cannot be read (the context's own load says why)."""
    from cryptography import x509

    try:
        loaded = x509.load_pem_x509_certificate(Path(cert).read_bytes())
    except (OSError, ValueError):
        return None
    return loaded.not_valid_after_utc.timestamp()


class CertificateReloader:
    """Swaps a new context into the adapter when the certificate or key file changes."""

    def __init__(
        self,
        adapter: BuiltinSSLAdapter,
        cert: Path,
        key: Path,
        interval: float = 10.0,
        on_reload: Callable[[bool], None] | None = None,
        *,
        seen: Hashable | None = None,
        client_ca: bytes | None = None,
    ) -> None:
        self._adapter = adapter
        self._files = (Path(cert), Path(key))
        self._client_ca = client_ca
        self._on_reload = on_reload
        self.reloads = 0
        self.not_after = not_after(self._files[0])  # of the certificate being served
        self.poller = Poller(
            lambda: fingerprint(self._files), self._reload, interval, "tls-reloader", seen=seen
        )

    def check(self) -> bool:
        """Poll once; True when the files changed (whether or not they loaded)."""
        return self.poller.check()

    def _reload(self) -> None:
        try:
            context = tls_context(*self._files, self._client_ca)
        except CertificateError as err:
            log.warning("serving certificate changed but does not load (%s); keeping the old", err)
            if self._on_reload:
                self._on_reload(False)
            return
        self._adapter.context = context  # one assignment: new handshakes use the new cert
        self.not_after = not_after(self._files[0])
        self.reloads += 1
        log.info("serving certificate reloaded from %s", self._files[0])
        if self._on_reload:
            self._on_reload(True)

    def start(self) -> None:
        self.poller.start()

    def stop(self) -> None:
        self.poller.stop()


class WebhookServer:
    """The app on cheroot; HTTPS when ``tls`` = (cert, key) is given. Start, then stop."""

    def __init__(
        self,
        app: Flask,
        host: str = "0.0.0.0",
        port: int = 8443,
        *,
        threads: int = 16,
        tls: tuple[Path, Path] | None = None,
        reload_interval: float = 10.0,
        on_certificate_reload: Callable[[bool], None] | None = None,
        reuse_port: bool = False,
        request_timeout: float = 2.0,
        idle_timeout: float = 10.0,
        max_connections: int = 256,
        client_ca: bytes | None = None,
    ) -> None:
        if threads < 1:
            raise FleetgateError("--threads must be at least 1")
        if max_connections < 1:
            raise FleetgateError("--max-connections must be at least 1")
        if request_timeout <= 0:
            raise FleetgateError("--request-timeout must be more than 0 s")
        if idle_timeout <= 0:
            raise FleetgateError("the idle timeout must be more than 0 s")
        self._server = GuardedServer(
            (host, port),
            app,
            numthreads=threads,
            server_name="fleetgate-webhook",
            request_queue_size=128,
            timeout=idle_timeout,
            shutdown_timeout=5,
            reuse_port=reuse_port,
            request_timeout=request_timeout,
            max_connections=max_connections,
            probes=getattr(app, "extensions", {}).get(PROBES_EXTENSION),
        )
        self.reloader: CertificateReloader | None = None
        if tls is not None:
            cert, key = tls
            before = fingerprint((Path(cert), Path(key)))  # before loading: see Poller
            context = tls_context(cert, key, client_ca)  # first: its errors name the file
            adapter = LazyHandshakeAdapter(str(cert), str(key))
            adapter.context = context
            self._server.ssl_adapter = adapter
            self.reloader = CertificateReloader(
                adapter,
                cert,
                key,
                reload_interval,
                on_certificate_reload,
                seen=before,
                client_ca=client_ca,
            )
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.bind_addr[:2]
        return str(host), int(port)

    @property
    def scheme(self) -> str:
        return "https" if self.reloader is not None else "http"

    def start(self) -> None:
        """Bind (port 0 picks a free port; see ``address``) and serve in a background thread."""
        self._server.prepare()
        self._thread = threading.Thread(target=self._serve, name="webhook-server", daemon=True)
        self._thread.start()
        if self.reloader is not None:
            self.reloader.start()

    def _serve(self) -> None:
        self._server.serve()

    def stop(self, timeout: float = 10.0) -> None:
        if self.reloader is not None:
            self.reloader.stop()
        self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise FleetgateError(f"webhook server did not stop within {timeout} s")
            self._thread = None

    def __enter__(self) -> WebhookServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
