"""Issue 31, item 1: ``fleetgate jobs / queues / describe job`` on the live fleet, with each
user's own kubeconfig, through the sandbox's aggregation of ``fleetgate serve
--visibility-port`` (the path of tests/reconciler/test_visibility_e2e.py); and the same as
``kubectl fleetgate …`` through kubectl's plugin lookup."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.annotations import format_time
from fleetgate.cli import main as fleetgate
from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from tests.conftest import REPO, require_tool
from tests.reconciler.test_loop import (
    binding,
    caught_up,
    clock,
    custom,
    eventually,
    fleet_world,
    reconciler,
    submit,
)
from tests.reconciler.test_visibility import other_namespace, serve_two_tenants, visibility_url
from tests.reconciler.test_visibility_e2e import (
    ALICE,
    PREFIX,
    SERVICE,
    may_read_jobs,
    raw,
    register,
    sandbox,
)
from tests.webhook.helpers import write_certificates

__all__ = ["clock", "custom", "fleet_world", "reconciler", "sandbox"]  # fixtures used by name


def rows(text: str) -> list[list[str]]:
    """A table's rows under its header, split into cells (cells hold no spaces but MESSAGE)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return [line.split() for line in lines[1:]]


def documented_commands() -> list[str]:
    """The live commands docs/submitting-jobs.md's table shows (its first column's)."""
    text = (REPO / "docs" / "submitting-jobs.md").read_text()
    found = re.findall(r"^\| `(fleetgate [a-z]+[^`|]*)` \|", text, flags=re.M)
    assert len(found) >= 4, found
    return found


def in_namespace(kubeconfig: Path, namespace: str) -> Path:
    """``kubeconfig`` with its context in ``namespace``, as a tenant's kubeconfig usually is."""
    config = yaml.safe_load(kubeconfig.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    kubeconfig.write_text(yaml.safe_dump(config))
    return kubeconfig


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = fleetgate(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_each_user_sees_the_live_fleet_that_rbac_allows(
    sandbox: Sandbox, api_client, kubeconfig: Path, custom,
    fleet_world: KarmadaControllers, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    cert, key, serving_ca, _ = write_certificates(tmp_path / "serving")
    other_namespace(api_client, "team-b")
    may_read_jobs(api_client, "research", "alice")
    register(api_client, serving_ca)
    served = serve_two_tenants(kubeconfig, custom, fleet_world, (cert, key), tmp_path / "v.log")
    try:
        served.wait_ready()
        sandbox.service_urls[SERVICE] = visibility_url(served)
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
        submit(custom, "second", workers=3)  # 32 GPUs, a whole cluster: waits while both run
        fleet_world.run_once()

        def api_says() -> dict | None:
            code, out = raw(kubeconfig, f"{PREFIX}/namespaces/research/jobs/second")
            found = json.loads(out) if code == 0 else {}
            return found if found.get("state") == "pending" and found.get("position") else None

        eventually(lambda: api_says() is not None, 30)
        said = api_says()
        assert said is not None
        alice = str(in_namespace(sandbox.write_kubeconfig(tmp_path / "a.yaml", ALICE), "research"))
        admin = str(kubeconfig)

        code, out, err = run(capsys, "jobs", "--kubeconfig", alice, "-n", "research")
        assert code == 0, err
        listed = {r[0]: r for r in rows(out)}
        assert set(listed) == {"first", "second"}
        _, queue, state, position, reason, _age, clusters, gpus = listed["second"]
        assert (queue, state, position, reason) == (
            said["queue"],
            "pending",
            str(said["position"]),
            said["reason"],
        )
        assert (clusters, gpus) == ("-", "32")
        assert listed["first"][2] in ("admitted", "running") and listed["first"][6] != "-"

        # every namespace: alice may not, and is shown her context's namespace instead, saying so
        with pytest.raises(SystemExit) as usage:  # -n and -A together: a usage error
            run(capsys, "jobs", "--kubeconfig", alice, "-A", "-n", "research")
        assert usage.value.code == 2
        capsys.readouterr()
        code, out, err = run(capsys, "jobs", "--kubeconfig", alice, "-A")
        assert code == 0 and "you may not list the jobs of every namespace" in err, (out, err)
        assert "the jobs of namespace research" in err  # her context's
        assert {r[0] for r in rows(out)} == {"first", "second"}
        code, out, err = run(capsys, "jobs", "--kubeconfig", alice, "-n", "team-b")
        assert code == 1 and 'User "alice" cannot list resource "jobs"' in err, err
        code, out, err = run(capsys, "jobs", "--kubeconfig", alice, "-A", "--context", "x")
        assert code == 1 and "cannot read the kubeconfig" in err
        code, out, err = run(capsys, "jobs", "--kubeconfig", admin, "-A", "--state", "pending")
        assert code == 0, err
        assert [(r[0], r[1]) for r in rows(out)] == [("research", "second")]
        code, out, err = run(capsys, "jobs", "--kubeconfig", admin, "-A", "-o", "json")
        every = json.loads(out)["items"]
        spaces = {i["binding"].split("/")[0] for i in every}
        assert spaces == {"research", "team-b"}

        code, out, err = run(capsys, "queues", "--kubeconfig", admin)
        assert code == 0, err
        by_queue = {r[0]: r for r in rows(out)}
        used = by_queue["research-training"][1].split("/")[0]
        assert float(used) >= 24 and by_queue["research-training"][6] == "1"  # one pending

        code, out, err = run(capsys, "clusters", "--kubeconfig", admin)
        assert code == 0, err
        by_cluster = {r[0]: r for r in rows(out)}
        assert set(by_cluster) == {"cpu-spot", "gpu-east", "gpu-west"}
        assert [by_cluster[c][1:3] for c in ("gpu-east", "gpu-west")] == [["True", "32"]] * 2
        # what the jobs list says is admitted where (first: 24 GPUs), counted per cluster
        admitted = [i for i in every if i["state"] == "admitted"]
        assert admitted and sum(int(r[5]) for r in by_cluster.values()) == len(admitted)
        where = admitted[0]["clusters"][0]["name"]
        assert by_cluster[where][5:7] == [str(len(admitted)), "24"]

        code, out, err = run(capsys, "describe", "job", "research/second", "--kubeconfig", admin)
        assert code == 0, err
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line[:20])
        assert fields["State"].strip() == "pending"
        assert fields["Position"].strip() == str(said["position"])
        events = out.partition("Events:")[2]
        assert "Queued" in events and f"position {said['position']}" in events, out
        assert "Explanation:" in out and said["reason"] in out.partition("Explanation:")[2]

        # every command docs/submitting-jobs.md shows, as it shows it (NS/NAME: this job)
        operator = str(in_namespace(sandbox.write_kubeconfig(tmp_path / "op.yaml"), "research"))
        for command in documented_commands():
            words = command.replace("NS/NAME", "research/second").split()[1:]
            code, out, err = run(capsys, *words, "--kubeconfig", operator)
            assert code == 0 and out.strip(), (command, err)

        # the same through kubectl's plugin lookup (kubectl-fleetgate on PATH)
        kubectl = require_tool("kubectl")
        plugin_dir = str(Path(sys.executable).parent)
        env = {**os.environ, "KUBECONFIG": alice, "PATH": f"{plugin_dir}:{os.environ['PATH']}"}
        done = subprocess.run(
            [kubectl, "fleetgate", "jobs", "-n", "research"],
            capture_output=True, text=True, timeout=60, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert {r[0] for r in rows(done.stdout)} == {"first", "second"}
    finally:
        served.stop()


def test_a_kubeconfig_that_cannot_be_read_is_one_clear_line(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("not: [a kubeconfig")
    code, out, err = run(capsys, "jobs", "--kubeconfig", str(broken))
    assert code == 1 and out == ""
    assert err.startswith("fleetgate: cannot read the kubeconfig:") and err.count("\n") == 1


def test_an_api_server_without_the_visibility_api_says_what_to_register(
    kubeconfig: Path, capsys
) -> None:
    code, out, err = run(capsys, "queues", "--kubeconfig", str(kubeconfig))
    assert code == 1 and out == ""
    assert "does not serve the visibility API" in err and "APIService" in err, err


def test_a_dry_run_of_the_live_fleet_decides_as_the_reconcilers_next_pass(
    kubeconfig: Path, custom, fleet_world: KarmadaControllers, reconciler, clock,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    submit(custom, "first", workers=2)
    submit(custom, "second", workers=3)
    submit(custom, "third", workers=2)
    fleet_world.run_once()  # the detector binds them; the webhook holds them
    caught_up(reconciler, custom)
    now = clock()
    saved = tmp_path / "fleet.yaml"
    code, out, err = run(
        capsys, "dry-run", "--policies", str(REPO / "policies"), "--kubeconfig", str(kubeconfig),
        "--now", format_time(now), "-o", "json", "--save-snapshot", str(saved),
    )  # fmt: skip
    assert code == 0, err
    live = json.loads(out)["decisions"]
    assert {d["binding"] for d in live} >= {f"research/{n}-pytorchjob" for n in ("first", "second")}
    reconciler.run_once(now)
    assert reconciler.last_result is not None
    assert [d.to_json() for d in reconciler.last_result.decisions] == live
    # what was read, saved, decides the same again offline
    code, out, err = run(
        capsys, "dry-run", "--policies", str(REPO / "policies"), "--snapshot", str(saved),
        "--now", format_time(now), "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["decisions"] == live
