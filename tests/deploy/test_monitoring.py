"""deploy/monitoring/: the alerts pass ``promtool check rules`` and ``promtool test rules``
(tests/deploy/monitoring-rules-test.yaml: each alert fires when it should and not otherwise),
and every metric the rules, their test series and the Grafana dashboard name is one that
fleetgate really exports: read from the /metrics of a running ``fleetgate webhook`` and
``fleetgate serve`` (against the sandbox), as deploy/ runs them. The kustomization renders
(with ``kubectl kustomize`` and by hand) to ServiceMonitors that reach the Services of deploy/
on the ports and schemes their probes use, and a dashboard ConfigMap for Grafana's sidecar.

promtool comes with Debian's ``prometheus`` (scripts/test-tools.sh); without it these tests
skip, and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from sandbox.server import Sandbox
from tests.conftest import require_tool
from tests.reconciler.serveproc import ELECTION, ServeProcess
from tests.sandbox.conftest import running_sandbox
from tests.webhook.test_deploy import DEPLOY, one, render_by_hand, render_with_kubectl
from tests.webhook.webhookproc import WebhookProcess

MONITORING = DEPLOY / "monitoring"
RULES = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "fleetgate.json"
RULE_TESTS = Path(__file__).with_name("monitoring-rules-test.yaml")
WEBHOOK, RECONCILER = "fleetgate-webhook", "fleetgate-reconciler"  # the Services: `job`
PATIENCE_S = 60.0  # a bound on starting a command and on each request: it stops a hang
# the sample names of a family, by the type its `# TYPE` line gives (text format 0.0.4, where
# a counter's family name already ends in _total)
SAMPLES = {
    "counter": ("",),
    "gauge": ("",),
    "untyped": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}
# Grafana's interval variables, as a PromQL duration (the other variables sit in label values)
GRAFANA_INTERVALS = re.compile(r"\$__(rate_interval|interval|range)\b")


def rule_groups() -> list[dict[str, Any]]:
    return yaml.safe_load(RULES.read_text())["spec"]["groups"]


def alerts() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]


def write_rules(directory: Path) -> Path:
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    return path


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("promtool"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )


def selectors(expr: str) -> list[tuple[str, dict[str, str]]]:
    """Every vector selector of a PromQL expression: its metric name and its equality
    matchers. A selector without a metric name fails: each must name what it reads."""
    found: list[tuple[str, dict[str, str]]] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr!r}"
            equal = {
                m.name: m.value
                for m in node.matchers.matchers
                if m.op == promql_parser.MatchOp.Equal
            }
            found.append((node.name, equal))

    promql_parser.walk(promql_parser.parse(expr), visit)
    assert found, f"no metric in {expr!r}"
    return found


def exported_names(exposition: str) -> set[str]:
    """The sample names a /metrics text can hold, from its ``# TYPE`` lines: a labelled
    family with no sample yet is exported all the same."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.update(name + suffix for suffix in SAMPLES[kind])
    return names


def families(exposition: str) -> set[str]:
    """The families of a /metrics text, without prometheus_client's ``…_created`` series."""
    return {
        line.split()[2]
        for line in exposition.splitlines()
        if line.startswith("# TYPE ") and not line.split()[2].endswith("_created")
    }


# -- the running commands ------------------------------------------------------------------


def scrape(url: str, context: ssl.SSLContext | None = None) -> str:
    request = urllib.request.Request(url + "/metrics")
    with urllib.request.urlopen(request, timeout=PATIENCE_S, context=context) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return answer.read().decode()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """job → the /metrics text of a running ``fleetgate webhook`` and ``fleetgate serve``
    (leader election on, against the sandbox), scraped once each."""
    directory = tmp_path_factory.mktemp("monitoring")
    webhook = WebhookProcess(directory / "tls")
    try:
        webhook_text = scrape(webhook.url, webhook.context)
    finally:
        webhook.stop()
    sandbox: Sandbox
    with running_sandbox() as sandbox:
        kubeconfig = sandbox.write_kubeconfig(directory / "kubeconfig")
        served = ServeProcess(kubeconfig, "monitoring", directory / "serve.log", *ELECTION)
        try:
            served.wait_ready(PATIENCE_S)
            reconciler_text = scrape(served.api_url)
        finally:
            served.signal(signal.SIGTERM)
            try:
                served.wait(PATIENCE_S)
            finally:
                served.stop()
    yield {WEBHOOK: webhook_text, RECONCILER: reconciler_text}


def check_names(expr: str, exported: dict[str, str], where: str) -> None:
    """Every selector of ``expr`` names a metric fleetgate exports; one that names a job
    (``job="fleetgate-webhook"``) names a metric of that job's /metrics."""
    everything = set().union(*(exported_names(text) for text in exported.values()))
    for name, equal in selectors(expr):
        known = exported_names(exported[equal["job"]]) if "job" in equal else everything
        assert name in known, f"{where}: {name} is not exported ({expr!r})"


# -- the rules -----------------------------------------------------------------------------


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    rules = write_rules(tmp_path)
    done = promtool("check", "rules", str(rules), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(len(group["rules"]) for group in rule_groups())
    assert f"SUCCESS: {count} rules found" in done.stdout


def test_every_alert_fires_when_it_should_and_not_otherwise(tmp_path: Path) -> None:
    write_rules(tmp_path)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    done = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout

    cases = [
        case
        for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in group["alert_rule_test"]
    ]
    names = {rule["alert"] for rule in alerts()}
    fires = {case["alertname"] for case in cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert fires == names, "each alert needs a case where it fires"
    assert silent == names, "each alert needs a case where it must not fire"


def test_every_alert_says_how_bad_and_what_happened() -> None:
    for rule in alerts():
        assert rule["alert"].startswith("Fleetgate"), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))


def test_the_rules_read_only_metrics_fleetgate_exports(exported: dict[str, str]) -> None:
    for group in rule_groups():
        for rule in group["rules"]:
            check_names(rule["expr"], exported, rule.get("alert") or rule.get("record", ""))


def test_the_rule_tests_feed_series_fleetgate_exports(exported: dict[str, str]) -> None:
    for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for series in group["input_series"]:
            check_names(series["series"], exported, group["name"])


def test_the_alerts_cover_what_the_issue_asks() -> None:
    """Policy set unhealthy, no leader, a job pending too long, webhook errors and latency,
    writes failing: each has an alert reading the metric that says it."""
    reads = {rule["alert"]: {name for name, _ in selectors(rule["expr"])} for rule in alerts()}
    wanted = {
        "FleetgatePolicyUnhealthy": "fleetgate_policy_healthy",
        "FleetgateNoLeader": "fleetgate_reconcile_leader",
        "FleetgateJobPendingTooLong": "fleetgate_oldest_pending_job_timestamp_seconds",
        "FleetgateWebhookErrors": "fleetgate_webhook_requests_total",
        "FleetgateWebhookSlow": "fleetgate_webhook_request_duration_seconds_bucket",
        "FleetgateReconcilerWritesFailing": "fleetgate_reconcile_writes_total",
    }
    for alert, metric in wanted.items():
        assert metric in reads[alert], alert


# -- the dashboard -------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels() -> list[dict[str, Any]]:
    found = []
    for panel in dashboard()["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # a collapsed row holds its panels
    return found


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable, Grafana's interval
    variables made durations; ``label_values(SELECTOR, label)`` gives its selector."""
    found = []
    for panel in panels():
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r}", target["expr"]))
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            text = variable["query"]["query"]
            matched = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", text)
            assert matched, f"variable {variable['name']}: {text!r}"
            found.append((f"variable {variable['name']}", matched.group(1)))
    return [(where, GRAFANA_INTERVALS.sub("5m", expr)) for where, expr in found]


def test_the_dashboard_queries_read_only_metrics_fleetgate_exports(
    exported: dict[str, str],
) -> None:
    for where, expr in queries():
        check_names(expr, exported, where)


def test_the_dashboard_shows_every_metric_fleetgate_exports(exported: dict[str, str]) -> None:
    shown = {name for _, expr in queries() for name, _ in selectors(expr)}
    for job, text in exported.items():
        for family in families(text):
            samples = {family + suffix for suffix in ("", "_bucket")}
            assert shown & samples, f"{job}'s {family} is on no panel of {DASHBOARD.name}"


def test_the_dashboard_is_one_grafana_model_on_a_chosen_data_source() -> None:
    model = dashboard()
    assert model["uid"] == "fleetgate" and model["title"]
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
        "datasource",
        "prometheus",
    )
    for panel in panels():
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        for source in (panel["datasource"], *(t["datasource"] for t in panel["targets"])):
            assert source == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


# -- the kustomization ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=["kubectl", "by-hand"])
def rendered(request: pytest.FixtureRequest) -> dict[str, list[dict[str, Any]]]:
    render = render_with_kubectl if request.param == "kubectl" else render_by_hand
    return {"monitoring": render(MONITORING), "host": render(DEPLOY)}


def test_the_kustomization_renders_into_fleetgates_namespace(rendered) -> None:
    objects = rendered["monitoring"]
    assert sorted(o["kind"] for o in objects) == [
        "ConfigMap",
        "PrometheusRule",
        "ServiceMonitor",
        "ServiceMonitor",
    ]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "fleetgate-system", obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fleetgate"
    rule = one(objects, "PrometheusRule")
    assert rule["spec"]["groups"] == rule_groups()


def test_grafanas_sidecar_finds_the_dashboard(rendered) -> None:
    configmap = one(rendered["monitoring"], "ConfigMap")
    assert configmap["metadata"]["name"] == "fleetgate-grafana-dashboard"  # no hash suffix
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"] == {DASHBOARD.name: DASHBOARD.read_text()}


def test_each_service_monitor_reaches_its_service_as_the_probes_do(rendered) -> None:
    host = rendered["host"]
    monitors = {
        m["metadata"]["name"]: m for m in rendered["monitoring"] if m["kind"] == "ServiceMonitor"
    }
    assert sorted(monitors) == [RECONCILER, WEBHOOK]
    for name, monitor in monitors.items():
        selector = monitor["spec"]["selector"]["matchLabels"]
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["path"] == "/metrics"
        services = [
            s
            for s in host
            if s["kind"] == "Service"
            and selector.items() <= s["metadata"].get("labels", {}).items()
            and endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}
        ]
        assert [s["metadata"]["name"] for s in services] == [name]
        (port,) = [p for p in services[0]["spec"]["ports"] if p["name"] == endpoint["port"]]
        deployment = one(host, "Deployment", name)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        probe = container["readinessProbe"]["httpGet"]
        assert probe["port"] == port["targetPort"], name  # the server that answers /readyz
        assert endpoint["scheme"] == probe.get("scheme", "HTTP").lower(), name
