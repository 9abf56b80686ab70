"""fleetgate's admission webhooks on the API server: their configurations, failure policies, and
whether the mutating one really holds a binding.

Reachability is tried the way it works: a server-side dry run (``dryRun=All``) of creating a
ResourceBinding through the API server. kube-apiserver calls the webhooks of a dry-run request
whose ``sideEffects`` is None or NoneOnDryRun (fleetgate's is None), applies their patches, and
stores nothing. The binding comes back held (``spec.suspension.scheduling: true`` and the
``fleetgate.io/managed`` label) only if the API server reached the webhook, trusted its
certificate, sent it this binding, and the webhook held it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine import annotations as ann
from fleetgate.preflight.client import Api
from fleetgate.preflight.model import Check, fail, ok, skip, warn
from fleetgate.preflight.policies import Kind
from reconciler.resources import RESOURCE_BINDINGS

CONFIGURATION = "fleetgate"  # deploy/karmada-apiserver/*webhookconfiguration.yaml
MUTATING = "resourcebindings.fleetgate.io"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PROBE_NAME = "fleetgate-preflight-"  # generateName: never clashes, and nothing is stored
NOT_INSTALLED_FIX = "apply dist/fleetgate-karmada.yaml (docs/install.md, step 4)"
DRY_RUN_SAFE = ("None", "NoneOnDryRun")


def check_webhooks(api: Api, kinds: Sequence[Kind], namespace: str) -> list[Check]:
    """A row per configuration, then the dry run (when the mutating one is there)."""
    checks = []
    configurations = {}
    for kind in ("mutating", "validating"):
        name = f"{kind} webhook"
        found = api.get(f"{ADMISSION}/{kind}webhookconfigurations/{CONFIGURATION}")
        if found.status == 404:
            checks.append(warn(name, f"{CONFIGURATION} is not installed", NOT_INSTALLED_FIX))
        elif not found.ok:
            checks.append(warn(name, f"not checked: {found.message}"))
        else:
            configurations[kind] = found.body
            checks.append(_configuration(name, kind, found.body))
    if "mutating" in configurations:
        checks.append(probe(api, kinds, namespace))
    else:
        checks.append(skip("webhook holds bindings", "no mutating webhook configuration read"))
    return checks


def _configuration(name: str, kind: str, body: Mapping[str, Any]) -> Check:
    webhooks = body.get("webhooks") or []
    if not webhooks:
        return fail(name, f"{CONFIGURATION} has no webhooks", NOT_INSTALLED_FIX)
    said, problems = [], []
    for hook in webhooks:
        policy = hook.get("failurePolicy") or "Fail"
        said.append(f"{hook.get('name')}: failurePolicy {policy}")
        if hook.get("sideEffects") not in DRY_RUN_SAFE:
            problems.append(
                f"{hook.get('name')} has sideEffects {hook.get('sideEffects')}: "
                "dry-run requests are refused"
            )
        if not (hook.get("clientConfig") or {}).get("caBundle"):
            problems.append(
                f"{hook.get('name')} has no caBundle yet (the webhook writes it when it starts)"
            )
        if kind == "mutating" and policy == "Ignore":
            problems.append(
                f"{hook.get('name')}: with failurePolicy Ignore, bindings created while the "
                "webhook is down are placed by Karmada's scheduler, past the queues"
            )
    detail = "; ".join(said + problems)
    if problems:
        return warn(name, detail, "see docs/webhook-and-deployment.md (failure policy)")
    return ok(name, detail)


def probe_binding(kind: Kind, namespace: str) -> dict[str, Any]:
    api_version, kind_name = kind
    return {
        "apiVersion": RESOURCE_BINDINGS.api_version(RESOURCE_BINDINGS.versions[0]),
        "kind": "ResourceBinding",
        "metadata": {"generateName": PROBE_NAME, "namespace": namespace},
        "spec": {
            "resource": {
                "apiVersion": api_version,
                "kind": kind_name,
                "namespace": namespace,
                "name": "fleetgate-preflight",
            }
        },
    }


def probe(api: Api, kinds: Sequence[Kind], namespace: str) -> Check:
    """A dry-run create of a binding of the first kind in scope: held, or why not."""
    name = "webhook holds bindings"
    if not kinds:
        return skip(name, f"no job kind is in scope in namespace {namespace}: nothing to try")
    version = RESOURCE_BINDINGS.versions[0]
    path = f"/apis/{RESOURCE_BINDINGS.group}/{version}/namespaces/{namespace}/resourcebindings"
    answer = api.post(path, probe_binding(kinds[0], namespace), [("dryRun", "All")])
    api_version, kind = kinds[0]
    what = f"a dry-run ResourceBinding of a {kind} ({api_version}) in namespace {namespace}"
    if answer.status in (401, 403):
        return warn(
            name,
            f"not checked: {answer.message}",
            "run preflight with a kubeconfig that may create resourcebindings",
        )
    if not answer.ok:
        return fail(
            name,
            f"{what} was refused: {answer.message}",
            "the webhook must run and be reachable from the API server at its clientConfig URL "
            "with the caBundle its certificate is signed by: kubectl -n fleetgate-system rollout "
            "status deployment/fleetgate-webhook",
        )
    held = answer.body
    suspended = ((held.get("spec") or {}).get("suspension") or {}).get("scheduling") is True
    managed = ((held.get("metadata") or {}).get("labels") or {}).get(ann.MANAGED) == "true"
    if suspended and managed:
        return ok(
            name, f"{what} came back held: spec.suspension.scheduling true, {ann.MANAGED}=true"
        )
    return fail(
        name,
        f"{what} came back without spec.suspension.scheduling true and {ann.MANAGED}: the "
        "API server did not send it to fleetgate's webhook",
        f"the MutatingWebhookConfiguration {CONFIGURATION} must match {RESOURCE_BINDINGS.key} "
        f"{version} in namespace {namespace} (rules, namespaceSelector, objectSelector)",
    )
