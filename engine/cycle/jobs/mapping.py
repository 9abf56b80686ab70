"""What the SchedulingPolicy says about one job (its queue, tenant, priority, gang settings,
dependencies and group), from its CEL expressions: evaluated once per (binding uid, generation,
policy version, PriorityClass value) and kept in the ``JobCache``. A template (the webhook's
review) is mapped with evaluators kept with its PolicySet, whose memo is keyed by what the
expressions read (``TEMPLATE_MEMO`` bounds it)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine import untrusted
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import Mapped, MappingEvaluators
from engine.cycle.jobs.values import JobValues
from engine.fleet.model import BindingView
from engine.policy import cel
from engine.policy.bounded import BoundedMemo
from engine.policy.model import SchedulingPolicy
from engine.policy.policyset import PolicySet
from engine.workloads.model import Workload

# the memo of template mappings, one per policy version: entries, estimated bytes, bytes an entry
TEMPLATE_MEMO = (20_000, 16 << 20, 64 << 10)


def map_job(
    policies: PolicySet,
    cache: JobCache,
    binding: BindingView,
    values: JobValues,
    priority_value: int,
    now: dt.datetime,
) -> Mapped:
    """The mapping of the job of ``binding``, kept in ``cache`` per binding generation, policy
    version and PriorityClass value."""
    key = (binding.uid, binding.name, binding.generation, policies.version, priority_value)
    found = cache.get(key)
    if found is not None:
        return found
    mapped = evaluate(policies.scheduling, cache.evaluators(policies), values, priority_value, now)
    cache.put(key, mapped)
    return mapped


def map_template(
    policies: PolicySet, workload: Workload, priority_value: int, now: dt.datetime
) -> Mapped:
    """The mapping of a template that has no binding yet (the webhook, ``fleetgate inspect``):
    the cycle's own evaluation, with the ``job`` variable the cycle builds, so a job is never
    mapped one way at admission and another in the cycle. The evaluators and their memo (keyed
    by what the expressions read, bounded by ``TEMPLATE_MEMO``) are kept with ``policies``;
    an expression that reads ``now`` is evaluated each time."""
    evaluators = policies.kept("cycle.map_template", _template_evaluators)
    values = JobValues(workload, priority_value)
    return evaluate(policies.scheduling, evaluators, values, priority_value, now)


def _template_evaluators(policies: PolicySet) -> MappingEvaluators:
    memo = BoundedMemo(*TEMPLATE_MEMO)
    return MappingEvaluators.of(policies.scheduling, memo, volatile=("now",))


def evaluate(
    s: SchedulingPolicy,
    evaluators: MappingEvaluators,
    values: JobValues,
    priority_value: int,
    now: dt.datetime,
) -> Mapped:
    variables = {"job": values, "now": now}
    (queue,) = evaluators.first.evaluate(variables)
    if isinstance(queue, cel.CelError):
        return Mapped("", "", priority_value, 0, False, f"{s.queue.path}: {queue}")
    if isinstance(queue, str) and untrusted.name_problem(queue, label=True):
        queue = untrusted.echo(queue, untrusted.LABEL_MAX)  # decided InvalidQueueName
    values.queue = queue
    results = evaluators.rest.evaluate(variables)
    paths = [s.tenant.path, s.priority.path, s.gang.min_member.path, s.gang.allow_split.path]
    error = next((f"{p}: {r}" for p, r in zip(paths, results, strict=True) if _failed(r)), "")
    tenant, priority, min_member, allow_split = results
    if error:
        return Mapped(queue, "", priority_value, 0, False, error)
    mapped = Mapped(queue, _echoed(tenant), priority, min_member, bool(allow_split))
    if evaluators.dependencies is not None:
        mapped = _with_dependencies(mapped, s, evaluators.dependencies.evaluate(variables))
    if evaluators.groups is not None and not mapped.error:
        mapped = _with_group(mapped, s, evaluators.groups.evaluate(variables))
    return mapped


def _with_dependencies(mapped: Mapped, s: SchedulingPolicy, results: Sequence[Any]) -> Mapped:
    """``mapped`` with the results of the policy's ``dependencies`` expressions (those set)."""
    after: Any = ()
    same: Any = ""
    found = iter(results)
    d = s.dependencies
    for expression in (d.after, d.same_cluster_as):
        if expression is None:
            continue
        result = next(found)
        if _failed(result):
            return replace(mapped, error=f"{expression.path}: {result}")
        if expression is d.after:
            if not isinstance(result, list | tuple) or not all(isinstance(r, str) for r in result):
                return replace(mapped, error=f"{expression.path}: not a list of strings")
            after = tuple(result)
        else:
            same = str(result)
    return replace(mapped, after=after, same_cluster_as=same)


def _with_group(mapped: Mapped, s: SchedulingPolicy, results: Sequence[Any]) -> Mapped:
    """``mapped`` with the group ``spec.groups`` names (``engine.cycle.groups.formation``), if any;
    size and min count only for a job the name puts in a group."""
    g = s.groups
    paths = [e.path for e in (g.name, g.size, g.min) if e is not None]
    name, size, *minimum = results
    if not _failed(name) and not str(name).strip():
        return mapped
    for path, result in zip(paths, results, strict=True):
        if _failed(result):
            return replace(mapped, error=f"{path}: {result}")
    return replace(mapped, group=(str(name).strip(), int(size), int(minimum[0]) if minimum else 0))


def _echoed(tenant: Any) -> Any:
    """A tenant is a label of decisions and metrics, not a name looked up: kept, made safe."""
    return untrusted.echo(tenant, untrusted.LABEL_MAX) if isinstance(tenant, str) else tenant


def _failed(result: Any) -> bool:
    return isinstance(result, cel.CelError)
