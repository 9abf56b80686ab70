"""An informer for one resource: list, then watch from the list's resourceVersion, into a cache.

The shape of client-go's reflector + store (docs: CONVENTIONS.md, "Controllers"):

- list across all namespaces in pages (``limit``/``continue``), replace the cache, set
  :attr:`Informer.synced`;
- watch from the list's resourceVersion with bookmarks; ADDED/MODIFIED/DELETED update the cache
  and call the listeners; every event and bookmark advances :attr:`Informer.resource_version`;
- a watch that ends (the server's ``timeoutSeconds``, a dropped connection) is resumed from the
  last resourceVersion, without a relist;
- 410 Gone (an ApiException from ``Watch.stream``, or an ERROR event with code 410) → relist;
  the listeners hear the difference between the old cache and the new list;
- 504 Timeout with cause ``ResourceVersionTooLarge`` (the resume point is one the server has not
  reached) → relist, as client-go's reflector does. An API server restarted with its state reset
  (etcd restored or wiped without ``--bump-revision``) counts again from below the informer's
  resourceVersion, and kube-apiserver accepts a watch from a version it has not reached and
  keeps it silent until its counter passes it (the watch cache lets it wait for its events): no
  error comes. So a watch that ended having brought nothing (no event, no bookmark) is followed
  by a check of the resume point, a one-item list ``resourceVersionMatch=NotOlderThan`` it:
  the server answers it (after up to 3 s, its watch cache's blockTimeout) with that 504 when it
  is behind, and the informer relists. A healthy watch brings at least its bookmarks, so the
  check is rare. Not detectable: a server restarted empty whose counter has already passed the
  informer's version before it asks (events in between are missed, as with client-go);
- other errors: exponential backoff with jitter, bounded; a resource the server does not serve
  (404 on every version) is logged once, counts as synced and empty, and is retried rarely.

The cache holds the objects as the server sent them; they are shared, never mutated: readers
must not change them either.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from reconciler.backoff import Backoff
from reconciler.problems import PROBLEMS, describe
from reconciler.resources import Resource
from reconciler.transport import ResourceClient

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace or "", name)
# listener(resource key such as "resourcebindings.work.karmada.io", object key, object or None
# when deleted); called on the informer's thread, after the cache changed: keep it quick
Listener = Callable[[str, Key, Mapping[str, Any] | None], None]
GONE, NOT_FOUND, TIMEOUT = 410, 404, 504
TOO_LARGE_CAUSE, TOO_LARGE_TEXT = "ResourceVersionTooLarge", "Too large resource version"
AHEAD = "%s: the server has not reached resourceVersion %s (its state was reset?); relisting"


class Gone(Exception):
    """The resume point is too old: relist."""


class TooLarge(Exception):
    """The resume point is one the server has not reached (its state was reset): relist."""


def too_large(error: ApiException) -> bool:
    """504 Timeout with cause ResourceVersionTooLarge, or the message older servers and the
    watch's ERROR event carry (client-go's ``isTooLargeResourceVersionError``)."""
    if error.status != TIMEOUT:
        return False
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        status = {}
    details = status.get("details") if isinstance(status, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict) and (
            cause.get("reason") == TOO_LARGE_CAUSE or cause.get("message") == TOO_LARGE_TEXT
        ):
            return True
    return TOO_LARGE_TEXT in f"{error.reason} {error.body or ''}"


class Informer:
    def __init__(
        self,
        api_client: ApiClient,
        resource: Resource,
        *,
        page_size: int = 500,
        watch_timeout: int = 60,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        not_served_retry: float = 300.0,
        rng: random.Random | None = None,
    ) -> None:
        self.resource = resource
        self._client = ResourceClient(api_client, resource)
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._backoff = Backoff(backoff_base, backoff_max, rng)
        self._not_served_retry = not_served_retry
        self._lock = threading.Lock()
        self._cache: dict[Key, Mapping[str, Any]] = {}
        self._listeners: list[Listener] = []
        self._recorders: list[Listener] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
        self.synced = threading.Event()
        self.resource_version = ""
        self.served: bool | None = None  # None until the first list answered
        self.version = resource.versions[0]
        self.lists = 0  # complete lists so far (the first one, then each relist)
        self.errors = 0  # errors met (each followed by a backoff)
        self._problem = ""  # the key of the problem last reported (reconciler.problems)
        self._server = str(getattr(api_client.configuration, "host", "") or "")

    # -- public ------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def add_recorder(self, recorder: Listener) -> None:
        """Like a listener, but called with the cache's lock held, as the cache changes: once
        the cache holds an object, every recorder has heard of it (the reconciler's record of
        what changed since its last pass, ``reconciler.informers.Changes``). It must be quick
        and must not call back into the informer."""
        self._recorders.append(recorder)

    def start(self) -> Informer:
        if self._thread is not None:
            raise RuntimeError(f"the informer of {self.resource.key} is already started")
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{self.resource.key}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread: the open watch's socket is shut down, a backoff wait cut short."""
        self._stopping.set()
        current = self._watch
        if current is not None:
            current.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def snapshot_items(self) -> dict[Key, Mapping[str, Any]]:
        """A consistent copy of the cache (the objects themselves are shared, read-only)."""
        with self._lock:
            return dict(self._cache)

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self._lock:
            return self._cache.get((namespace, name))

    # -- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        need_list = True
        while not self._stopping.is_set():
            try:
                if need_list:
                    if not self._list():
                        self._stopping.wait(self._not_served_retry)
                        continue
                    need_list = False
                if not self._watch_once():
                    self._check_resume_point()
            except Gone:
                log.info("%s: resourceVersion %s expired; relisting", *self._where())
                need_list = True
            except TooLarge:
                log.warning(AHEAD, *self._where())
                need_list = True
            except ApiException as error:
                if error.status == GONE or too_large(error):
                    if error.status != GONE:
                        log.warning(AHEAD, *self._where())
                    need_list = True
                    continue
                self._fail(error)
                need_list = need_list or error.status == NOT_FOUND  # the CRD went away
            # Broad on purpose: the loop is the informer's whole life; a connection reset, a
            # TLS error, a malformed line or a listener's bug must not end watching for good.
            except Exception as error:  # noqa: BLE001
                if self._stopping.is_set():
                    return  # stop() shut the watch's socket: the error is ours
                self._fail(error)

    def _where(self) -> tuple[str, str]:
        return self.resource.key, self.resource_version

    def _fail(self, error: BaseException) -> None:
        """A failed list or watch: said once per distinct problem (``reconciler.problems``),
        then a wait of the backoff."""
        self.errors += 1
        delay = self._backoff.next()
        what = f"list and watch {self.resource.key}"
        key, line = describe(error, what, self._server)
        PROBLEMS.report(key, line)
        self._problem = key
        log.debug("%s: %s; retrying in %.2fs", self.resource.key, error, delay)
        self._stopping.wait(delay)

    def _answered(self) -> None:
        """The API server answered: the backoff starts again, a problem reported is over."""
        self._backoff.reset()
        if self._problem:
            PROBLEMS.over(self._problem, f"{self.resource.key}: the API server answers again")
            self._problem = ""

    def _list(self) -> bool:
        """List every version until one is served; False when none is (404 on each)."""
        for version in self.resource.versions:
            try:
                items, resource_version = self._list_version(version)
            except ApiException as error:
                if error.status == NOT_FOUND:
                    continue
                raise
            if self.served is False:
                log.info("%s: now served (%s)", self.resource.key, version)
            self.version, self.served = version, True
            self._replace(items, resource_version)
            return True
        if self.served is not False:
            log.warning(
                "%s: not served by the API server (404 on %s); retrying every %.0fs",
                self.resource.key,
                ", ".join(self.resource.versions),
                self._not_served_retry,
            )
        self.served = False
        self._replace({}, "")
        return False

    def _list_version(self, version: str) -> tuple[dict[Key, Mapping[str, Any]], str]:
        items: dict[Key, Mapping[str, Any]] = {}
        token, resource_version = "", ""
        while True:
            page = self._client.list_page(version, self._page_size, token)
            for obj in page.get("items") or []:
                items[key_of(obj)] = obj
            metadata = page.get("metadata") or {}
            resource_version = str(metadata.get("resourceVersion") or resource_version)
            token = str(metadata.get("continue") or "")
            if not token or self._stopping.is_set():
                return items, resource_version

    def _replace(self, items: dict[Key, Mapping[str, Any]], resource_version: str) -> None:
        """Swap in a complete list; the listeners hear what differs from the old cache."""
        with self._lock:
            old, self._cache = self._cache, items
            self.resource_version = resource_version
            self.lists += 1
            changed: list[tuple[Key, Mapping[str, Any] | None]] = []
            for key, obj in items.items():
                before = old.pop(key, None)
                if before is None or _version(before) != _version(obj):
                    changed.append((key, obj))
            changed += [(key, None) for key in old]
            for key, obj in changed:
                self._record(key, obj)
        self._answered()
        for key, obj in changed:
            self._notify(key, obj)
        self.synced.set()  # after the listeners heard the first list, as client-go's HasSynced

    def _check_resume_point(self) -> None:
        """TooLarge when the server has not reached :attr:`resource_version`: a one-item list
        not older than it (kube-apiserver answers 504 ResourceVersionTooLarge when behind)."""
        if not self.resource_version or self._stopping.is_set():
            return
        try:
            self._client.list_page(
                self.version, 1, resource_version=self.resource_version, match="NotOlderThan"
            )
        except ApiException as error:
            if too_large(error):
                raise TooLarge() from error
            raise

    def _watch_once(self) -> bool:
        """One watch request, from the last resourceVersion, until it ends; True when it
        brought anything (an event or a bookmark)."""
        current = watch.Watch()
        self._watch = current
        brought = False
        if self._stopping.is_set():  # stop() may have run before self._watch was set
            return True
        try:
            stream = current.stream(
                self._client.watch_function(self.version),
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self._watch_timeout,
            )  # no model for the events (the function has no return type): objects stay dicts
            for event in stream:
                brought = True
                self._handle(event)
                if self._stopping.is_set():
                    break
        finally:
            current.stop()
            self._watch = None
        return brought or self._stopping.is_set()

    def _handle(self, event: Mapping[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"a watch event without an object: {event!r}")
        if kind == "ERROR":
            if obj.get("code") == GONE:
                raise Gone()
            error = ApiException(status=obj.get("code") or 500, reason=str(obj.get("message")))
            error.body = json.dumps(obj)
            raise TooLarge() if too_large(error) else error
        version = _version(obj)
        if kind == "BOOKMARK":
            with self._lock:
                self.resource_version = version or self.resource_version
            return
        key = key_of(obj)
        with self._lock:
            if kind == "DELETED":
                self._cache.pop(key, None)
            elif kind in ("ADDED", "MODIFIED"):
                self._cache[key] = obj
            else:
                raise ValueError(f"unknown watch event type {kind!r}")
            self.resource_version = version or self.resource_version
            self._record(key, None if kind == "DELETED" else obj)
        self._answered()
        self._notify(key, None if kind == "DELETED" else obj)

    def _record(self, key: Key, obj: Mapping[str, Any] | None) -> None:
        """Tell the recorders (under the cache's lock)."""
        for recorder in self._recorders:
            try:
                recorder(self.resource.key, key, obj)
            except Exception:  # a recorder's bug must not stop the informer
                log.exception("%s: a recorder failed on %s", self.resource.key, key)

    def _notify(self, key: Key, obj: Mapping[str, Any] | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(self.resource.key, key, obj)
            except Exception:  # one listener's bug must not stop the others
                log.exception("%s: a listener failed on %s", self.resource.key, key)


def key_of(obj: Mapping[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _version(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("resourceVersion") or "") if isinstance(metadata, Mapping) else ""
