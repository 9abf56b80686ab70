"""Issue 32: the dashboard in real headless Chromium, against the sandbox with fleetgate's
webhook, Karmada's controllers and ``fleetgate serve --visibility-port`` behind the sandbox's
aggregation (the path of tests/reconciler/test_live_cli.py), each user through
``fleetgate dashboard``'s server with their own kubeconfig.

One world for every assertion (it takes a while to build): each page shows the numbers the API
serves; a job's reason changes on the open page when the policy files change; tenant A's
browser never shows tenant B's jobs; no console error; no request leaves 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes
import pytest
from selenium.webdriver.common.keys import Keys

from fleetgate.dashboardserver import DashboardServer
from fleetgate.liveapi import Live
from sandbox.demo.dashboard import stop
from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from tests.conftest import REPO, require_tool
from tests.dashboard.browser import Browser, chromium
from tests.reconciler.serveproc import ServeProcess
from tests.reconciler.test_live_cli import in_namespace
from tests.reconciler.test_loop import binding, clock, custom, eventually, fleet_world, submit
from tests.reconciler.test_visibility import other_namespace, submit_in, visibility_url
from tests.reconciler.test_visibility_e2e import ALICE, BOB, PREFIX, SERVICE, raw, register, sandbox
from tests.waiting import eventually_value
from tests.webhook.helpers import write_certificates

__all__ = ["clock", "custom", "fleet_world", "sandbox"]  # fixtures used by name

GROUP = "visibility.fleetgate.io"
SHOTS = REPO / "docs" / "img"  # where `make dashboard-screenshots` writes


def reader(api: kubernetes.client.ApiClient, namespace: str, user: str) -> None:
    """What a tenant is given in a deployment (``fleetgate-visibility-reader`` aggregated into
    ``view``): its namespace's jobs and Events, and the fleet's and queues' aggregates."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
    rules = [
        {"apiGroups": [GROUP], "resources": ["jobs"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]},
    ]
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "reader"}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"reader-{user}"}, "subjects": [subject],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
    })  # fmt: skip
    name = f"aggregates-{user}"
    rule = {"apiGroups": [GROUP], "resources": ["queues", "fleets"], "verbs": ["get", "list"]}
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [rule]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name}, "subjects": [subject],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
    })  # fmt: skip


def api_json(kubeconfig: Path, path: str) -> dict:
    code, out = raw(kubeconfig, path)
    assert code == 0, out
    return json.loads(out)


def job_state(kubeconfig: Path, path: str) -> str | None:
    """The job's state by the visibility API; None while the API has not seen it (NotFound:
    the pass that reads its binding has not run yet)."""
    code, out = raw(kubeconfig, path)
    if code != 0 and "(NotFound)" in out:
        return None
    assert code == 0, out
    return json.loads(out).get("state")


def only_local(browser: Browser) -> None:
    """Every URL the page asked for over the network was on 127.0.0.1 (``chrome:`` and
    ``data:`` pages are the browser's own)."""
    browser.collect()
    sent = [u for u in browser.requested if urlsplit(u).scheme in ("http", "https", "ws", "wss")]
    assert sent, "the page asked for nothing"
    assert all(urlsplit(u).hostname == "127.0.0.1" for u in sent), sorted(set(sent))


@contextlib.contextmanager
def kubectl_proxy(kubeconfig: Path) -> Iterator[str]:
    """``kubectl proxy`` on a free port of 127.0.0.1: its URL."""
    command = [require_tool("kubectl"), "--kubeconfig", str(kubeconfig), "proxy", "--port=0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = eventually_value(lambda: process.stdout.readline() or None, 30)
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found is not None, line
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        stop(process)


@pytest.fixture
def world(
    sandbox: Sandbox, api_client, kubeconfig: Path, custom, fleet_world: KarmadaControllers,
    tmp_path: Path,
) -> Iterator[dict]:  # fmt: skip
    cert, key, serving_ca, _ = write_certificates(tmp_path / "serving")
    other_namespace(api_client, "team-b")
    reader(api_client, "research", "alice")
    reader(api_client, "team-b", "bob")
    register(api_client, serving_ca)
    policies = tmp_path / "policies"
    shutil.copytree(REPO / "policies", policies)
    submit(custom, "first", workers=2)  # 24 GPUs
    submit_in(custom, "team-b", "theirs")
    fleet_world.run_once()
    served = ServeProcess(
        kubeconfig, "replica-d", tmp_path / "serve.log", "--no-leader-elect", "--policies",
        str(policies), "--visibility-port", "0", "--tls-cert", str(cert), "--tls-key", str(key),
    )  # fmt: skip
    servers: list[DashboardServer] = []
    try:
        served.wait_ready()
        sandbox.service_urls[SERVICE] = visibility_url(served)
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
        submit(custom, "second", workers=3)  # 32 GPUs, a whole cluster: waits while first runs
        fleet_world.run_once()
        eventually(
            lambda: job_state(kubeconfig, f"{PREFIX}/namespaces/research/jobs/second") == "pending",
            30,
        )
        users = {
            "admin": kubeconfig,
            "alice": in_namespace(sandbox.write_kubeconfig(tmp_path / "a.yaml", ALICE), "research"),
            "bob": in_namespace(sandbox.write_kubeconfig(tmp_path / "b.yaml", BOB), "team-b"),
        }
        urls = {}
        for who, config in users.items():
            server = DashboardServer(Live(str(config), None))
            server.start()
            servers.append(server)
            urls[who] = server.url
        yield {"users": users, "urls": urls, "policies": policies, "tmp": tmp_path}
    finally:
        for server in servers:
            server.stop()
        served.stop()


def test_each_page_shows_the_live_fleet_as_each_user_may_see_it(world: dict) -> None:
    users, urls, tmp = world["users"], world["urls"], world["tmp"]
    admin = users["admin"]
    with chromium(tmp / "admin-profile") as browser:
        # Fleet: each cluster's GPUs as the API says, Karmada's status and fleetgate's admissions
        browser.open(urls["admin"])
        browser.wait_for("[data-table=clusters] tbody tr")
        fleet = api_json(admin, f"{PREFIX}/fleets/current")
        assert fleet["policy"]["version"] == browser.text("[data-field=policy-version]")
        for cluster in fleet["clusters"]:
            row = f"tr[data-cluster='{cluster['name']}']"
            shown = [browser.text(f"{row} [data-field=gpu-{f}]") for f in
                     ("allocatable", "allocated", "admitted")]  # fmt: skip
            wanted = [cluster[f].get("nvidia.com/gpu", 0) for f in
                      ("allocatable", "allocated", "admitted")]  # fmt: skip
            assert [float(s) for s in shown] == [float(w) for w in wanted], (cluster, shown)
            ready = browser.text(f"{row} [data-field=ready]")
            assert ready == ("✔ Ready" if cluster["ready"] else "✖ NotReady")
        assert sum(c["admitted"].get("nvidia.com/gpu", 0) for c in fleet["clusters"]) == 24
        # a chart says in words what it draws; a table says what it holds
        labels = browser.attributes("svg[role=img]", "aria-label")
        assert len(labels) == len(fleet["clusters"]) and all("GPUs allocated" in x for x in labels)
        assert all(browser.texts("table caption"))

        # the keyboard alone: skip link first, then the pages, each opened with Enter
        body = browser.driver.switch_to.active_element
        body.send_keys(Keys.TAB)
        assert browser.driver.switch_to.active_element.text == "Skip to content"
        for _ in range(2):
            browser.driver.switch_to.active_element.send_keys(Keys.TAB)
        assert browser.driver.switch_to.active_element.text == "Queues"
        browser.driver.switch_to.active_element.send_keys(Keys.ENTER)
        browser.wait_for("[data-table=queues] tbody tr")

        # Queues: usage, admitted and pending counts as the API lists them
        browser.open(urls["admin"] + "#/queues")
        browser.wait_for("[data-table=queues] tbody tr")
        for queue in api_json(admin, f"{PREFIX}/queues")["items"]:
            row = f"tr[data-queue='{queue['metadata']['name']}']"
            used = float(queue["usage"].get("nvidia.com/gpu", 0))
            assert float(browser.text(f"{row} [data-field=gpu-usage]")) == used
            assert browser.text(f"{row} [data-field=pending]") == str(queue["pending"])
            assert browser.text(f"{row} [data-field=admitted]") == str(queue["admitted"])
        assert browser.errors() == [] and browser.refused() == []
        only_local(browser)

    # the same page through the API server, as `kubectl proxy` serves it (the admin's view)
    with kubectl_proxy(admin) as proxy, chromium(tmp / "proxy-profile") as browser:
        browser.open(f"{proxy}{PREFIX}/dashboard/#/fleet")
        browser.wait_for("[data-table=clusters] tbody tr")
        row = f"tr[data-cluster='{fleet['clusters'][0]['name']}']"
        allocatable = fleet["clusters"][0]["allocatable"].get("nvidia.com/gpu", 0)
        assert float(browser.text(f"{row} [data-field=gpu-allocatable]")) == allocatable
        assert browser.errors() == [] and browser.refused() == []
        only_local(browser)

    with chromium(tmp / "alice-profile") as browser:
        # Jobs: her context's namespace by default, and none of team-b's
        browser.open(urls["alice"] + "#/jobs")
        browser.wait_for("tr[data-job]")
        listed = set(browser.attributes("tr[data-job]", "data-job"))
        assert listed == {"research/first-pytorchjob", "research/second-pytorchjob"}
        assert "theirs" not in browser.driver.page_source
        assert browser.refused() == []
        # every namespace, which RBAC does not allow her: her own instead, saying so (as the CLI)
        browser.open(urls["alice"] + "#/jobs?namespace=*")
        said = browser.wait_text("[data-field=namespace-notice]", bool)
        assert said == "You may not list every namespace's jobs; showing namespace research."
        assert "theirs" not in browser.driver.page_source
        [refused] = browser.refused()  # the one list RBAC refused, which the page handled
        assert f"{PREFIX}/jobs?" in refused and "403" in refused, refused

        # Job: the reason the API gives, updated on the open page when the policies change
        browser.open(urls["alice"] + "#/job/research/second")
        job = api_json(users["alice"], f"{PREFIX}/namespaces/research/jobs/second")
        shown = browser.wait_text("dd[data-field=reason]", lambda t: t not in ("", "-"))
        assert shown == job["reason"] and job["state"] == "pending"
        assert browser.text("dd[data-field=position]") == str(job["position"])
        assert job["reason"] in browser.text("[data-field=explanation]")
        assert "0 of 4 pods admitted" in browser.text("[data-field=gang]")
        events = browser.wait_text("[data-field=events]", lambda t: "Queued" in t)
        assert f"position {job['position']}" in events, events  # the Event on her PyTorchJob
        queues = world["policies"] / "queues.yaml"
        text = queues.read_text()
        lowered = text.replace(
            "  max:\n    nvidia.com/gpu: 48\n", "  max:\n    nvidia.com/gpu: 28\n"
        )
        assert lowered != text
        queues.write_text(lowered)  # research-training's max below second's 32 GPUs
        browser.wait_text("dd[data-field=reason]", lambda t: t == "ExceedsMaxQuota", 60)
        assert browser.driver.current_url.endswith("#/job/research/second")  # never reloaded
        assert browser.errors() == []
        only_local(browser)

    with chromium(tmp / "bob-profile") as browser:
        browser.open(urls["bob"] + "#/jobs")
        browser.wait_for("tr[data-job]")
        listed = set(browser.attributes("tr[data-job]", "data-job"))
        assert listed == {"team-b/theirs-pytorchjob"}
        for page in ("#/jobs", "#/queues", "#/fleet"):
            browser.open(urls["bob"] + page)
            browser.wait_for("[data-region=live] > *")
            assert "research/" not in browser.driver.page_source, page
        browser.open(urls["bob"] + "#/job/research/second")  # RBAC: not his to read
        said = browser.wait_text("[role=alert]", bool)
        assert "You may not read job research/second" in said, said
        assert "ExceedsMaxQuota" not in browser.driver.page_source
        assert browser.errors() == []
        [refused] = browser.refused()
        assert "/namespaces/research/jobs/second" in refused and "403" in refused, refused
        only_local(browser)
