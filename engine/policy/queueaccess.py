"""Which namespaces may use a queue: ``Queue.spec.namespaceSelector`` (as Kueue's
ClusterQueue has it), on the queue and every ancestor. The cycle rejects a job whose namespace
may not use its queue (``QueueNotAllowed``), and the webhook denies its template with the same
words."""

from __future__ import annotations

from collections.abc import Mapping

from engine.policy.policyset import PolicySet


def refusal(
    policies: PolicySet, queue: str, namespace: str, labels: Mapping[str, str]
) -> str | None:
    """Why a job of ``namespace`` (its Namespace's ``labels``) may not use ``queue``, or None
    when it may: every selector on the queue and its ancestors matches (no selector: any
    namespace). An unknown queue is not this check's business (``QueueNotFound``)."""
    seen: set[str] = set()
    name: str | None = queue
    while name is not None and name not in seen:
        seen.add(name)
        found = policies.queue(name)
        if found is None:
            return None
        selector = found.namespace_selector
        if selector is not None and not selector.matches(labels):
            whose = "its" if name == queue else f"its ancestor {name}'s"
            return (
                f"namespace {namespace} may not use queue {queue}: its labels do not match "
                f"{whose} spec.namespaceSelector"
            )
        name = found.parent
    return None


def open_leaves(policies: PolicySet) -> list[str]:
    """The leaf queues no selector guards, on themselves or an ancestor: open to every
    namespace."""
    parents = {q.parent for q in policies.queues if q.parent}
    found = []
    for q in policies.queues:
        if q.name in parents:
            continue
        chain, name, guarded = set(), q.name, False
        while name is not None and name not in chain:
            chain.add(name)
            node = policies.queue(name)
            if node is None:
                break
            guarded = guarded or node.namespace_selector is not None
            name = node.parent
        if not guarded:
            found.append(q.name)
    return sorted(found)
