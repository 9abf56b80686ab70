"""Which namespaces may use a queue: ``Queue.spec.namespaceSelector`` (as Kueue's
ClusterQueue has it), on the queue and every ancestor. The cycle rejects a job whose namespace
may not use its queue (``QueueNotAllowed``), and the webhook denies its template with the same
words."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from engine.policy.model import Queue
from engine.policy.policyset import PolicySet


def refusal(
    policies: PolicySet, queue: str, namespace: str, labels: Mapping[str, str]
) -> str | None:
    """Why a job of ``namespace`` (its Namespace's ``labels``) may not use ``queue``, or None
    when it may: every selector on the queue and its ancestors matches (no selector: any
    namespace). An unknown queue is not this check's business (``QueueNotFound``)."""
    for node in _lineage(policies, queue):
        selector = node.namespace_selector
        if selector is not None and not selector.matches(labels):
            whose = "its" if node.name == queue else f"its ancestor {node.name}'s"
            return (
                f"namespace {namespace} may not use queue {queue}: its labels do not match "
                f"{whose} spec.namespaceSelector"
            )
    return None


def open_leaves(policies: PolicySet) -> list[str]:
    """The leaf queues no selector guards, on themselves or an ancestor: open to every
    namespace."""
    parents = {q.parent for q in policies.queues if q.parent}
    return sorted(
        q.name
        for q in policies.queues
        if q.name not in parents
        and all(n.namespace_selector is None for n in _lineage(policies, q.name))
    )


def _lineage(policies: PolicySet, name: str | None) -> Iterator[Queue]:
    """The queue named ``name`` and its ancestors, nearest first (to the first unknown one;
    a loop, which the checks across documents refuse, ends it too)."""
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        node = policies.queue(name)
        if node is None:
            return
        yield node
        name = node.parent
