"""The pure half of enforcement: what a pass must write, from the cycle's result and the objects.
Nothing here does I/O: the reconciler (``reconciler.loop``, ``reconciler.apply``) sends it.

- :func:`plan_pass` → :class:`PassPlan`: a pass's writes in order (``passplan``);
- the lifecycle of admitted jobs (``lifecycle``): :class:`Started`, :class:`Reclaim` (its
  :class:`Trigger`; :func:`reclaim` computes one), :class:`Confirm`; the triggers a simulator
  observes itself: :func:`failed_on_member`, :func:`not_ready_past_grace`,
  :func:`startup_overdue`;
- groups kept whole (``groupplan``, ``groupphase``): :class:`GroupRollback`,
  :class:`MemberPlan` (phase 1 of a group's binding), :class:`Unplan`;
- the merge patches and Event of each (``plan``): :func:`plan`, :func:`plan_transition`,
  :func:`plan_rollback`, :func:`status_patch` → :class:`Plan` (:class:`StatusUpdate`,
  :class:`EventSpec`), in a :class:`Mode`; :class:`PlanError` for a caller's bug;
- what ``PassSummary.applied_to`` records for the group writes: ``PLANNED``, ``ROLLED_BACK``,
  ``PLAN_CLEARED``.
"""

from engine.enforce.groupphase import PLANNED, MemberPlan, Unplan
from engine.enforce.groupplan import PLAN_CLEARED, ROLLED_BACK, GroupRollback, plan_rollback
from engine.enforce.lifecycle import (
    Confirm,
    Found,
    Reclaim,
    Started,
    Trigger,
    failed_on_member,
    not_ready_past_grace,
    reclaim,
    startup_overdue,
)
from engine.enforce.passplan import PassPlan, plan_pass
from engine.enforce.plan import (
    EventSpec,
    Mode,
    Plan,
    PlanError,
    StatusUpdate,
    plan,
    plan_transition,
    status_patch,
)

__all__ = [
    "PLANNED",
    "PLAN_CLEARED",
    "ROLLED_BACK",
    "Confirm",
    "EventSpec",
    "Found",
    "GroupRollback",
    "MemberPlan",
    "Mode",
    "PassPlan",
    "Plan",
    "PlanError",
    "Reclaim",
    "Started",
    "StatusUpdate",
    "Trigger",
    "Unplan",
    "failed_on_member",
    "not_ready_past_grace",
    "plan",
    "plan_pass",
    "plan_rollback",
    "plan_transition",
    "reclaim",
    "startup_overdue",
    "status_patch",
]
