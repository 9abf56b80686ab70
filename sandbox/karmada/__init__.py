"""Karmada's part of the sandbox: detector, scheduler, binding controller, status, members.

See :mod:`sandbox.karmada.controllers` and docs/sandbox.md.
"""

from sandbox.karmada.controllers import KarmadaControllers, Timings
from sandbox.karmada.members import EngineMember, Member

__all__ = ["EngineMember", "KarmadaControllers", "Member", "Timings"]
