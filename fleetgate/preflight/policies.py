"""The policies: that they load, and which job kinds they hold.

The kinds a policy set names are those its SchedulingPolicy's ``scope`` puts in scope: the
bindings the webhook holds and the reconciler places. ``scope`` is CEL over the binding's
``resource`` (and ``binding``), so each kind fleetgate reads is tried with a binding of that
kind in the probe namespace; an expression that fails counts as in scope, as the webhook
counts it. Without ``--policies`` the built-in SchedulingPolicy's scope is used: every batch
kind fleetgate reads.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from engine.errors import PolicyLoadError
from engine.policy.model import SchedulingPolicy
from engine.policy.policyset import default_scheduling_policy, load_policy_set
from engine.workloads.registry import known_kinds
from fleetgate.preflight.model import Check, fail, ok, plural, skip
from webhook.mutate import in_scope

SHOWN_ISSUES = 3
Kind = tuple[str, str]  # (apiVersion, kind)


def load(directory: Path | None) -> tuple[Check, SchedulingPolicy | None]:
    """The policies' row, and their SchedulingPolicy (the built-in one without ``directory``;
    None when they do not load)."""
    name = "policies"
    if directory is None:
        return skip(name, "no --policies: the built-in SchedulingPolicy's scope is used"), (
            default_scheduling_policy()
        )
    try:
        policies = load_policy_set([directory])
    except PolicyLoadError as error:
        issues = [str(issue) for issue in error.issues]
        shown = "; ".join(issues[:SHOWN_ISSUES])
        more = f" (and {len(issues) - SHOWN_ISSUES} more)" if len(issues) > SHOWN_ISSUES else ""
        return fail(
            name,
            f"{plural(len(issues), 'error')}: {shown}{more}",
            f"fleetgate validate {directory}",
        ), None
    detail = (
        f"version {policies.version}: {plural(len(policies.queues), 'queue')}, scheduling "
        f"policy {policies.scheduling.name!r}, {_admission(len(policies.admission))}"
    )
    return ok(name, detail), policies.scheduling


def kinds_in_scope(scheduling: SchedulingPolicy, namespace: str, now: dt.datetime) -> list[Kind]:
    """The kinds fleetgate reads that the scope holds, in ``namespace``, sorted."""
    held = []
    for api_version, kind in known_kinds():
        resource = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": "x"}
        binding = {
            "apiVersion": "work.karmada.io/v1alpha2",
            "kind": "ResourceBinding",
            "metadata": {"name": f"x-{kind.lower()}", "namespace": namespace},
            "spec": {"resource": resource},
        }
        if in_scope(scheduling, resource, binding, now) is not False:
            held.append((api_version, kind))
    return held


def _admission(count: int) -> str:
    return f"{count} admission polic{'y' if count == 1 else 'ies'}"
