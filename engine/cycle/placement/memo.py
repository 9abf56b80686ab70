"""What placement keeps between cycles for one policy version, and its candidate lists."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.fleet.model import ClusterView
from engine.policy import cel
from engine.policy.access import Projector
from engine.policy.memo import MemoEvaluator
from engine.policy.policyset import PolicySet

JOB_SIDE = frozenset({"job", "queue", "now"})


@dataclass(frozen=True, slots=True)
class Candidates:
    names: tuple[str, ...]  # passing every static check and filter, preferred first
    preference: Mapping[str, int]  # affinity group index per candidate (0 best)
    reasons: Mapping[str, str]  # why each other cluster is out
    error: str  # a filter's CEL error, when one failed
    later: tuple[str, ...] = ()  # out only for now (not Ready, excluded for a while)


MAX_STATIC = 100_000


class PlacementMemo:
    """What placement keeps between cycles for one policy version (in the ``JobCache``).

    The CEL results (keyed by every field the expressions read, ``cluster.free`` included, so
    they hold in any cycle), the projectors (persistent, so a job's projection can be kept on
    its ``JobValues``), and the static candidates, kept only while the clusters' views are the
    very same objects as in the cycle that found them.
    """

    __slots__ = (
        "cluster_projector",
        "job_projector",
        "memo",
        "reads_free",
        "reads_queue",
        "static",
        "views",
    )

    def __init__(self, policies: PolicySet) -> None:
        placement = policies.scheduling.placement
        programs = [f.expression.program for f in placement.filters] + [
            s.expression.program for s in placement.scores
        ]
        self.memo = MemoEvaluator(programs, cel.PLACEMENT_VARS, max_entries=500_000)
        paths = [p for program in programs for p in program.accesses]
        self.job_projector = Projector(p for p in paths if p[0] in JOB_SIDE)
        self.cluster_projector = Projector(p for p in paths if p[0] == "cluster")
        self.reads_queue = any(p[0] == "queue" for p in paths)
        # filters reading cluster.free (or the whole cluster) change as the cycle admits: no
        # static candidate cache
        self.reads_free = any(p[:2] == ("cluster", "free") or p == ("cluster",) for p in paths)
        self.views: tuple[ClusterView, ...] | None = None
        self.static: dict[Any, Candidates] = {}

    def static_for(self, views: tuple[ClusterView, ...]) -> dict[Any, Candidates]:
        """The static candidates cache for clusters with these views: the kept one when they
        are the same objects, in the same order, as last time; else a new, empty one."""
        kept = self.views
        if (
            kept is None
            or len(kept) != len(views)
            or any(a is not b for a, b in zip(kept, views, strict=True))
        ):
            self.views = views
            self.static = {}
        return self.static
