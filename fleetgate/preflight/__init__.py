"""``fleetgate preflight``: what an install of fleetgate needs from a Karmada control plane,
checked against its karmada-apiserver (docs/preflight.md).

Each check is a module over :class:`~fleetgate.preflight.client.Api` (a GET and a POST), and
returns :class:`~fleetgate.preflight.model.Check` rows: ``karmada`` (release, CRDs and the
fields fleetgate writes, the Cluster API), ``policies`` (they load; the kinds their scope
holds), ``members`` (Ready clusters serving those kinds), ``access`` (RBAC for ``fleetgate
serve``), ``lease`` (the namespace of its state), ``webhook`` (configurations, failure policy,
a dry-run binding held). :func:`run_checks` runs them in that order.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from fleetgate.preflight.access import check_access, deployed_serve
from fleetgate.preflight.client import Api, Unreachable
from fleetgate.preflight.karmada import check_karmada
from fleetgate.preflight.lease import check_lease_namespace
from fleetgate.preflight.members import check_members
from fleetgate.preflight.model import Check, Status, exit_code, fail, ok
from fleetgate.preflight.policies import kinds_in_scope, load
from fleetgate.preflight.webhook import check_webhooks
from reconciler.permissions import serve_permissions

__all__ = ["Check", "Options", "Refused", "Status", "Unreachable", "exit_code", "run_checks"]


@dataclass(frozen=True, slots=True)
class Options:
    policies: Path | None = None
    namespace: str = "fleetgate-system"  # serve's --lease-namespace, where its state lives
    probe_namespace: str = "default"  # where the dry-run binding goes and scope is tried
    service_account: tuple[str, str] | None = None  # check its RBAC instead of the caller's


class Refused(Exception):
    """The API server refused the kubeconfig's credentials (401)."""


def run_checks(api: Api, options: Options, now: dt.datetime) -> list[Check]:
    checks = [_server(api)]
    checks += check_karmada(api)
    policies, scheduling = load(options.policies)
    checks.append(policies)
    if scheduling is None:  # the policies do not load: what the built-in scope holds
        _, scheduling = load(None)
    assert scheduling is not None
    kinds = kinds_in_scope(scheduling, options.probe_namespace, now)
    checks += check_members(api, kinds)
    serve = deployed_serve(options.namespace)
    checks.append(check_access(api, serve_permissions(serve), options.service_account))
    checks.append(
        check_lease_namespace(api, options.namespace, serve.lease_name, serve.last_good_configmap)
    )
    checks += check_webhooks(api, kinds, options.probe_namespace)
    return checks


def _server(api: Api) -> Check:
    found = api.get("/version")
    if found.status == 401:
        raise Refused(f"the API server refused the kubeconfig's credentials: {found.message}")
    if not found.ok:
        return fail("api server", f"/version: {found.message}", "is this a Kubernetes API server?")
    return ok("api server", f"Kubernetes {found.body.get('gitVersion', '?')}")
