"""The scheduling cycle: Snapshot + PolicySet + now → CycleResult (``engine.cycle.cycle`` has
the steps). This package's names are its one door: modules outside ``engine/cycle/`` import
these, never the modules inside (tests/test_layering.py checks it).

- :func:`run_cycle` decides every pending job; :class:`Cycle` is its working state, whose
  ``arrive`` decides a job that came after, against the state the cycle ended in;
- :func:`run_kept` runs it keeping what :func:`rerun` needs (:class:`Ran`) to decide, at the
  same time, only the jobs that changed since;
- :class:`Baseline`: the cycle ``fleetgate simulate --compare baseline`` measures against;
- :class:`JobCache` keeps what a cycle read between cycles;
- :class:`CycleResult`: the decisions (:class:`Decision`: :class:`Action`, :class:`Reason`),
  a :class:`QueueReport` per queue, and ``jobs``, a :class:`JobRecord` (:class:`JobState`) per
  managed job the cycle read;
- :data:`NEVER`: the reasons a job will not be admitted however long it waits;
- :func:`map_template`: what the SchedulingPolicy says about a template (:class:`Mapped`),
  evaluated as the cycle does, over :class:`JobValues`, the one builder of the CEL ``job``;
- :func:`group_label`: the co-admission group a job's template names;
- :func:`pending_note`: a waiting job's reason and message without live numbers;
- :func:`shapes_wanted`: the pod shapes pending jobs ask for (what the estimators are asked).
"""

from engine.cycle.baseline import Baseline
from engine.cycle.cycle import run_cycle
from engine.cycle.explain import pending_note
from engine.cycle.groups.formation import group_label
from engine.cycle.incremental import Cycle
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.mapping import map_template
from engine.cycle.jobs.model import Mapped
from engine.cycle.jobs.values import JobValues
from engine.cycle.model import (
    CycleResult,
    Decision,
    JobRecord,
    JobState,
    QueueReport,
)
from engine.cycle.placement.estimates import shapes_wanted
from engine.cycle.reasons import NEVER, Action, Reason
from engine.cycle.reuse import Ran, rerun, run_kept

__all__ = [
    "NEVER",
    "Action",
    "Baseline",
    "Cycle",
    "CycleResult",
    "Decision",
    "JobCache",
    "JobRecord",
    "JobState",
    "JobValues",
    "Mapped",
    "QueueReport",
    "Ran",
    "Reason",
    "group_label",
    "map_template",
    "pending_note",
    "rerun",
    "run_cycle",
    "run_kept",
    "shapes_wanted",
]
