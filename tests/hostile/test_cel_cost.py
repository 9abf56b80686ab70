"""CEL with a cost limit: a static estimate at load time and a runtime budget per evaluation.

Expressions that cost too much in the worst case are refused by ``validate`` with their place;
an admitted expression that runs past its budget fails that one evaluation (``PolicyEvalError``
in a cycle, the AdmissionPolicy's ``failurePolicy`` in the webhook).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from flask import Flask

from engine.policy import cel, celcost, celtranspile
from engine.policy.celcheck import BOOL
from engine.policy.celcost import CelLimits
from engine.policy.policyset import load_policy_set
from engine.policy.reload import PolicyHolder
from fleetgate.cli import main
from tests.conftest import REPO
from tests.webhook.helpers import review

QUADRATIC = (
    "object.spec.template.spec.containers.all(c, "
    "c.env.all(e, c.env.exists_one(f, f.name == e.name)))"
)
HUNDRED = "[" + ", ".join(map(str, range(100))) + "]"
THOUSAND = "[" + ", ".join(map(str, range(1000))) + "]"
TEN_THOUSAND = "[" + ",".join(map(str, range(10_000))) + "]"
LITERAL_COMPREHENSIONS = {
    "nested map over literal lists (10^5 elements)": f"{HUNDRED}.map(a, {THOUSAND}.map(b, a + b))"
    ".size() > 0",
    "a 10^4-element literal times a 10-element one": f"{TEN_THOUSAND}.all(x, "
    "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].exists(y, x != y))",
}
COSTLY_AT_RUN_TIME = (
    "job.components.filter(c, job.components.exists(d, d.replicas > c.replicas)).size() >= 0"
)


def admission_policy(expression: str, failure_policy: str = "Fail") -> str:
    return (
        "apiVersion: fleetgate.io/v1alpha1\nkind: AdmissionPolicy\nmetadata:\n  name: costly\n"
        f"spec:\n  failurePolicy: {failure_policy}\n  validations:\n"
        f"    - expression: {json.dumps(expression)}\n      message: costly check failed\n"
    )


def validate(capsys: pytest.CaptureFixture[str], directory: Path) -> tuple[int, str]:
    code = main(["validate", str(directory)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def policies_with(tmp_path: Path, name: str, text: str) -> Path:
    directory = tmp_path / "policies"
    shutil.copytree(REPO / "policies", directory, ignore=shutil.ignore_patterns("kustom*"))
    (directory / name).write_text(text)
    return directory


def test_validate_refuses_the_quadratic_env_var_check_at_its_costliest_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = policies_with(tmp_path, "costly.yaml", admission_policy(QUADRATIC))
    code, out = validate(capsys, directory)
    assert code == 1
    found = re.search(r"costly\.yaml:8:([0-9]+): AdmissionPolicy/costly: spec\.validations\[0\]"
                      r"\.expression: CEL cost: estimated cost", out)  # fmt: skip
    assert found, out
    column = int(found.group(1))  # the costliest part, `==`
    line = (directory / "costly.yaml").read_text().splitlines()[7]
    assert line[column - 1 : column + 1] == "=="
    assert re.search(r"exceeds the limit 100,000 \(the costliest part, [0-9.e+]+: ==", out)
    assert "inside 3 comprehensions" in out


@pytest.mark.parametrize("expression", LITERAL_COMPREHENSIONS.values(), ids=LITERAL_COMPREHENSIONS)
def test_validate_refuses_a_big_literal_comprehension(
    expression: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = policies_with(tmp_path, "costly.yaml", admission_policy(expression))
    code, out = validate(capsys, directory)
    assert code == 1
    assert f"{directory / 'costly.yaml'}:8:" in out
    assert "spec.validations[0].expression: CEL cost: estimated cost" in out


def literal_all(n: int) -> str:
    return "[" + ",".join(["1"] * n) + "].all(x, job.components.all(c, c.replicas >= x))"


def test_a_policy_just_under_the_limit_loads_and_one_just_over_does_not(tmp_path: Path) -> None:
    def cost(n: int) -> int:
        return celcost.estimate(cel.environment().compile(literal_all(n)), cel.ADMISSION_VARS).cost

    low, high = 1, 1_000  # cost(low) <= limit < cost(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if cost(middle) <= celcost.COST_LIMIT else (low, middle)
    n = low
    assert cost(n) <= celcost.COST_LIMIT < cost(n + 1)
    under = cel.compile_expression(literal_all(n), cel.ADMISSION_VARS, BOOL)
    assert isinstance(under, cel.CelProgram)
    over = cel.compile_expression(literal_all(n + 1), cel.ADMISSION_VARS, BOOL)
    assert isinstance(over, list) and "CEL cost: estimated cost" in over[0].message
    directory = policies_with(tmp_path, "big.yaml", admission_policy(literal_all(n)))
    assert "costly" in {policy.name for policy in load_policy_set([directory]).admission}


def components(n: int) -> list[dict[str, Any]]:
    return [{"name": f"w{i}", "replicas": i + 1, "requests": {"cpu": 1.0}} for i in range(n)]


class CountedBudget(celtranspile.Budget):
    """A runtime budget that remembers itself, to read the units an evaluation spent."""

    made: ClassVar[list[CountedBudget]] = []

    def __init__(self, total: int) -> None:
        super().__init__(total)
        CountedBudget.made.append(self)


def test_an_admitted_expression_that_runs_out_of_budget_is_an_evaluation_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(celtranspile, "Budget", CountedBudget)
    monkeypatch.setattr(CountedBudget, "made", [])
    program = cel.compile_expression(COSTLY_AT_RUN_TIME, cel.MAPPING_VARS, BOOL)
    assert isinstance(program, cel.CelProgram)  # 64 components at most: under the limit
    assert program.evaluate(cel.activation(cel.MAPPING_VARS, job={"components": components(8)}))
    small = CountedBudget.made[-1]
    spent_on_8 = small.total - small.remaining
    assert 0 < spent_on_8 <= small.total
    many = cel.activation(cel.MAPPING_VARS, job={"components": components(400)})
    result = program.evaluate(many)
    budget = CountedBudget.made[-1]
    # the work is cut at the budget, not done in full: quadratic in the components, 400 would
    # cost (400/8)^2 = 2,500 times the 8-component run
    spent = budget.total - budget.remaining
    assert budget.total < spent <= budget.total + spent_on_8
    assert spent_on_8 * (400 // 8) ** 2 > 10 * budget.total
    assert isinstance(result, cel.CelError)
    assert "ran out of its budget of 100,000 units" in str(result)
    assert COSTLY_AT_RUN_TIME in str(result)


LABEL_LOOP = 'job.labels.all(k, k != "")'


def pytorch_job(labels: int) -> dict[str, Any]:
    template = yaml.safe_load((REPO / "examples/jobs/pytorch-finetune.yaml").read_text())
    template["metadata"]["labels"].update({f"l{i}": "x" for i in range(labels)})
    return template


@pytest.mark.parametrize(
    ("failure_policy", "allowed", "where"),
    [("Fail", False, "status"), ("Ignore", True, "warnings")],
)
def test_the_webhook_answers_a_budget_overrun_per_failure_policy(
    failure_policy: str,
    allowed: bool,
    where: str,
    policy_dir: Path,
    make_app: Callable[..., Flask],
) -> None:
    (policy_dir / "costly.yaml").write_text(admission_policy(LABEL_LOOP, failure_policy))
    live = PolicyHolder(lambda: load_policy_set([policy_dir], cel_limits=CelLimits(budget=500)))
    assert live.reload(), live.status.errors
    app = make_app(live)
    response = app.test_client().post(
        "/validate/workloads", json=review(pytorch_job(200), operation="CREATE")
    )
    answer = response.get_json()["response"]
    assert answer["allowed"] is allowed
    text = json.dumps(answer)
    assert "ran out of its budget of 500 units" in text
    assert "spec.validations[0].expression" in text


# -- dry-run: a priority that runs out of budget fails that job only ----------------------------

# Quadratic in the components, never true (so it scans them all), else the shipped priority:
# under the static limit for the 64 components it assumes, far over the budget for 600.
COSTLY_PRIORITY = (
    'job.components.exists(c, job.components.exists(d, d.name == c.name + "!")) ? -1 '
    ': job.queue == "prod-inference" ? job.priority + 1000 : job.priority'
)
TASKS = 600  # 360,000 inner iterations: about 15 s without a budget


def dry_run_json(policies: Path, snapshot: Path) -> dict[str, Any]:
    argv = ["dry-run", "--policies", str(policies), "--snapshot", str(snapshot)]
    argv += ["--now", "2025-03-10T10:00:00Z", "-o", "json"]
    code = f"import sys; from fleetgate.cli import main; sys.exit(main({argv!r}))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("dry-run did not end within 60 s")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_dry_run_gives_a_priority_out_of_budget_policy_eval_error_and_decides_the_rest(
    tmp_path: Path,
) -> None:
    scheduling = (REPO / "policies" / "scheduling.yaml").read_text()
    shipped = re.search(r"^  priority: .*$", scheduling, re.MULTILINE)
    assert shipped, "policies/scheduling.yaml has no one-line priority"
    policies = policies_with(
        tmp_path, "scheduling.yaml", scheduling.replace(shipped.group(0), "  priority: "
                                                        + json.dumps(COSTLY_PRIORITY))
    )  # fmt: skip
    document = yaml.safe_load((REPO / "examples" / "fleet-snapshot.yaml").read_text())
    big = next(i for i in document["items"] if i["metadata"]["name"] == "summarize-backfill")
    task = big["spec"]["tasks"][0]
    big["spec"]["tasks"] = [{**task, "name": f"w{i}", "replicas": 1} for i in range(TASKS)]
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump(document))

    before = dry_run_json(REPO / "policies", REPO / "examples" / "fleet-snapshot.yaml")
    after = dry_run_json(policies, snapshot)  # the budget, not the 360,000 iterations, bounds it

    decisions = {d["workload"]: d for d in after["decisions"]}
    failed = decisions.pop("Job.batch.volcano.sh/inference/summarize-backfill")
    assert failed["reason"] == "PolicyEvalError", failed
    assert failed["action"] != "Admit"
    assert "spec.priority" in failed["message"]
    assert "ran out of its budget of 100,000 units" in failed["message"]
    expected = {
        d["workload"]: d
        for d in before["decisions"]
        if d["workload"] != "Job.batch.volcano.sh/inference/summarize-backfill"
    }
    key = ("action", "reason", "clusters", "priority")
    assert {w: [d[k] for k in key] for w, d in decisions.items()} == {
        w: [d[k] for k in key] for w, d in expected.items()
    }
