"""Each preflight check over a fake API server: the answers it reads, the row it gives."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import yaml

from engine.enforce.plan import BINDING_FIELDS
from engine.policy.defaults import BATCH_KINDS
from fleetgate.preflight import karmada, lease, members, policies, webhook
from fleetgate.preflight.access import check_access, deployed_serve
from fleetgate.preflight.client import Answer
from fleetgate.preflight.model import Check, Status
from fleetgate.preflight.report import table, to_json
from reconciler.cli import add_parser
from reconciler.permissions import Permission, serve_permissions
from sandbox.schema import crd_directory
from tests.conftest import REPO, policy_doc

NOW = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
NOT_FOUND = Answer(404, {"kind": "Status", "message": "not found"})
FORBIDDEN = Answer(403, {"kind": "Status", "message": 'User "u" cannot get resource'})


class FakeApi:
    """GETs answered from ``paths`` (404 otherwise); POSTs by ``post``."""

    def __init__(
        self,
        paths: Mapping[str, Answer] | None = None,
        post: Callable[[str, Mapping[str, Any], Sequence[tuple[str, str]]], Answer] | None = None,
    ) -> None:
        self.paths = dict(paths or {})
        self._post = post
        self.posted: list[tuple[str, Mapping[str, Any], Sequence[tuple[str, str]]]] = []

    def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> Answer:
        return self.paths.get(path, NOT_FOUND)

    def post(self, path: str, body: Mapping[str, Any], query: Sequence[tuple[str, str]] = ()):
        self.posted.append((path, body, query))
        assert self._post is not None, path
        return self._post(path, body, query)


def schema_of(*paths: str) -> dict[str, Any]:
    """An openAPIV3Schema declaring the dotted ``paths`` (``a[].b``: b in an array's items)."""
    root: dict[str, Any] = {"type": "object"}
    for path in paths:
        node = root
        for part in path.split("."):
            child = node.setdefault("properties", {}).setdefault(part.removesuffix("[]"), {})
            if part.endswith("[]"):
                child.setdefault("type", "array")
                child = child.setdefault("items", {"type": "object"})
            node = child
    return root


def crd(
    version: str, *paths: str, status: bool = True, established: str = "True"
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema_of(*paths)},
    }
    if status:
        entry["subresources"] = {"status": {}}
    return {
        "spec": {"versions": [entry]},
        "status": {"conditions": [{"type": "Established", "status": established}]},
    }


def by_name(checks: Sequence[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


def installed(*binding_paths: str) -> dict[str, Answer]:
    """A karmada-apiserver whose binding CRDs declare ``binding_paths``, the rest as needed."""
    paths = {}
    for resource, _ in karmada.WRITTEN:
        fields = binding_paths if resource.plural.endswith("bindings") else ()
        body = crd(resource.versions[0], *fields)
        paths[f"{karmada.CRDS}/{resource.key}"] = Answer(200, body)
    paths["/apis/cluster.karmada.io/v1alpha1"] = Answer(200, {"resources": [{"name": "clusters"}]})
    return paths


# -- Karmada: the release, the CRDs, the fields -----------------------------------------------


@pytest.mark.parametrize(
    ("paths", "status", "said"),
    [
        (("spec.suspension",), Status.FAIL, "Karmada about v1.11: the ResourceBinding v1alpha2"),
        ((), Status.FAIL, "Karmada older than v1.11"),
        (("spec.suspension.scheduling",), Status.WARN, "karmada-io/karmada#6356"),
        (("spec.suspension.scheduling", "spec.components"), Status.OK, "Karmada v1.15 or later"),
        (
            ("spec.placement.clusterAffinities[].overflowAffinities",),
            Status.OK,
            "Karmada v1.18 or later (the ResourceBinding schema has spec.placement."
            "clusterAffinities[].overflowAffinities)",
        ),
    ],
)
def test_the_release_is_the_newest_field_of_the_binding_schema(paths, status, said) -> None:
    checks = by_name(karmada.check_karmada(FakeApi(installed(*paths))))
    assert checks["karmada version"].status == status
    assert said in checks["karmada version"].detail


def test_the_shared_crds_are_of_karmada_1_18_or_later() -> None:
    path = crd_directory() / "work.karmada.io_resourcebindings.yaml"
    if not path.is_file():
        pytest.skip(f"no Karmada CRDs at {path.parent}")
    document = yaml.safe_load(path.read_text())
    schema = karmada.version_schema(document, "v1alpha2")["schema"]["openAPIV3Schema"]
    assert karmada.release_of(schema) == "v1.18"
    assert all(karmada.schema_has(schema, field) for field in BINDING_FIELDS)


def test_a_field_fleetgate_writes_missing_from_the_schema_fails_naming_it() -> None:
    present = [f for f in BINDING_FIELDS if f != "status.lastScheduledTime"]
    checks = by_name(karmada.check_karmada(FakeApi(installed(*present))))
    bindings = checks["crd resourcebindings.work.karmada.io"]
    assert bindings.status == Status.FAIL
    assert bindings.detail == (
        "v1alpha2: its schema lacks status.lastScheduledTime: the API server would drop what "
        "fleetgate writes there"
    )
    assert bindings.fix.startswith("apply Karmada's CRDs of v1.13.3 or later")


def test_whole_crd_rows() -> None:
    paths = installed(*BINDING_FIELDS)
    paths[f"{karmada.CRDS}/propagationpolicies.policy.karmada.io"] = NOT_FOUND
    paths[f"{karmada.CRDS}/clusterresourcebindings.work.karmada.io"] = Answer(
        200, crd("v1alpha2", *BINDING_FIELDS, status=False)
    )
    paths[f"{karmada.CRDS}/clusterpropagationpolicies.policy.karmada.io"] = Answer(
        200, crd("v1alpha1", established="False")
    )
    del paths["/apis/cluster.karmada.io/v1alpha1"]
    checks = by_name(karmada.check_karmada(FakeApi(paths)))
    assert checks["crd resourcebindings.work.karmada.io"] == Check(
        "crd resourcebindings.work.karmada.io",
        Status.OK,
        "established, serves v1alpha2, has the 11 fields fleetgate writes",
    )
    assert checks["crd propagationpolicies.policy.karmada.io"].detail == "not installed"
    assert checks["crd clusterresourcebindings.work.karmada.io"].detail == (
        "v1alpha2: no status subresource"
    )
    assert "not established" in checks["crd clusterpropagationpolicies.policy.karmada.io"].detail
    assert checks["api cluster.karmada.io/v1alpha1"].status == Status.FAIL


def test_without_leave_to_read_crds_discovery_says_what_is_served() -> None:
    paths: dict[str, Answer] = {f"{karmada.CRDS}/{r.key}": FORBIDDEN for r, _ in karmada.WRITTEN}
    paths["/apis/work.karmada.io/v1alpha2"] = Answer(
        200, {"resources": [{"name": "resourcebindings"}, {"name": "resourcebindings/status"}]}
    )
    checks = by_name(karmada.check_karmada(FakeApi(paths)))
    assert checks["karmada version"].status == Status.WARN
    bindings = checks["crd resourcebindings.work.karmada.io"]
    assert bindings.status == Status.WARN and "v1alpha2 served (discovery)" in bindings.detail
    cluster_bindings = checks["crd clusterresourcebindings.work.karmada.io"]
    assert cluster_bindings.status == Status.FAIL
    assert (
        cluster_bindings.detail == "work.karmada.io/v1alpha2 clusterresourcebindings is not served"
    )


# -- the policies and the kinds they hold -----------------------------------------------------


def test_the_built_in_scope_holds_the_batch_kinds() -> None:
    row, scheduling = policies.load(None)
    assert row.status == Status.SKIP and scheduling is not None
    held = policies.kinds_in_scope(scheduling, "default", NOW)
    assert {f"{v}/{k}" for v, k in held} == set(BATCH_KINDS)


def test_a_scope_of_its_own_and_one_that_fails(write) -> None:
    scope = 'resource.kind == "PyTorchJob" && resource.namespace.startsWith("team-")'
    path = write("scheduling.yaml", policy_doc("SchedulingPolicy", "fleet", f"scope: '{scope}'"))
    row, scheduling = policies.load(path.parent)
    assert row.status == Status.OK and scheduling is not None
    assert policies.kinds_in_scope(scheduling, "team-a", NOW) == [("kubeflow.org/v1", "PyTorchJob")]
    assert policies.kinds_in_scope(scheduling, "default", NOW) == []
    failing = 'binding.metadata.labels["tier"] == "batch"'  # no labels: an error, so held
    write("scheduling.yaml", policy_doc("SchedulingPolicy", "fleet", f"scope: '{failing}'"))
    _, scheduling = policies.load(path.parent)
    assert scheduling is not None
    assert len(policies.kinds_in_scope(scheduling, "default", NOW)) > len(BATCH_KINDS)


def test_policies_that_do_not_load_fail_with_their_errors(write) -> None:
    path = write("queues.yaml", policy_doc("Queue", "research", "wieght: 1"))
    row, scheduling = policies.load(path.parent)
    assert scheduling is None and row.status == Status.FAIL
    assert "spec.wieght: unknown field 'wieght'" in row.detail
    assert row.fix == f"fleetgate validate {path.parent}"


# -- the members ------------------------------------------------------------------------------


def cluster(name: str, ready: bool = True, kinds: Sequence[tuple[str, str]] = ()) -> dict:
    groups: dict[str, list[dict[str, str]]] = {}
    for api_version, kind in kinds:
        groups.setdefault(api_version, []).append({"name": kind.lower() + "s", "kind": kind})
    return {
        "metadata": {"name": name},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "apiEnablements": [{"groupVersion": g, "resources": r} for g, r in groups.items()],
        },
    }


PYTORCH, TFJOB = ("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v1", "TFJob")
SERVED_HERE = {"/apis/kubeflow.org/v1": Answer(200, {"resources": [{"kind": "PyTorchJob"}]})}


def test_no_member_yet_is_a_warning_alone() -> None:
    api = FakeApi({members.CLUSTERS_PATH: Answer(200, {"items": []}), **SERVED_HERE})
    [row] = members.check_members(api, [PYTORCH])
    assert row.status == Status.WARN and "no member cluster has joined" in row.detail


def test_kinds_by_the_members_that_serve_them() -> None:
    items = [cluster("a", kinds=[PYTORCH, TFJOB]), cluster("b", kinds=[TFJOB]), cluster("c", False)]
    api = FakeApi({members.CLUSTERS_PATH: Answer(200, {"items": items}), **SERVED_HERE})
    checks = by_name(members.check_members(api, [PYTORCH, TFJOB]))
    assert checks["member clusters"].status == Status.WARN
    assert checks["member clusters"].detail == "3 clusters: a, b, c; not Ready: c"
    pytorch = checks["kind PyTorchJob (kubeflow.org/v1)"]
    assert (pytorch.status, pytorch.detail) == (Status.WARN, "served by a; not by b")
    # TFJob: in scope, but this API server has no CRD for it: nobody can submit one
    assert checks["kinds not served here"].status == Status.SKIP
    assert checks["kinds not served here"].detail.startswith("TFJob (kubeflow.org/v1): in scope")


def test_a_kind_served_by_no_ready_member_fails() -> None:
    items = [cluster("a", False, kinds=[PYTORCH]), cluster("b", kinds=[TFJOB])]
    api = FakeApi({members.CLUSTERS_PATH: Answer(200, {"items": items}), **SERVED_HERE})
    pytorch = by_name(members.check_members(api, [PYTORCH]))["kind PyTorchJob (kubeflow.org/v1)"]
    assert pytorch.status == Status.FAIL
    assert pytorch.detail.startswith("no Ready member cluster serves it")
    assert "spec.scope" in pytorch.fix


# -- RBAC -------------------------------------------------------------------------------------


def test_preflight_asks_for_what_the_release_deployment_uses() -> None:
    """deployed_args: serve's arguments in deploy/reconciler-deployment.yaml, as far as they
    decide what it touches."""
    text = (REPO / "deploy" / "reconciler-deployment.yaml").read_text()
    [deployment] = [d for d in yaml.safe_load_all(text) if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser(prog="fleetgate")
    add_parser(parser.add_subparsers(dest="command"))
    shipped = serve_permissions(parser.parse_args(container["args"]))
    assert serve_permissions(deployed_serve("fleetgate-system")) == shipped


def test_every_missing_permission_is_named() -> None:
    needs = serve_permissions(deployed_serve("fleetgate-system"))
    lacking = {
        Permission("watch", "kubeflow.org", "pytorchjobs"),
        Permission(
            "get", "coordination.k8s.io", "leases", "", "fleetgate-system", "fleetgate-reconciler"
        ),
    }

    def review(path: str, body: Mapping[str, Any], query: object) -> Answer:
        if path.endswith("selfsubjectreviews"):
            return Answer(201, {"status": {"userInfo": {"username": "alice"}}})
        attrs = body["spec"]["resourceAttributes"]
        asked = Permission(
            attrs["verb"], attrs["group"], attrs["resource"], attrs.get("subresource", ""),
            attrs.get("namespace", ""), attrs.get("name", ""),
        )  # fmt: skip
        return Answer(201, {"status": {"allowed": asked not in lacking}})

    row = check_access(FakeApi(post=review), needs, None)
    assert row.status == Status.FAIL
    assert row.detail == (
        f"alice lacks 2 permissions of {len(needs)}: get leases.coordination.k8s.io "
        "'fleetgate-reconciler' in namespace fleetgate-system; watch pytorchjobs.kubeflow.org"
    )


def test_a_service_account_is_asked_about_with_its_groups() -> None:
    api = FakeApi(post=lambda path, body, query: Answer(201, {"status": {"allowed": True}}))
    need = Permission("list", "cluster.karmada.io", "clusters")
    row = check_access(api, [need], ("fleetgate-system", "fleetgate-reconciler"))
    assert row.status == Status.OK
    [(path, body, _)] = api.posted
    assert path.endswith("/subjectaccessreviews")
    assert body["spec"] == {
        "resourceAttributes": {
            "verb": "list",
            "group": "cluster.karmada.io",
            "resource": "clusters",
        },
        "user": "system:serviceaccount:fleetgate-system:fleetgate-reconciler",
        "groups": [
            "system:serviceaccounts",
            "system:serviceaccounts:fleetgate-system",
            "system:authenticated",
        ],
    }


def test_a_review_the_credentials_may_not_make_is_a_warning() -> None:
    api = FakeApi(post=lambda path, body, query: FORBIDDEN)
    row = check_access(api, [Permission("list", "", "pods")], ("ns", "sa"))
    assert row.status == Status.WARN and row.detail.startswith("not checked: system:serviceaccount")


# -- the lease namespace ----------------------------------------------------------------------


def test_the_lease_namespace() -> None:
    ns = "/api/v1/namespaces/fleetgate-system"
    missing = lease.check_lease_namespace(FakeApi(), "fleetgate-system", "l", "c")
    assert missing.status == Status.WARN and "step 4" in missing.fix
    going = FakeApi({ns: Answer(200, {"status": {"phase": "Terminating"}})})
    assert lease.check_lease_namespace(going, "fleetgate-system", "l", "c").status == Status.FAIL
    held = FakeApi(
        {
            ns: Answer(200, {"status": {"phase": "Active"}}),
            "/apis/coordination.k8s.io/v1/namespaces/fleetgate-system/leases/l": Answer(
                200, {"spec": {"holderIdentity": "pod-0", "renewTime": "2026-05-01T00:00:00Z"}}
            ),
            "/api/v1/namespaces/fleetgate-system/configmaps/c": Answer(
                200, {"metadata": {"annotations": {"fleetgate.io/policy-version": "abc"}}}
            ),
        }
    )
    row = lease.check_lease_namespace(held, "fleetgate-system", "l", "c")
    assert row.detail == (
        "exists; Lease l held by pod-0 (renewed 2026-05-01T00:00:00Z); last good policy set abc "
        "stored"
    )


# -- the webhooks -----------------------------------------------------------------------------


def test_the_names_are_those_of_the_shipped_configurations() -> None:
    for kind in ("mutating", "validating"):
        path = REPO / "deploy" / "karmada-apiserver" / f"{kind}webhookconfiguration.yaml"
        assert yaml.safe_load(path.read_text())["metadata"]["name"] == webhook.CONFIGURATION
    mutating = REPO / "deploy" / "karmada-apiserver" / "mutatingwebhookconfiguration.yaml"
    [hook] = yaml.safe_load(mutating.read_text())["webhooks"]
    assert hook["name"] == webhook.MUTATING and hook["sideEffects"] in webhook.DRY_RUN_SAFE


def configured(**changes: Any) -> dict[str, Answer]:
    hook = {"name": webhook.MUTATING, "failurePolicy": "Fail", "sideEffects": "None",
            "clientConfig": {"url": "https://x", "caBundle": "Y2E="}} | changes  # fmt: skip
    base = f"{webhook.ADMISSION}/%swebhookconfigurations/{webhook.CONFIGURATION}"
    return {base % "mutating": Answer(200, {"webhooks": [hook]})}


def test_failure_policy_ignore_and_side_effects_warn() -> None:
    rows = by_name(
        webhook.check_webhooks(
            FakeApi(configured(failurePolicy="Ignore", sideEffects="Some")), [], "default"
        )
    )
    mutating = rows["mutating webhook"]
    assert mutating.status == Status.WARN
    assert "failurePolicy Ignore" in mutating.detail and "placed by Karmada's scheduler" in (
        mutating.detail
    )
    assert "sideEffects Some: dry-run requests are refused" in mutating.detail
    assert rows["validating webhook"].detail == "fleetgate is not installed"
    assert rows["webhook holds bindings"].status == Status.SKIP  # no kind in scope


@pytest.mark.parametrize(
    ("answer", "status", "said"),
    [
        (
            Answer(
                201,
                {
                    "metadata": {"labels": {"fleetgate.io/managed": "true"}},
                    "spec": {"suspension": {"scheduling": True}},
                },
            ),
            Status.OK,
            "came back held",
        ),
        (Answer(201, {"spec": {}}), Status.FAIL, "did not send it to fleetgate's webhook"),
        (
            Answer(500, {"message": 'failed calling webhook "resourcebindings.fleetgate.io"'}),
            Status.FAIL,
            'was refused: failed calling webhook "resourcebindings.fleetgate.io"',
        ),
        (FORBIDDEN, Status.WARN, "not checked"),
    ],
)
def test_the_dry_run_binding(answer: Answer, status: Status, said: str) -> None:
    api = FakeApi(configured(), post=lambda path, body, query: answer)
    rows = by_name(webhook.check_webhooks(api, [PYTORCH], "team-a"))
    assert rows["webhook holds bindings"].status == status
    assert said in rows["webhook holds bindings"].detail
    [(path, body, query)] = api.posted
    assert path == "/apis/work.karmada.io/v1alpha2/namespaces/team-a/resourcebindings"
    assert query == [("dryRun", "All")]
    assert body["metadata"] == {"generateName": "fleetgate-preflight-", "namespace": "team-a"}
    assert body["spec"]["resource"]["kind"] == "PyTorchJob"


# -- the report -------------------------------------------------------------------------------


def test_the_table_the_fixes_and_the_summary() -> None:
    checks = [
        Check("karmada version", Status.OK, "Karmada v1.18 or later"),
        Check("member clusters", Status.WARN, "no member [yet]", "join one"),
        Check("crd x", Status.FAIL, "not installed", "install it"),
        Check("policies", Status.SKIP, "no --policies"),
    ]
    assert table(checks) == (
        "CHECK            STATUS  DETAIL\n"
        "karmada version  ok      Karmada v1.18 or later\n"
        "member clusters  warn    no member [yet]\n"
        "crd x            fail    not installed\n"
        "policies         skip    no --policies\n"
        "\n"
        "To fix:\n"
        "  fail  crd x: install it\n"
        "  warn  member clusters: join one\n"
        "\n"
        "preflight failed: 1 ok, 1 warn, 1 fail, 1 skip\n"
    )
    assert to_json(checks)["passed"] is False
    assert to_json(checks)["checks"][1] == {
        "name": "member clusters",
        "status": "warn",
        "detail": "no member [yet]",
        "fix": "join one",
    }
