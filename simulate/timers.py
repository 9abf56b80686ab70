"""What the loop's timers do when they are due (``Simulation.timer`` sets them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate import objects
from simulate.live import Fault

if TYPE_CHECKING:
    from simulate.loop import Simulation


def on_timer(sim: Simulation, kind: str, payload: object, t: float) -> None:
    """A timer that is due: ``wake`` (a backoff or exclusion ended: look again),
    ``startup`` (admitted, not running within the startup timeout), ``fail`` (a failure drawn
    by ``--fail-rate``), ``grace`` (NotReady past the grace), ``fault`` (the fault script)."""
    if kind == "wake":
        sim.want_cycle = True
    elif kind == "startup":
        job, admission = payload  # type: ignore[misc]
        late = [p.cluster for p in job.parts.values() if p.started_at is None]
        if job.state == "admitted" and job.admissions == admission and late:
            why = f"not running {sim.rules.startup_timeout:g}s after admission"
            sim.fail(job, late, t, why)
    elif kind == "fail":
        job, key = payload  # type: ignore[misc]
        part = next((p for p in job.parts.values() if p.key == key), None)
        if job.state == "admitted" and part is not None and not part.done:
            sim.fail(job, [part.cluster], t, f"job failed on {part.cluster}")
    elif kind == "grace":
        name, down = payload  # type: ignore[misc]
        if sim.down.get(name) == down and not sim.members[name].ready:
            for job in [j for j in sim.admitted.values() if name in j.parts]:
                sim.fail(job, [name], t, f"cluster {name} NotReady past the grace")
    elif kind == "fault":
        _fault(sim, payload, t)  # type: ignore[arg-type]


def _fault(sim: Simulation, fault: Fault, t: float) -> None:
    now = objects.at(t)
    if fault.action in ("cluster-down", "cluster-up"):
        member = sim.members[fault.target]
        ready = fault.action == "cluster-up"
        member.set_ready(ready, now)
        sim.down[fault.target] = sim.down.get(fault.target, 0) + 1
        sim.stale.add(fault.target)
        sim.want_cycle = True
        if not ready:
            grace = t + sim.rules.cluster_not_ready_grace
            sim.timer(grace, "grace", (fault.target, sim.down[fault.target]))
        return
    job = sim.by_trace_name.get(fault.target)
    if job is not None and job.state == "admitted" and job.parts:
        clusters = sorted(p.cluster for p in job.parts.values() if not p.done)
        sim.fail(job, clusters, t, fault.message or "job failed (fault script)")
