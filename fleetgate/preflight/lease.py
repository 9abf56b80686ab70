"""The namespace fleetgate keeps its state in on the karmada-apiserver (``--lease-namespace``,
fleetgate-system): the reconciler's Lease and the ConfigMap of the last good policy set live
there, and the release manifest for the karmada-apiserver creates it. Before that manifest is
applied the namespace is missing, which is a warning; a namespace being deleted fails."""

from __future__ import annotations

from engine.annotations import POLICY_VERSION
from fleetgate.preflight.client import Api
from fleetgate.preflight.model import Check, fail, ok, warn


def check_lease_namespace(api: Api, namespace: str, lease: str, last_good: str) -> Check:
    """``lease`` and ``last_good``: the names ``fleetgate serve`` gives them
    (``--lease-name``, ``--last-good-configmap``)."""
    name = f"namespace {namespace}"
    found = api.get(f"/api/v1/namespaces/{namespace}")
    if found.status == 404:
        return warn(
            name,
            "does not exist yet: the reconciler's Lease and last good policy set go there",
            "apply dist/fleetgate-karmada.yaml, which creates it (docs/install.md, step 4)",
        )
    if not found.ok:
        return warn(name, f"not checked: {found.message}")
    if (found.body.get("status") or {}).get("phase") == "Terminating":
        return fail(name, "is being deleted", "wait until it is gone, then apply the manifests")
    return ok(name, "exists; " + "; ".join(_state(api, namespace, lease, last_good)))


def _state(api: Api, namespace: str, lease_name: str, last_good: str) -> list[str]:
    """What the Lease and the ConfigMap say, as far as the credentials may read them."""
    said = []
    lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease_name}")
    if lease.ok:
        spec = lease.body.get("spec") or {}
        holder = spec.get("holderIdentity") or "nobody"
        said.append(
            f"Lease {lease_name} held by {holder} (renewed {spec.get('renewTime', 'never')})"
        )
    elif lease.status == 404:
        said.append(f"no Lease {lease_name} yet (the reconciler has not run)")
    stored = api.get(f"/api/v1/namespaces/{namespace}/configmaps/{last_good}")
    if stored.ok:
        notes = (stored.body.get("metadata") or {}).get("annotations") or {}
        said.append(f"last good policy set {notes.get(POLICY_VERSION, '?')} stored")
    elif stored.status == 404:
        said.append("no last good policy set stored yet")
    return said or ["its Lease and ConfigMap were not read"]
