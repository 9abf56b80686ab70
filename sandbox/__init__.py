"""fleetgate's sandbox: an embedded Kubernetes/Karmada-compatible API server for tests and demos.

Never imported by ``engine/`` or ``webhook/`` (tests/test_layering.py checks it); production runs
against a real karmada-apiserver.

- :class:`~sandbox.store.Store`: the in-process API (create/get/list/update/update_status/
  patch/delete/delete_collection/watch) with the API server's semantics.
- :class:`~sandbox.server.Sandbox`: the same store served over HTTPS for the ``kubernetes``
  client and kubectl; ``write_kubeconfig`` for both.
- :mod:`sandbox.resources`: the served kinds; :mod:`sandbox.errors`: Status errors;
  :mod:`sandbox.admission`: the admission hook; :mod:`sandbox.schema`: CRD schema validation.

See docs/sandbox.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.admission import Admission, AdmissionRequest
    from sandbox.errors import StatusError
    from sandbox.resources import Registry, ResourceType, default_registry
    from sandbox.server import Sandbox
    from sandbox.store import Store
    from sandbox.watch import Subscription

# Loaded on first use (PEP 562), so that `fleetgate <any command>` registering `fleetgate
# sandbox` (sandbox.cli, argparse only) does not pay for the server's imports (~180 ms).
_HOMES = {
    "Admission": "sandbox.admission",
    "AdmissionRequest": "sandbox.admission",
    "StatusError": "sandbox.errors",
    "Registry": "sandbox.resources",
    "ResourceType": "sandbox.resources",
    "default_registry": "sandbox.resources",
    "Sandbox": "sandbox.server",
    "Store": "sandbox.store",
    "Subscription": "sandbox.watch",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "Admission",
    "AdmissionRequest",
    "Registry",
    "ResourceType",
    "Sandbox",
    "StatusError",
    "Store",
    "Subscription",
    "default_registry",
]
