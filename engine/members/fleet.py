"""A fleet of simulated member clusters, built from a fleet file."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from engine.members.jobs import MemberError, MemberEvent
from engine.members.model import MemberCluster
from engine.members.spec import FleetSpec


class Fleet:
    """The MemberClusters of a FleetSpec, by name, in fleet-file order."""

    def __init__(self, spec: FleetSpec, now: dt.datetime | None = None) -> None:
        self.spec = spec
        self.members: dict[str, MemberCluster] = {
            c.name: MemberCluster(c, now) for c in spec.clusters
        }

    def __getitem__(self, name: str) -> MemberCluster:
        member = self.members.get(name)
        if member is None:
            raise MemberError(f"no member cluster {name!r} in the fleet")
        return member

    def __iter__(self) -> Iterator[MemberCluster]:
        return iter(self.members.values())

    def __len__(self) -> int:
        return len(self.members)

    def step(self, now: dt.datetime) -> list[MemberEvent]:
        """``MemberCluster.step`` on every member, in fleet order; the events in that order."""
        return [event for member in self for event in member.step(now)]

    def next_finish(self) -> dt.datetime | None:
        """The earliest time a running job ends on any member, or None."""
        ends = [t for m in self if (t := m.next_finish()) is not None]
        return min(ends) if ends else None
