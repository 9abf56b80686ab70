"""Issue 29, finding 6: strings a tenant writes were echoed as written. Group names with markup,
newlines and terminal escapes went into annotations, Events and the API; a 200 KB group name
gave a 200 KB annotation. Tried as a hostile tenant would, through ``fleetgate dry-run`` on the
example fleet and policies: a PyTorchJob whose queue (the Volcano queue-name annotation the
example SchedulingPolicy reads), group or dependency is 200 KB of markup and escapes is rejected
with a clear reason, and every string fleetgate would write or serve about it is short and holds
no control character."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine import untrusted
from engine.cycle.explain import NOTE_LIMIT, pending_note
from engine.cycle.model import Decision
from engine.cycle.reasons import Action, Reason
from fleetgate.cli import main
from tests.conftest import REPO

SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"
JOB = REPO / "examples" / "jobs" / "pytorch-finetune.yaml"
HOSTILE = "<b onclick=x>\n\x1b[31mred\x1b]0;title\x07\u202e" + "g" * 200_000
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
ECHO_MOST = 300  # what one echoed value may take, with its "…(+N characters)"


def decide(tmp_path: Path, capsys: pytest.CaptureFixture[str], notes: dict[str, str]) -> dict:
    job = copy.deepcopy(yaml.safe_load(JOB.read_text()))
    job["metadata"]["name"] = "hostile"
    job["metadata"].setdefault("annotations", {}).update(notes)
    job["metadata"].get("labels", {}).pop("fleetgate.io/queue", None)  # the annotation decides
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    code = main(
        ["dry-run", "--policies", str(REPO / "policies"), "--snapshot", str(SNAPSHOT),
         "--job", str(path), "--now", "2025-03-10T10:00:00Z", "-o", "json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out[:2000]
    found = [d for d in json.loads(out)["decisions"] if d["workload"].endswith("/hostile")]
    assert len(found) == 1, out[:2000]
    return found[0]


def safe(decision: dict[str, Any]) -> None:
    """Every string of the decision is short and free of control characters, and so is what
    its binding would say (``fleetgate.io/pending``)."""
    texts = [v for v in decision.values() if isinstance(v, str)]
    texts += [g for g in (decision.get("group") or {}).values() if isinstance(g, str)]
    for text in texts:
        assert len(text) < 2 * ECHO_MOST and not CONTROL.search(text), text[:400]
    said = pending_note(
        Decision(
            decision["binding"], decision["workload"], decision["queue"], decision["tenant"],
            decision["priority"], Action(decision["action"]), Reason(decision["reason"]),
            decision["message"],
        )
    )  # fmt: skip
    assert len(said) <= NOTE_LIMIT + 26 and not CONTROL.search(said)


@pytest.mark.parametrize(
    ("notes", "reason", "says"),
    [
        ({"scheduling.volcano.sh/queue-name": HOSTILE}, "InvalidQueueName", "not a DNS-1123 label"),
        ({"fleetgate.io/group": HOSTILE, "fleetgate.io/group-size": "2"}, "InvalidGroup",
         "the group name"),
        ({"fleetgate.io/after": HOSTILE}, "InvalidDependency", "the name"),
        ({"fleetgate.io/after": "Bad Kind/ns/x"}, "InvalidDependency", "not a Kind"),
        ({"fleetgate.io/same-cluster-as": "team_a/x"}, "InvalidDependency", "the namespace"),
    ],
    ids=["queue", "group", "after", "kind", "same-cluster-as"],
)  # fmt: skip
def test_a_hostile_name_is_rejected_and_echoed_short_and_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], notes: dict, reason: str, says: str
) -> None:
    decision = decide(tmp_path, capsys, notes)
    assert (decision["action"], decision["reason"]) == ("Reject", reason), decision["message"][:500]
    assert says in decision["message"]
    safe(decision)


def test_a_valid_group_name_is_kept_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = decide(
        tmp_path, capsys, {"fleetgate.io/group": "ok-1", "fleetgate.io/group-size": "2"}
    )
    assert decision["reason"] == "WaitingForGroup" and decision["group"]["name"].endswith("/ok-1")


@given(st.text(), st.integers(min_value=1, max_value=400))
def test_echo_escapes_every_unsafe_character_and_caps_the_length(text: str, limit: int) -> None:
    said = untrusted.echo(text, limit)
    assert not CONTROL.search(said)
    assert len(said) <= limit + 26
    if len(text) <= limit and not CONTROL.search(text) and "\ufeff" not in text:
        assert said == text and "\u200e" not in said  # nothing to do: kept as written


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True))
def test_a_kubernetes_name_has_no_problem(name: str) -> None:
    assert untrusted.name_problem(name) is None
    assert untrusted.name_problem(name, label=True) is None
    assert untrusted.name_problem(name + "\n") is not None
    assert untrusted.name_problem(name + "." + "x" * 253) is not None
