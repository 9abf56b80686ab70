"""The last good policy set, kept in a ConfigMap so that a bad policy edit plus a restart is not
an outage.

The leader stores each policy set it loaded from the files (:class:`Keeper`, checked every few
seconds): one ConfigMap (``--last-good-configmap``, by default ``fleetgate-last-good-policies``
in the Lease's namespace) whose ``policies.yaml`` holds the set's documents as the version's
hash reads them, with the version in the annotation ``fleetgate.io/policy-version``. Loading
those documents again gives the same set and the same version.

A replica whose policy files do not load at start (:func:`fall_back`) reads that ConfigMap and
runs on the set in it: it says so in ``/readyz``, the ``fleetgate_policy_fallback`` metric, a
Warning Event on the ConfigMap and its log, and keeps watching the files; the first edit that
loads replaces the stored set. With no stored set it does not exit: it serves, unready, and
decides nothing until the files load.
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from engine import annotations as ann
from engine.enforce import EventSpec
from engine.errors import PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set
from engine.policy.reload import PolicyHolder
from reconciler.events import event_body

log = logging.getLogger(__name__)

DEFAULT_NAME = "fleetgate-last-good-policies"
KEY = "policies.yaml"
LIMIT = 1_000_000  # a ConfigMap holds at most 1 MiB
NOT_FOUND, CONFLICT = 404, 409


class LastGood:
    """The stored set: read it, replace it."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, name: str) -> None:
        self.core = kubernetes.client.CoreV1Api(api)
        self.namespace = namespace
        self.name = name
        self.where = f"ConfigMap {namespace}/{name}"

    def _read(self) -> Any | None:
        try:
            return self.core.read_namespaced_config_map(self.name, self.namespace)
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise

    def stored_version(self) -> str | None:
        found = self._read()
        notes = (found.metadata.annotations or {}) if found is not None else {}
        return notes.get(ann.POLICY_VERSION)

    def save(self, policies: PolicySet) -> bool:
        """Store ``policies`` unless the ConfigMap holds its version already; True when
        written. A set too large for a ConfigMap is logged and not stored."""
        text = "\n---\n".join(policies.documents)
        if not policies.documents or len(text.encode()) > LIMIT:
            log.error("policy set %s: too large to store as the last good set", policies.version)
            return False
        found = self._read()
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/name": "fleetgate-reconciler"},
                "annotations": {ann.POLICY_VERSION: policies.version},
            },
            "data": {KEY: text},
        }
        if found is None:
            self.core.create_namespaced_config_map(self.namespace, body)
        else:
            if (found.metadata.annotations or {}).get(ann.POLICY_VERSION) == policies.version:
                return False
            body["metadata"]["resourceVersion"] = found.metadata.resource_version
            self.core.replace_namespaced_config_map(self.name, self.namespace, body)
        log.info(
            "stored policy version %s as the last good set in %s", policies.version, self.where
        )
        return True

    def load(self, revision: str | None = None) -> PolicySet | None:
        """The stored set, or None when there is none (or it no longer loads)."""
        found = self._read()
        if found is None or not (found.data or {}).get(KEY):
            return None
        with tempfile.TemporaryDirectory(prefix="fleetgate-last-good-") as directory:
            path = Path(directory) / KEY
            path.write_text(found.data[KEY])
            try:
                return load_policy_set([path], revision=revision)
            except PolicyLoadError as error:
                log.error("the last good set in %s does not load: %s", self.where, error)
                return None

    def warn(self, message: str, now: dt.datetime) -> None:
        """A Warning Event on the ConfigMap: this replica runs on the stored set."""
        found = self._read()
        if found is None:
            return
        subject = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": found.metadata.uid,
                "resourceVersion": found.metadata.resource_version,
            },
        }
        suffix = f"{int(now.timestamp() * 1e6):x}"
        event = event_body(subject, EventSpec("Warning", "PolicyFallback", message), now, suffix)
        self.core.create_namespaced_event(self.namespace, event)


def fall_back(holder: PolicyHolder, store: LastGood, directory: Path, now: dt.datetime) -> bool:
    """The files in ``directory`` did not load at start: run on the stored set if there is
    one (True), else leave ``holder`` empty: the replica waits, unready (False)."""
    first = holder.status.errors[0] if holder.status.errors else "unknown error"
    try:
        policies = store.load()
    except (ApiException, OSError) as error:
        log.error("cannot read the last good policy set from %s: %s", store.where, error)
        policies = None
    if policies is None:
        log.error(
            "the policy files in %s do not load and %s holds no set: waiting, unready, until "
            "they load (%s)",
            directory,
            store.where,
            first,
        )
        return False
    if not holder.adopt(policies, store.where):
        return False
    message = (
        f"the policy files in {directory} do not load ({first}); running on the last good "
        f"set {policies.version}"
    )
    try:
        store.warn(message, now)
    except (ApiException, OSError) as error:
        log.warning("cannot record the fallback as an Event: %s", error)
    return True


class Keeper:
    """On the leader, stores each set the files loaded (not a fallback) as the last good one."""

    def __init__(
        self,
        holder: PolicyHolder,
        store: LastGood,
        is_leader: Callable[[], bool],
        interval: float = 5.0,
    ) -> None:
        self.holder = holder
        self.store = store
        self.is_leader = is_leader
        self.interval = interval
        self.saved: str | None = None  # the version known to be stored
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> bool:
        """Store the live set if it came from the files, this replica leads, and it is not
        stored yet; True when written."""
        status = self.holder.status
        if status.fallback is not None or status.version is None or not self.is_leader():
            return False
        if status.version == self.saved:
            return False
        policies = self.holder.current
        try:
            written = self.store.save(policies)
        except ApiException as error:
            if error.status != CONFLICT:  # a conflict: another writer; look again next time
                log.warning("cannot store the last good policy set: %s", error.reason)
            return False
        self.saved = policies.version
        return written

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="last-good-keeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
                # a write fenced at the lease deadline (reconciler.fence) is one of these
                log.warning("cannot store the last good policy set: %s", error)
            self._stop.wait(self.interval)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
