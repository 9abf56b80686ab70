"""deploy/ renders to valid, consistent objects: with ``kubectl kustomize`` (skipped without a
recent kubectl, failed under ``CI=true``) and by reading the manifests the kustomizations list
(same checks on the result).

Consistency checked against the code: webhook URLs are routes of the app, probe paths exist,
the Service, the managed certificate's names and URLs agree, and the generated ConfigMap holds
a policy set that loads to the same version as ``policies/``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from engine.policy.defaults import BATCH_KINDS
from engine.policy.policyset import load_policy_set
from engine.policy.reload import PolicyHolder
from engine.policy.source import policy_files
from tests.conftest import REPO, missing, require_tool
from webhook.app import create_app

DEPLOY = REPO / "deploy"
SYSTEM_NAMESPACES = {"karmada-system", "kube-system", "fleetgate-system"}


def kubectl() -> str:
    """kubectl, new enough for deploy/: its built-in kustomize must read ``labels`` (kustomize
    4.1, kubectl 1.21); Debian bookworm's kubernetes-client (1.20) is not."""
    path = require_tool("kubectl")
    version = subprocess.run([path, "version", "--client"], capture_output=True, text=True)
    found = re.search(r"Kustomize Version: v(\d+)\.(\d+)", version.stdout)
    if found is None or (int(found[1]), int(found[2])) < (4, 1):
        missing(f"{path} has no kustomize 4.1 or later (it cannot read deploy/'s labels:)")
    return path


def render_with_kubectl(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_by_hand(directory: Path) -> list[dict[str, Any]]:
    """What kustomize would produce, for the features deploy/ uses."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    objects: list[dict[str, Any]] = []
    for resource in kustomization.get("resources", []):
        if (directory / resource).is_dir():  # a kustomization of its own
            objects.extend(render_by_hand(directory / resource))
            continue
        objects.extend(doc for doc in yaml.safe_load_all((directory / resource).read_text()) if doc)
    for generator in kustomization.get("configMapGenerator", []):
        data = {
            Path(file).name: (directory / file).read_text() for file in generator.get("files", [])
        }
        options = generator.get("options") or {}
        metadata = {"name": generator["name"]}
        for field in ("labels", "annotations"):
            if options.get(field):
                metadata[field] = dict(options[field])
        objects.append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
        )
    namespace = kustomization.get("namespace")
    for obj in objects:
        if namespace and obj["kind"] not in ("Namespace",):
            obj["metadata"].setdefault("namespace", namespace)
        for pairs in kustomization.get("labels", []):
            obj["metadata"].setdefault("labels", {}).update(pairs["pairs"])
    for image in kustomization.get("images", []):
        for obj in objects:
            for container in _containers(obj):
                if container["image"] == image["name"]:
                    name = image.get("newName", image["name"])
                    container["image"] = f"{name}:{image['newTag']}"
    return objects


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] != "Deployment":
        return []
    return obj["spec"]["template"]["spec"]["containers"]


@pytest.fixture(scope="module", params=["kubectl", "by-hand"])
def rendered(request) -> dict[str, list[dict[str, Any]]]:
    render = render_with_kubectl if request.param == "kubectl" else render_by_hand
    return {"host": render(DEPLOY), "karmada": render(DEPLOY / "karmada-apiserver")}


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def test_every_object_has_the_basics(rendered):
    for objects in rendered.values():
        for obj in objects:
            assert obj.get("apiVersion") and obj.get("kind"), obj
            assert obj["metadata"].get("name"), obj
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fleetgate"
    host_kinds = sorted(o["kind"] for o in rendered["host"])
    assert host_kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ServiceAccount",  # the reconciler's (tests/reconciler/test_deploy_reconciler.py)
            "ConfigMap",
            "Service",
            "Service",
            "Service",  # the reconciler's visibility API (karmada-apiserver/visibility.yaml)
            "Deployment",
            "Deployment",
            "PodDisruptionBudget",
            "PodDisruptionBudget",
        ]
    )
    karmada_kinds = sorted(o["kind"] for o in rendered["karmada"])
    assert karmada_kinds == [
        "APIService",  # the visibility API (tests/reconciler/test_deploy_reconciler.py)
        "ClusterRole",  # the reconciler's RBAC (tests/reconciler/test_deploy_reconciler.py)
        "ClusterRole",  # the tenants' readers of the visibility API
        "ClusterRole",
        "ClusterRole",  # the webhook's: Namespaces, its configurations' caBundle
        "ClusterRoleBinding",
        "ClusterRoleBinding",  # system:auth-delegator: TokenReview, SubjectAccessReview
        "ClusterRoleBinding",  # the webhook's
        "MutatingWebhookConfiguration",
        "Namespace",
        "Role",
        "Role",  # the webhook's: its certificate's Secret
        "RoleBinding",
        "RoleBinding",  # extension-apiserver-authentication-reader in kube-system
        "RoleBinding",  # the webhook's
        "Secret",
        "Secret",  # the webhook's token
        "Service",  # the ExternalName the APIService names
        "ServiceAccount",
        "ServiceAccount",  # the webhook's
        "ValidatingWebhookConfiguration",
    ]
    for obj in rendered["host"]:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "fleetgate-system"


def test_the_deployment_is_hardened_and_probes_real_routes(rendered, holder):
    deployment = one(rendered["host"], "Deployment", "fleetgate-webhook")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    [container] = pod["containers"]
    assert container["image"] == "fleetgate:0.1.0"  # make manifests IMAGE=… names yours
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["limits"]["memory"]

    routes = {
        (rule.rule, method)
        for rule in create_app(holder).url_map.iter_rules()
        for method in rule.methods or ()
    }
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert (get["path"], "GET") in routes
        assert get["scheme"] == "HTTPS"
        assert get["port"] in ports

    args: dict[str, list[str]] = {}
    for arg in container["args"][1:]:
        key, _, value = arg.removeprefix("--").partition("=")
        args.setdefault(key, []).append(value)
    assert container["args"][0] == "webhook"
    assert int(args["port"][0]) == ports["https"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert args["policies"] == [mounts["policies"]]
    config_map = one(rendered["host"], "ConfigMap")
    assert volumes["policies"]["configMap"]["name"] == config_map["metadata"]["name"]
    # the managed certificate: its files on the writable /tmp, its names the Service's and the
    # URL's, its CA injected into both webhook configurations
    assert "tls-cert" not in args and "tls-key" not in args
    assert args["tls-dir"][0].startswith(mounts["tmp"] + "/")
    assert args["kubeconfig"] == [f"{mounts['karmada-kubeconfig']}/kubeconfig"]
    assert volumes["karmada-kubeconfig"]["secret"]["secretName"] == "fleetgate-webhook-kubeconfig"
    assert args["tls-secret"] == ["fleetgate-system/fleetgate-webhook-tls"]
    service_name = "fleetgate-webhook.fleetgate-system.svc"
    assert args["tls-dns-name"] == [service_name, f"{service_name}.cluster.local"]
    hosts = {
        urlsplit(hook["clientConfig"]["url"]).hostname
        for doc in rendered["karmada"]
        for hook in doc.get("webhooks", [])
    }
    assert hosts == {service_name}
    configurations = {
        f"{doc['kind'].lower()}s/{doc['metadata']['name']}"
        for doc in rendered["karmada"]
        if doc.get("webhooks")
    }
    assert set(args["ca-inject"]) == configurations

    service = one(rendered["host"], "Service", "fleetgate-webhook")
    labels = spec["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] in ports
    budget = one(rendered["host"], "PodDisruptionBudget", "fleetgate-webhook")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_policy_configmap_loads_to_the_example_policy_set(rendered, tmp_path):
    config_map = one(rendered["host"], "ConfigMap")
    for name, text in config_map["data"].items():
        (tmp_path / name).write_text(text)
    expected = sorted(p.name for p in policy_files([REPO / "policies"])[0])
    assert sorted(config_map["data"]) == expected
    assert load_policy_set([tmp_path]).digest == load_policy_set([REPO / "policies"]).digest


def webhooks(rendered) -> list[tuple[str, dict[str, Any]]]:
    return [(obj["kind"], hook) for obj in rendered["karmada"] for hook in obj.get("webhooks", [])]


def test_webhook_settings(rendered, holder):
    routes = {
        rule.rule for rule in create_app(holder).url_map.iter_rules() if "POST" in rule.methods
    }
    service = one(rendered["host"], "Service", "fleetgate-webhook")
    [container] = one(rendered["host"], "Deployment", "fleetgate-webhook")["spec"]["template"][
        "spec"
    ]["containers"]
    dns_names = [a.partition("=")[2] for a in container["args"] if a.startswith("--tls-dns-name=")]
    for _, hook in webhooks(rendered):
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["matchPolicy"] == "Equivalent"
        assert 1 <= hook["timeoutSeconds"] <= 10
        url = urlsplit(hook["clientConfig"]["url"])
        assert url.scheme == "https"
        assert url.path in routes
        assert (
            url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
        )
        assert url.hostname in dns_names
        assert url.port == service["spec"]["ports"][0]["port"]
        assert "service" not in hook["clientConfig"]  # the karmada-apiserver has no such Service
        [expression] = hook["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/metadata.name"
        assert expression["operator"] == "NotIn"
        assert set(expression["values"]) >= SYSTEM_NAMESPACES


def test_the_mutating_webhook_covers_both_binding_kinds(rendered):
    [hook] = [h for k, h in webhooks(rendered) if k.startswith("Mutating")]
    assert urlsplit(hook["clientConfig"]["url"]).path == "/mutate/resourcebindings"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    covered = {
        (resource, rule["scope"])
        for rule in hook["rules"]
        for resource in rule["resources"]
        if rule["apiGroups"] == ["work.karmada.io"]
        and set(rule["operations"]) == {"CREATE", "UPDATE"}
    }
    assert covered == {("resourcebindings", "Namespaced"), ("clusterresourcebindings", "Cluster")}


def test_the_validating_webhook_covers_every_batch_kind(rendered):
    [hook] = [h for k, h in webhooks(rendered) if k.startswith("Validating")]
    assert urlsplit(hook["clientConfig"]["url"]).path == "/validate/workloads"
    covered = {
        (group, version, resource)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for version in rule["apiVersions"]
        for resource in rule["resources"]
        if set(rule["operations"]) == {"CREATE", "UPDATE"}
    }
    for entry in BATCH_KINDS:
        api_version, kind = entry.rsplit("/", 1)
        group, _, version = api_version.rpartition("/")
        assert (group, version, kind.lower() + "s") in covered, entry


def test_kubectl_renders_the_host_part_without_the_load_restrictor_flag():
    """The policy ConfigMap is generated by policies/kustomization.yaml, a kustomization of its
    own, so deploy/ reads no file outside itself: plain `kubectl kustomize deploy/` (and
    `kubectl apply -k deploy/`) work."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "name: fleetgate-policies" in done.stdout


def test_no_ca_bundle_is_shipped_the_processes_write_it():
    """The webhook and the reconciler inject their CA (--ca-inject): a placeholder or a stale CA
    in the manifest would be applied over theirs at every upgrade."""
    for doc in render_by_hand(DEPLOY / "karmada-apiserver"):
        for hook in doc.get("webhooks", []):
            assert "caBundle" not in hook["clientConfig"]
        if doc["kind"] == "APIService":
            assert "caBundle" not in doc["spec"]


def test_the_holder_fixture_is_the_example_policies(holder: PolicyHolder):
    assert holder.current.digest == load_policy_set([REPO / "policies"]).digest
