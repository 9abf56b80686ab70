"""``fleetgate diff`` output: a table for a terminal, markdown for a pull-request comment, JSON.

Each takes the ``Diff`` and the two sides' labels (what was given as ``--base`` and ``--head``).
"""

from __future__ import annotations

from typing import Any

from engine import vectors
from engine.annotations import format_time
from engine.cycle import Decision
from engine.diff import DecisionChange, Diff, QueueChange, vector_changes

# the JSON contract's names for the Decision fields that differ (engine.diff.DECISION_FIELDS)
_JSON_NAMES = {"cluster_reasons": "clusterReasons"}
MARKDOWN_ROWS = 100  # a pull-request comment holds 65,536 characters; the JSON has every change


def to_json(diff: Diff, base: str, head: str) -> dict[str, Any]:
    return {
        "base": {"policies": base, "policyVersion": diff.base_version},
        "head": {"policies": head, "policyVersion": diff.head_version},
        "now": format_time(diff.now),
        "changed": diff.changed,
        "summary": diff.summary(),
        "compared": diff.compared,
        "decisions": [
            {
                "workload": c.workload,
                "binding": c.binding,
                "queue": c.queue,
                "changed": [_JSON_NAMES.get(f, f) for f in c.fields],
                "before": c.before.to_json() if c.before else None,
                "after": c.after.to_json() if c.after else None,
            }
            for c in diff.decisions
        ],
        "queues": [
            {
                "name": q.name,
                "changed": list(q.fields),
                "before": q.before.to_json() if q.before else None,
                "after": q.after.to_json() if q.after else None,
            }
            for q in diff.queues
        ],
    }


def table(diff: Diff, base: str, head: str) -> str:
    lines = [
        f"base {base} (policy version {diff.base_version})",
        f"head {head} (policy version {diff.head_version})",
        f"now {format_time(diff.now)}: {diff.summary()}",
    ]
    if diff.decisions:
        rows = [["JOB", "QUEUE", "BEFORE", "AFTER"]]
        rows += [[c.workload, _queue(c), brief(c.before), brief(c.after)] for c in diff.decisions]
        aligned = _aligned(rows)
        lines += ["", aligned[0]]
        for change, row in zip(diff.decisions, aligned[1:], strict=True):
            lines.append(row)
            lines += [f"    {side + ':':<7} {text}" for side, text in _messages(change)]
    if diff.queues:
        rows = [["QUEUE", "SHARE", "ADMITTED", "PENDING", "QUOTA CHANGES"]]
        rows += [_queue_row(q) for q in diff.queues]
        lines += ["", *_aligned(rows)]
    return "\n".join(lines)


def markdown(diff: Diff, base: str, head: str, limit: int = MARKDOWN_ROWS) -> str:
    lines = [
        f"### fleetgate diff: {diff.summary()}",
        "",
        f"One scheduling cycle under each policy set on the same snapshot, at "
        f"{format_time(diff.now)}: base `{base}` (policy version `{diff.base_version}`), "
        f"head `{head}` (policy version `{diff.head_version}`).",
    ]
    if diff.decisions:
        lines += ["", "| Job | Queue | Before | After |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{c.workload}` | {_cell(_queue(c))} | {_cell(brief(c.before))} | "
            f"{_cell(brief(c.after))} |"
            for c in diff.decisions[:limit]
        ]
        lines += _more(len(diff.decisions), limit, "decision")
    if diff.queues:
        lines += [
            "",
            "| Queue | Share | Admitted | Pending | Quota changes |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            "| " + " | ".join(_cell(cell) for cell in _queue_row(q)) + " |"
            for q in diff.queues[:limit]
        ]
        lines += _more(len(diff.queues), limit, "queue")
    if diff.decisions:
        lines += ["", "<details><summary>Why each decision changed</summary>", ""]
        for change in diff.decisions[:limit]:
            lines.append(f"- `{change.workload}` ({', '.join(change.fields)})")
            lines += [f"  - {side}: {_cell(text)}" for side, text in _messages(change)]
        lines += ["", "</details>"]
    return "\n".join(lines)


def brief(decision: Decision | None) -> str:
    """A decision in a few words: ``Pending WaitingForQuota #1``, ``Admit gpu-east=4``."""
    if decision is None:
        return "(no decision)"
    words = [str(decision.action)]
    if str(decision.reason) not in ("Admitted", "Preempted"):
        words.append(str(decision.reason))
    if decision.clusters:
        words.append(",".join(f"{c.name}={c.replicas}" for c in decision.clusters))
    if decision.position:
        words.append(f"#{decision.position}")
    if decision.preemptor:
        words.append(f"for {decision.preemptor}")
    return " ".join(words)


def _messages(change: DecisionChange) -> list[tuple[str, str]]:
    """The before and after messages, when they (or the decision's presence) differ."""
    if change.before and change.after and change.before.message == change.after.message:
        return []
    return [
        (side, decision.message if decision else "(no decision)")
        for side, decision in (("before", change.before), ("after", change.after))
    ]


def _queue(change: DecisionChange) -> str:
    old, new = change.before, change.after
    if old and new and old.queue != new.queue:
        return f"{old.queue or '-'} → {new.queue or '-'}"
    return change.queue or "-"


def _queue_row(change: QueueChange) -> list[str]:
    old, new = change.before, change.after
    if old is None or new is None:
        report = old or new
        assert report is not None
        where = "head" if old is None else "base"
        return [
            change.name,
            f"{report.share:.3f}",
            str(report.admitted),
            str(report.pending),
            f"only in the {where} policies",
        ]
    quota = "; ".join(
        part
        for part in (
            _vec_change(name, getattr(old, name), getattr(new, name))
            for name in ("usage", "guarantee", "max")
        )
        if part
    )
    return [
        change.name,
        _pair(f"{old.share:.3f}", f"{new.share:.3f}"),
        _pair(str(old.admitted), str(new.admitted)),
        _pair(str(old.pending), str(new.pending)),
        quota or "-",
    ]


def _vec_change(name: str, old: vectors.Vec, new: vectors.Vec) -> str:
    changes = vector_changes(old, new)
    if not changes:
        return ""
    amounts = ", ".join(f"{_short(r)} {_amount(r, a)} → {_amount(r, b)}" for r, a, b in changes)
    return f"{name} {amounts}"


def _amount(resource: str, milli: int | None) -> str:
    return "-" if milli is None else vectors.describe(resource, milli)


def _pair(before: str, after: str) -> str:
    return before if before == after else f"{before} → {after}"


def _short(resource: str) -> str:
    return {"nvidia.com/gpu": "gpu"}.get(resource, resource.removeprefix("kubernetes.io/"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _more(count: int, limit: int, what: str) -> list[str]:
    if count <= limit:
        return []
    return ["", f"…and {count - limit} more {what}(s); `-o json` lists every one."]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]
