"""The member clusters: which are Ready, and which serve the job kinds the policies hold.

A Karmada Cluster's ``status.apiEnablements`` lists what its member serves (a member without the
PyTorchJob CRD cannot run one), and fleetgate places a job only on a Ready member that serves
its kind (``engine.fleet``'s ClusterView.serves). A kind matters here when users can submit it,
that is when the karmada-apiserver serves it too (discovery), and the scope holds it: a kind no
Ready member serves would be held forever, which fails; members without it are named in a
warning. No member at all is a warning: fleetgate can be installed before the members join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.errors import FleetgateError
from engine.fleet.clusters import read_cluster
from engine.fleet.model import ClusterView
from fleetgate.preflight.client import Api
from fleetgate.preflight.model import Check, fail, ok, plural, skip, warn
from fleetgate.preflight.policies import Kind
from reconciler.resources import CLUSTERS

CLUSTERS_PATH = CLUSTERS.path(CLUSTERS.versions[0])
NO_MEMBER_FIX = (
    "install the kind's operator (its CRD) on a member cluster, or leave the kind out of the "
    "SchedulingPolicy's spec.scope"
)


def check_members(api: Api, kinds: Sequence[Kind]) -> list[Check]:
    name = "member clusters"
    answer = api.get(CLUSTERS_PATH)
    if not answer.ok:
        return [warn(name, f"not checked: cannot list clusters ({answer.message})")]
    clusters, unread = [], []
    for item in answer.body.get("items") or ():
        try:
            clusters.append(read_cluster(item))
        except FleetgateError as error:
            unread.append(f"{(item.get('metadata') or {}).get('name', '?')}: {error}")
    checks = [_clusters(clusters, unread)]
    ready = sorted((c for c in clusters if c.ready), key=lambda c: c.name)
    if not clusters:
        return checks
    here = _served_here(api, kinds)
    for api_version, kind in kinds:
        if (api_version, kind) in here:
            checks.append(_kind(api_version, kind, ready))
    absent = [
        f"{kind} ({api_version})" for api_version, kind in kinds if (api_version, kind) not in here
    ]
    if absent:
        checks.append(
            skip(
                "kinds not served here",
                f"{', '.join(absent)}: in scope, but this API server does not serve them "
                "(no CRD), so nobody can submit one",
            )
        )
    return checks


def _clusters(clusters: list[ClusterView], unread: list[str]) -> Check:
    name = "member clusters"
    if unread:
        return warn(name, f"cannot read {'; '.join(unread)}", "see kubectl get clusters -o yaml")
    if not clusters:
        return warn(
            name,
            "no member cluster has joined: jobs wait until one does",
            "join member clusters (karmadactl join, or register them in Pull mode)",
        )
    names = sorted(c.name for c in clusters)
    down = sorted(c.name for c in clusters if not c.ready)
    detail = f"{plural(len(names), 'cluster')}: {', '.join(names)}"
    if down:
        return warn(
            name,
            f"{detail}; not Ready: {', '.join(down)}",
            "see kubectl describe cluster " + down[0],
        )
    return ok(name, f"{detail}, all Ready")


def _kind(api_version: str, kind: str, ready: list[ClusterView]) -> Check:
    name = f"kind {kind} ({api_version})"
    serving = [c.name for c in ready if c.serves(api_version, kind)]
    lacking = [c.name for c in ready if not c.serves(api_version, kind)]
    if not serving:
        where = "no member cluster is Ready" if not ready else "no Ready member cluster serves it"
        return fail(name, f"{where}: its jobs would be held and never placed", NO_MEMBER_FIX)
    if lacking:  # often by design (a CPU pool without the GPU operators): said, no fix
        return warn(name, f"served by {', '.join(serving)}; not by {', '.join(lacking)}")
    return ok(name, f"served by {', '.join(serving)}")


def _served_here(api: Api, kinds: Iterable[Kind]) -> set[Kind]:
    """The kinds the API server serves, by discovery, one request per group version."""
    served: set[Kind] = set()
    for api_version in sorted({v for v, _ in kinds}):
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        found = api.get(path)
        if found.ok:
            served.update(
                (api_version, r.get("kind", "")) for r in found.body.get("resources") or ()
            )
    return served
