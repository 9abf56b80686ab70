"""The :class:`Sandbox`: the API server's lifecycle (start, stop, TLS, kubeconfig).

Serving: the standard library's ``ThreadingHTTPServer``, one thread per connection. Chosen over
werkzeug's development server and cheroot because a watch is a response that streams for
minutes: http.server lets the handler write chunks straight to the socket, with no WSGI
buffering or worker-pool sizing to get wrong (a cheroot pool would be exhausted by idle
watches), and it needs nothing beyond the standard library. Connections are bounded
(``max_connections``; one over the bound is answered 429 and closed) and tracked, so
:meth:`Sandbox.stop` ends every watch and closes every socket before it returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sandbox import bootstrap, frontproxy, tls
from sandbox.access import Access
from sandbox.authn import Authenticator, User
from sandbox.http import ApiHandler
from sandbox.kubeconfig import write_kubeconfig
from sandbox.store import Store
from sandbox.watch import Subscription
from sandbox.webhooks import WebhookAdmission

log = logging.getLogger("fleetgate.sandbox")

# A hook sees each request (method, path, query) before it is served; it may sleep (latency)
# or raise sandbox.errors.StatusError (an injected 409/429/500). Faults plug in here.
RequestHook = Callable[[str, str, dict[str, str]], None]
# An endpoint of the sandbox itself (e.g. /sandbox/faults): (method, query, body) → (code, JSON).
ExtraRoute = Callable[[str, dict[str, str], bytes], tuple[int, Any]]

_TOO_MANY_BODY = json.dumps(
    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests"}
    | {"message": "too many connections to the sandbox", "code": 429}
).encode()
_TOO_MANY = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + f"Content-Length: {len(_TOO_MANY_BODY)}\r\n\r\n".encode()
    + _TOO_MANY_BODY
)


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        store: Store,
        *,
        context: ssl.SSLContext | None,
        access: Access,
        max_connections: int,
        bookmark_interval: float,
    ) -> None:
        super().__init__(address, ApiHandler)
        self.store = store
        self.access = access
        self.context = context
        self.bookmark_interval = bookmark_interval
        self.request_hooks: list[RequestHook] = []
        self.routes: dict[str, ExtraRoute] = {}
        self.stopping = threading.Event()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        # accepted socket → the socket to shut down when stopping: the TLS socket once wrapped
        # (wrapping detaches the accepted one, whose shutdown would then do nothing)
        self._connections: dict[socket.socket, socket.socket] = {}
        self._watches: dict[Subscription, str] = {}  # → the request path
        self._aborted: set[Subscription] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(_TOO_MANY)
            self.shutdown_request(request)
            return
        with self._lock:
            self._connections[request] = request
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.context is not None:
            accepted = request
            request.settimeout(10)
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as error:
                log.debug("TLS handshake with %s failed: %s", client_address, error)
                return
            request.settimeout(None)
            with self._lock:
                if accepted in self._connections:
                    self._connections[accepted] = request
        super().finish_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            known = self._connections.pop(request, None) is not None
        super().shutdown_request(request)
        if known:
            self._slots.release()

    def track_watch(self, subscription: Subscription, path: str = "") -> None:
        with self._lock:
            self._watches[subscription] = path

    def untrack_watch(self, subscription: Subscription) -> bool:
        """Forget a finished watch; True when it was ended by :meth:`drop_watches` (abrupt)."""
        with self._lock:
            self._watches.pop(subscription, None)
            aborted = subscription in self._aborted
            self._aborted.discard(subscription)
            return aborted

    def drop_watches(self, path: str = "", abrupt: bool = False) -> int:
        """End the open watches whose request path (with query) matches the regular expression
        ``path`` (all by default). ``abrupt``: close the connection mid-stream rather than end
        the chunked response. Returns how many were dropped."""
        pattern = re.compile(path)
        with self._lock:
            chosen = [s for s, p in self._watches.items() if pattern.search(p)]
            if abrupt:
                self._aborted.update(chosen)
        for subscription in chosen:
            subscription.close()
        return len(chosen)

    def close_everything(self) -> None:
        self.stopping.set()
        with self._lock:
            watches, connections = list(self._watches), list(self._connections.values())
        for subscription in watches:
            subscription.close()
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its peer
                connection.shutdown(socket.SHUT_RDWR)


class Sandbox:
    """The sandbox API server over a :class:`~sandbox.store.Store`.

    >>> sandbox = Sandbox()
    >>> url = sandbox.start()            # https://127.0.0.1:<port>
    >>> sandbox.write_kubeconfig("kubeconfig")
    >>> sandbox.store.create("namespaces", {"metadata": {"name": "team-a"}})
    >>> sandbox.stop()

    ``tls=False`` serves plain HTTP (local debugging). ``token``: the bearer token clients must
    send (None: no authentication); by default a random one, written into the kubeconfig. It
    is ``sandbox-admin`` in ``system:masters``, allowed everything. ``users``: more bearer tokens,
    each a :class:`~sandbox.authn.User` (``--token-auth-file``), authorized by the RBAC objects
    in the store (:mod:`sandbox.rbac`). ``front_proxy``: the client certificate and CA of the
    front proxy to aggregated APIs (:mod:`sandbox.aggregator`), generated by default.
    ``webhooks``: call the admission webhooks that the store's Mutating/Validating
    WebhookConfigurations name (:mod:`sandbox.webhooks`; unless the store already has an
    admission hook); ``service_urls`` maps a ``clientConfig.service`` (namespace, name, port)
    to a URL, since the sandbox has no cluster DNS; an APIService's ``spec.service`` is looked up
    there too (``sandbox.service_urls``, which may be added to while serving).

    At each start the sandbox writes what kube-apiserver writes into a new cluster
    (:mod:`sandbox.bootstrap`): the bootstrap ClusterRoles and bindings, and
    ``kube-system/extension-apiserver-authentication`` with the front-proxy CA.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        tls_enabled: bool = True,
        token: str | None = "",
        max_connections: int = 128,
        bookmark_interval: float = 60.0,
        webhooks: bool = True,
        service_urls: Mapping[tuple[str, str, int], str] | None = None,
        users: Mapping[str, User] | None = None,
        front_proxy: frontproxy.FrontProxy | None = None,
    ) -> None:
        self.store = store or Store()
        self.token = secrets.token_urlsafe(24) if token == "" else token
        self.service_urls: dict[tuple[str, str, int], str] = dict(service_urls or {})
        self.front_proxy = front_proxy or frontproxy.generate()
        self.authenticator = Authenticator(self.token, users)
        self.access = Access(self.authenticator, self.front_proxy, self.service_urls)
        self._tls = tls.generate() if tls_enabled else None
        self._max_connections = max_connections
        self._bookmark_interval = bookmark_interval
        self._server: ApiHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.request_hooks: list[RequestHook] = []
        self.routes: dict[str, ExtraRoute] = {}
        self.url = ""
        self.webhooks: WebhookAdmission | None = None
        if webhooks and self.store.admission is None:
            self.webhooks = WebhookAdmission(self.store, service_urls=service_urls)
            self.store.admission = self.webhooks

    @property
    def ca_pem(self) -> bytes | None:
        return self._tls.ca_pem if self._tls else None

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Listen on ``host:port`` (0: any free port) and serve in a thread; returns the URL."""
        if self._server is not None:
            raise RuntimeError("the sandbox is already started")
        context = self._tls.server_context() if self._tls else None
        bootstrap.ensure_policy(self.store)
        bootstrap.publish_authentication(self.store, self.front_proxy)
        server = ApiHTTPServer(
            (host, port),
            self.store,
            context=context,
            access=self.access,
            max_connections=self._max_connections,
            bookmark_interval=self._bookmark_interval,
        )
        server.request_hooks = self.request_hooks
        server.routes = self.routes
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="sandbox-api",
            daemon=True,
        )
        self._thread.start()
        scheme = "https" if context else "http"
        self.url = f"{scheme}://{host}:{server.server_address[1]}"
        schemas = self.store.schemas
        report = log.info if schemas.validators else log.warning
        report("sandbox API server at %s; %s", self.url, schemas.note)
        return self.url

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, end watches, close connections; idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        self.access.close()
        server.close_everything()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def restart(self, store: Store | None = None, timeout: float = 5.0) -> str:
        """Stop, then serve again at the same address with the same CA, certificate and token,
        over ``store`` (default: a new, empty one): an API server restarted with its state
        reset, whose resourceVersions start again below those its clients hold. The webhook
        caller moves to the new store (unless it has its own admission hook); anything attached
        to the old store (its listeners, a WriteLog, in-process controllers) stays with it."""
        if not self.url:
            raise RuntimeError("the sandbox was never started")
        host, _, port = self.url.partition("://")[2].rpartition(":")
        self.stop(timeout)
        self.store = store if store is not None else Store()
        if self.webhooks is not None and self.store.admission is None:
            self.webhooks = WebhookAdmission(self.store, service_urls=self.webhooks.service_urls)
            self.store.admission = self.webhooks
        return self.start(int(port), host)

    def drop_watches(self, path: str = "", abrupt: bool = False) -> int:
        """End open HTTP watches (a fault); see :meth:`ApiHTTPServer.drop_watches`."""
        server = self._server
        return server.drop_watches(path, abrupt) if server is not None else 0

    def write_kubeconfig(self, path: str | Path, token: str | None = None) -> Path:
        """A kubeconfig for the admin token, or for ``token`` (one of ``users``)."""
        if not self.url:
            raise RuntimeError("start the sandbox before writing its kubeconfig")
        return write_kubeconfig(path, self.url, self.ca_pem, token or self.token)

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
