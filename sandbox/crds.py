"""``apiextensions.k8s.io/v1`` CustomResourceDefinitions of the Karmada kinds, as a
karmada-apiserver holds them once Karmada is installed.

The sandbox validates Karmada objects against the CRD manifests of ``$FLEETGATE_KARMADA_CRDS``
(:mod:`sandbox.schema`); at each start it also stores each of those manifests as a
CustomResourceDefinition object (when missing), so that clients read them as they read a real
karmada-apiserver's (``kubectl get crd``, ``fleetgate preflight``). Their status is what the
apiextensions-apiserver's controllers write once the names are accepted
(``k8s.io/apiextensions-apiserver/pkg/controller/status`` NamingConditionController and
``establish`` EstablishingController): ``acceptedNames`` = ``spec.names``, ``NamesAccepted``
(``NoConflicts``, "no conflicts found"), ``Established`` (``InitialNamesAccepted``, "the
initial names have been accepted") and ``storedVersions`` = the storage version, which the
registry's create strategy sets.

What is not done: the served kinds stay fixed (:mod:`sandbox.resources`). A CRD created,
changed or deleted over the API is stored as given, and serves, or stops serving, nothing.
A directory without a CRD's file is a karmada-apiserver without that CRD.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox import errors
from sandbox.jsoncopy import copy_json
from sandbox.resources import CRD_TYPE

if TYPE_CHECKING:
    from sandbox.store import Store

KEY = CRD_TYPE.key  # customresourcedefinitions.apiextensions.k8s.io
_MANIFEST_METADATA = ("name", "labels", "annotations")


def established_status(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The status a CRD with these names has once the apiextensions-apiserver accepted them
    (at once, as the CRD was created)."""
    spec = crd.get("spec") or {}
    stamp = str((crd.get("metadata") or {}).get("creationTimestamp") or "")
    storage = [v["name"] for v in spec.get("versions") or () if v.get("storage")]
    return {
        "acceptedNames": copy_json(spec.get("names") or {}),
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "storedVersions": storage,
    }


def install(store: Store) -> list[str]:
    """Store each CRD manifest of ``store.schemas`` that is not there yet, established; the
    names of those created."""
    created = []
    for manifest in store.schemas.crds:
        metadata = manifest.get("metadata") or {}
        body = {
            "apiVersion": CRD_TYPE.storage_api_version,
            "kind": CRD_TYPE.kind,
            "metadata": {k: copy_json(metadata[k]) for k in _MANIFEST_METADATA if k in metadata},
            "spec": copy_json(manifest.get("spec") or {}),
        }
        try:
            stored = store.create(KEY, body)
        except errors.StatusError as error:
            if error.code == 409:  # there already: left as it is, as a reinstall would
                continue
            raise
        stored["status"] = established_status(stored)
        store.update_status(KEY, stored)
        created.append(stored["metadata"]["name"])
    return created
