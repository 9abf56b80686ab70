"""A test that needs a tool skips without it on a developer's machine and fails under CI=true."""

from __future__ import annotations

import pytest

from tests.conftest import require_tool

ABSENT = "fleetgate-no-such-tool"


def test_a_missing_tool_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{ABSENT} is not installed"):
        require_tool(ABSENT)


def test_a_missing_tool_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    expected = r"CI=true: scripts/test-tools\.sh must provide it"
    with pytest.raises(pytest.fail.Exception, match=expected):
        require_tool(ABSENT)


def test_a_present_tool_is_found_by_path(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert require_tool("sh").endswith("/sh")
