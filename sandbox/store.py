"""The sandbox's object store: thread-safe, in memory, with the API server's write semantics.

This is the in-process API the sandbox's controllers call (the HTTP layer calls it too). Every
method takes a resource (a :class:`~sandbox.resources.ResourceType`, or its key such as
``"resourcebindings.work.karmada.io"`` or ``"configmaps"``), returns plain dicts that are the
caller's own copies, and raises :class:`~sandbox.errors.StatusError` with the Status the real
server would answer. ``version`` picks the apiVersion objects are returned in (default: the
storage version).

Semantics kept from kube-apiserver: one global resourceVersion counter; ``uid``,
``creationTimestamp``, ``generation`` (1 at create; +1 when anything outside metadata, and
status for kinds with a status subresource, changes; +1 when deletion starts); ``generateName``;
namespaces must exist; status dropped on create and ignored by updates of kinds with a status
subresource, and the status subresource changes only status; 409 on a stale resourceVersion;
no-op updates do not bump the resourceVersion; deletion with finalizers, ownerReferences
cascading (see :mod:`sandbox.deletion`); watches with resume and 410 Gone (:mod:`sandbox.watch`).

A read from a resourceVersion the store has not reached (a client of a server restarted with its
state reset) is answered as the watch cache answers it: a list waits up to
``freshness_timeout`` (the cacher's blockTimeout, 3 s) for the counter to get there, then fails
with 504 Timeout, cause ResourceVersionTooLarge; a watch is accepted and stays silent until the
counter passes it (no event at or below it, no bookmark below it).
"""

from __future__ import annotations

from sandbox.resources import Resource
from sandbox.writes import Writes

__all__ = ["Resource", "Store"]


class Store(Writes):
    """The store: reads and watches (:mod:`sandbox.storecore`), deletes (:mod:`sandbox.deletion`),
    writes (:mod:`sandbox.writes`)."""
