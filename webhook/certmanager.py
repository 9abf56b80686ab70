"""Certificates managed by fleetgate itself: a Secret kept current, files for the server, and
the ``caBundle`` of fleetgate's own webhook configurations and APIService.

``fleetgate webhook --tls-secret NS/NAME`` and ``fleetgate serve --tls-secret NS/NAME`` run a
:class:`CertManager` against the karmada-apiserver (``--kubeconfig``):

1. **The Secret** (type ``kubernetes.io/tls``, keys ``tls.crt``, ``tls.key``, ``ca.crt``,
   ``ca.key``) is read; when it is missing or ``webhook.certificates.problem`` finds a reason
   (no certificate, names other than ``--tls-dns-name``, renewal due, keys that do not match),
   a renewed bundle is written: created when absent, else replaced with the resourceVersion it
   was read at. Replicas race safely: the loser of a create (409) or a replace (409) reads the
   winner's bundle and uses it.
2. **The caBundle** (the Secret's ``ca.crt``, every CA in it) is written into each
   ``--ca-inject`` target whose bundle differs: every webhook of a Mutating- or
   ValidatingWebhookConfiguration, or an APIService's ``spec.caBundle``. A JSON patch tests
   the resourceVersion it read, so a concurrent edit is never overwritten. A target not there
   yet (applied after the pods start) is tried again at each check. This comes before the
   files, so a new CA is trusted before a certificate it signed is served.
3. **The files** ``tls.crt``, ``tls.key`` and ``ca.crt`` in ``--tls-dir`` are rewritten (each
   atomically, the key first) when they differ; the server's certificate poller
   (``webhook.serve``) swaps in the new pair, as it does for files a kubelet updates.

A check runs at start (the server does not start without a certificate) and then every
``interval`` seconds, and at the moment a renewal falls due. Errors are logged and tried again
at the next check; the certificate in use stays valid for months meanwhile.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.errors import FleetgateError
from webhook import certificates
from webhook.certificates import Bundle

log = logging.getLogger(__name__)

NOT_FOUND, CONFLICT, INVALID = 404, 409, 422
TARGET_KINDS = {
    "mutatingwebhookconfigurations": ("admissionregistration.k8s.io", "v1"),
    "validatingwebhookconfigurations": ("admissionregistration.k8s.io", "v1"),
    "apiservices": ("apiregistration.k8s.io", "v1"),
}
MANAGED_BY = "fleetgate"


class CertManagerError(FleetgateError):
    """The Secret cannot be read or written, or a flag names something unusable."""


@dataclass(frozen=True, slots=True)
class Target:
    """A cluster-scoped object whose caBundle fleetgate keeps: ``kind`` is its plural."""

    kind: str
    name: str

    @classmethod
    def parse(cls, text: str) -> Target:
        """``KIND/NAME``, KIND one of :data:`TARGET_KINDS`."""
        kind, _, name = text.partition("/")
        if kind not in TARGET_KINDS or not name or "/" in name:
            kinds = ", ".join(sorted(TARGET_KINDS))
            raise ValueError(f"{text!r}: expected KIND/NAME with KIND one of {kinds}")
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def parse_secret(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` of the Secret."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{text!r}: expected NAMESPACE/NAME")
    return namespace, name


def _decode(data: dict[str, str] | None) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (data or {}).items():
        with contextlib.suppress(ValueError):
            out[key] = base64.b64decode(value, validate=True)
    return out


def _write_atomically(path: Path, content: bytes, mode: int) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content)
        Path(temporary).chmod(mode)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class CertManager:
    """Keeps the Secret ``namespace/name`` serving ``names``; see the module's doc."""

    def __init__(
        self,
        api: kubernetes.client.ApiClient,
        secret: tuple[str, str],
        names: Sequence[str],
        directory: Path,
        inject: Sequence[Target] = (),
        interval: float = 60.0,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        if not names:
            raise CertManagerError("a managed certificate needs at least one DNS name")
        self.api = api
        self.core = kubernetes.client.CoreV1Api(api)
        self.namespace, self.name = secret
        self.names = tuple(names)
        self.directory = directory
        self.inject = tuple(inject)
        self.interval = interval
        self.clock = clock
        self.bundle: Bundle | None = None
        self.renewals = 0  # bundles this process wrote into the Secret
        self.injected: dict[Target, str] = {}  # the caBundle last seen in place, by target
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    @property
    def cert_file(self) -> Path:
        return self.directory / certificates.TLS_CERT

    @property
    def key_file(self) -> Path:
        return self.directory / certificates.TLS_KEY

    # -- one check ------------------------------------------------------------------------

    def sync(self) -> Bundle:
        """The Secret current, the files written, the caBundles patched (those that can be);
        raises :class:`CertManagerError` when the Secret cannot be read or written."""
        try:
            bundle = self._current_secret()
        except (ApiException, HTTPError, OSError) as error:
            raise CertManagerError(f"{self.where}: {_why(error)}") from error
        self.bundle = bundle
        self._inject(bundle)  # first: a new CA is trusted before a certificate it signed serves
        self._write_files(bundle)
        return bundle

    def _current_secret(self) -> Bundle:
        for _ in range(3):  # a race lost to another replica: read what it wrote, and check it
            found = self._read()
            bundle = Bundle.from_data(_decode(found.data)) if found is not None else None
            why = certificates.problem(bundle, self.names, self.clock())
            if why is None and bundle is not None:
                return bundle
            renewed = certificates.renew(bundle, self.names, self.clock())
            body = self._body(renewed, found)
            try:
                if found is None:
                    self.core.create_namespaced_secret(self.namespace, body)
                else:
                    self.core.replace_namespaced_secret(self.name, self.namespace, body)
            except ApiException as error:
                if error.status == CONFLICT:
                    continue
                raise
            self.renewals += 1
            log.info("%s: new serving certificate for %s (%s)", self.where, self.names[0], why)
            return renewed
        raise CertManagerError(f"{self.where}: changed by someone else three times in a row")

    def _read(self) -> Any | None:
        try:
            return self.core.read_namespaced_secret(self.name, self.namespace)
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise

    def _body(self, bundle: Bundle, found: Any | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "annotations": {"fleetgate.io/dns-names": ",".join(self.names)},
        }
        if found is not None:
            metadata["resourceVersion"] = found.metadata.resource_version
            metadata["labels"] = {**(found.metadata.labels or {}), **metadata["labels"]}
            metadata["annotations"] = {
                **(found.metadata.annotations or {}),
                **metadata["annotations"],
            }
        data = {k: base64.b64encode(v).decode() for k, v in bundle.as_data().items()}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": "kubernetes.io/tls",
            "data": data,
        }

    def _write_files(self, bundle: Bundle) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        wanted = (
            (self.key_file, bundle.key, 0o600),  # the key first: the poller waits for the pair
            (self.cert_file, bundle.cert, 0o644),
            (self.directory / certificates.CA_CERT, bundle.ca, 0o644),
        )
        for path, content, mode in wanted:
            try:
                same = path.read_bytes() == content
            except FileNotFoundError:
                same = False
            if not same:
                _write_atomically(path, content, mode)

    def _inject(self, bundle: Bundle) -> None:
        wanted = base64.b64encode(bundle.ca).decode()
        for target in self.inject:
            try:
                self._inject_one(target, wanted)
            except (ApiException, HTTPError, OSError) as error:
                log.warning("caBundle of %s not updated: %s", target, _why(error))

    def _inject_one(self, target: Target, wanted: str) -> None:
        group, version = TARGET_KINDS[target.kind]
        path = f"/apis/{group}/{version}/{target.kind}/{target.name}"
        for _ in range(3):
            found = self._call("GET", path)
            operations: list[dict[str, Any]] = []
            if target.kind == "apiservices":
                if (found.get("spec") or {}).get("caBundle") != wanted:
                    operations.append({"op": "add", "path": "/spec/caBundle", "value": wanted})
            else:
                for index, hook in enumerate(found.get("webhooks") or []):
                    if (hook.get("clientConfig") or {}).get("caBundle") != wanted:
                        where = f"/webhooks/{index}/clientConfig/caBundle"
                        operations.append({"op": "add", "path": where, "value": wanted})
            if not operations:
                self.injected[target] = wanted
                return
            version_seen = (found.get("metadata") or {}).get("resourceVersion", "")
            test = {"op": "test", "path": "/metadata/resourceVersion", "value": version_seen}
            try:
                self._call("PATCH", path, [test, *operations])
            except ApiException as error:
                if error.status in (CONFLICT, INVALID):  # changed meanwhile: read it again
                    continue
                raise
            self.injected[target] = wanted
            log.info("caBundle of %s updated", target)
            return
        raise ApiException(status=CONFLICT, reason=f"{target} kept changing")

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json-patch+json"
        request = self.api.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(*request, _request_timeout=30)
        data = response.read()
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason)
        return json.loads(data)

    # -- checks in the background ----------------------------------------------------------

    def next_wait(self) -> float:
        """Seconds until the next check: ``interval``, or less when a renewal falls due."""
        if self.bundle is None:
            return self.interval
        now = self.clock()
        due = (certificates.next_check(self.bundle, now) - now).total_seconds()
        return max(0.0, min(self.interval, due))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cert-manager", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.next_wait()):
            try:
                self.sync()
            except CertManagerError as error:
                log.warning("serving certificate not checked: %s", error)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def _why(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}"
    return str(error) or type(error).__name__


def start_managed(
    manager: CertManager, attempts: int = 10, wait: Callable[[float], Any] | None = None
) -> Bundle:
    """The first :meth:`CertManager.sync`, tried ``attempts`` times a second or more apart
    (the API server may still be starting), then the background checks."""
    pause = wait or threading.Event().wait
    delay = 1.0
    for attempt in range(attempts):
        try:
            bundle = manager.sync()
        except CertManagerError as error:
            if attempt == attempts - 1:
                raise
            log.warning("serving certificate: %s; trying again in %.0f s", error, delay)
            pause(delay)
            delay = min(delay * 2, 15.0)
            continue
        manager.start()
        return bundle
    raise CertManagerError("unreachable")
