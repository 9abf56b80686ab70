"""The readers of the family modules cover exactly the kinds ``engine.workloads.kinds`` declares."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.workloads import registry
from engine.workloads.kinds import KINDS


def test_every_declared_kind_has_one_reader():
    assert set(registry.known_kinds()) == KINDS


def test_a_reader_of_an_undeclared_kind_is_refused():
    family = SimpleNamespace(READERS={**registry.READERS, ("example.com/v1", "Job"): print})
    with pytest.raises(ValueError, match=r"undeclared \[\('example.com/v1', 'Job'\)\]"):
        registry._readers(family)


def test_two_readers_of_one_kind_are_refused():
    family = SimpleNamespace(READERS={("v1", "Pod"): print})
    with pytest.raises(ValueError, match="two readers for v1 Pod"):
        registry._readers(SimpleNamespace(READERS=registry.READERS), family)
