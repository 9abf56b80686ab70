"""Builders for AdmissionReviews shaped like the karmada-apiserver's, and a JSON patch applier.

Objects come from ``examples/fleet-snapshot.yaml``. A binding "as created" is what Karmada's
detector sends on CREATE: no uid, resourceVersion, status or scheduling result yet, and none of
fleetgate's own labels or annotations.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import functools
import itertools
import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

_uids = itertools.count(1)

NOW = dt.datetime(2025, 3, 10, 10, 0, 0, tzinfo=dt.UTC)
NOW_TEXT = "2025-03-10T10:00:00Z"


def fixed_clock() -> dt.datetime:
    return NOW


@functools.cache
def _snapshot_items() -> tuple[dict[str, Any], ...]:
    document = yaml.safe_load((REPO / "examples" / "fleet-snapshot.yaml").read_text())
    return tuple(document["items"])


def example(kind: str, name: str) -> dict[str, Any]:
    """A deep copy of the example object of ``kind`` named ``name``."""
    for item in _snapshot_items():
        if item["kind"] == kind and item["metadata"]["name"] == name:
            return copy.deepcopy(item)
    raise KeyError(f"{kind}/{name} is not in examples/fleet-snapshot.yaml")


def created_binding(name: str = "tokenizer-stats-job", *, suspension: Any = None) -> dict:
    """A ResourceBinding as Karmada's detector creates it (``suspension``: spec.suspension)."""
    binding = example("ResourceBinding", name)
    meta = binding["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(key, None)
    meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith("fleetgate.io/")}
    meta["annotations"] = {
        k: v for k, v in meta["annotations"].items() if not k.startswith("fleetgate.io/")
    }
    binding.pop("status", None)
    spec = binding["spec"]
    spec.pop("clusters", None)
    spec.pop("suspension", None)
    if suspension is not None:
        spec["suspension"] = suspension
    return binding


def admitted_binding(name: str = "tokenizer-stats-job") -> dict:
    """A binding fleetgate admitted: managed, suspended, bound by fleetgate to a cluster."""
    binding = example("ResourceBinding", name)
    binding["metadata"]["annotations"].update(
        {
            "fleetgate.io/admitted-at": "2025-03-10T09:55:00Z",
            "fleetgate.io/admitted-to": "gpu-west",
            "fleetgate.io/queued-at": "2025-03-10T09:50:00Z",
        }
    )
    binding["spec"]["clusters"] = [{"name": "gpu-west", "replicas": 4}]
    return binding


KARMADA_USER = {
    "username": "system:serviceaccount:karmada-system:karmada-controller-manager",
    "uid": "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "groups": ["system:serviceaccounts", "system:authenticated"],
}
FLEETGATE_USER = {
    "username": "system:serviceaccount:fleetgate-system:fleetgate-reconciler",
    "groups": ["system:serviceaccounts", "system:authenticated"],
}


def review(
    obj: Mapping[str, Any],
    *,
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    uid: str | None = None,
    user: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 request for ``obj``, as the API server sends it (by Karmada's
    controller manager unless ``user`` says who)."""
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind", ""))
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    meta = obj.get("metadata") or {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": plural}
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(operation)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or f"705ab4f5-6393-11e8-b7cc-42010a8000{next(_uids):02d}",
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": dict(user or KARMADA_USER),
            "object": obj,
            "oldObject": old,
            "dryRun": False,
            "options": (
                {"apiVersion": "meta.k8s.io/v1", "kind": options_kind} if options_kind else None
            ),
        },
    }


def patch_of(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decoded JSON patch of an AdmissionReview response; [] when there is none."""
    response = answer["response"]
    if "patch" not in response:
        assert "patchType" not in response
        return []
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


# -- RFC 6902 JSON patch (add, remove, replace, test), enough to apply the webhook's patches ----


class PatchError(Exception):
    pass


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"pointer {pointer!r} must start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _parent(doc: Any, tokens: list[str]) -> Any:
    target = doc
    for token in tokens[:-1]:
        if isinstance(target, dict):
            if token not in target:
                raise PatchError(f"no member {token!r}")
            target = target[token]
        elif isinstance(target, list):
            target = target[int(token)]
        else:
            raise PatchError(f"cannot descend into {type(target).__name__} at {token!r}")
    return target


def apply_patch(document: Any, patch: list[Mapping[str, Any]]) -> Any:
    """A patched deep copy; PatchError when an operation does not apply (as the API server)."""
    doc = copy.deepcopy(document)
    for op in patch:
        tokens = _tokens(op["path"])
        if not tokens:
            raise PatchError("whole-document operations are not used by the webhook")
        parent, last = _parent(doc, tokens), tokens[-1]
        kind = op["op"]
        if isinstance(parent, dict):
            if kind in ("remove", "replace", "test") and last not in parent:
                raise PatchError(f"{kind}: no member {last!r} at {op['path']}")
            if kind in ("add", "replace"):
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[last]
            elif kind == "test" and parent[last] != op["value"]:
                raise PatchError(f"test failed at {op['path']}")
        elif isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[index]
        else:
            raise PatchError(f"{op['path']}: parent is {type(parent).__name__}, not a container")
    return doc


# -- the ResourceBinding CRD schema -----------------------------------------------------------


def crd_schema(crds: Path, file: str, version: str = "v1alpha2") -> dict[str, Any]:
    """The openAPIV3Schema of ``version`` in a CRD file, as a JSON Schema.

    OpenAPI v3.0 differs from JSON Schema where CRDs use it: ``nullable: true`` adds ``null`` to
    the type. ``x-kubernetes-*`` extensions and ``format`` are annotations for JSON Schema
    validators and are left as they are.
    """
    crd = yaml.safe_load((crds / file).read_text())
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return _nullable(entry["schema"]["openAPIV3Schema"])
    raise KeyError(f"{file} has no version {version}")


def _nullable(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: _nullable(value) for key, value in node.items()}
    if result.pop("nullable", False) and "type" in result:
        result["type"] = [result["type"], "null"]
    return result


# -- certificates -------------------------------------------------------------------------------


def write_certificates(
    directory: Path, *, common_name: str = "fleetgate-webhook", ca: Any = None
) -> tuple[Path, Path, Path, Any]:
    """A CA and a serving certificate for localhost/127.0.0.1 signed by it, as PEM files.

    Returns (cert, key, ca_cert, ca) where ``ca`` = (ca_cert_object, ca_key) can sign the next
    certificate (rotation keeps the CA, as cert-manager's CA issuer does).
    """
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    if ca is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fleetgate-test-ca")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        ca = (ca_cert, ca_key)
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    files = {
        "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
        "tls.key": key_pem,
        "ca.crt": ca_cert.public_bytes(serialization.Encoding.PEM),
    }
    swap_in_secret_volume(directory, files)
    return (*(directory / name for name in files), ca)


def swap_in_secret_volume(directory: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` as the kubelet writes a Secret volume: all of them change in one rename.

    Each visible name is a symlink into ``..data``, itself a symlink to a hidden directory that
    holds this version; a new version is a new directory and one rename of ``..data``. A reader
    that follows the symlinks sees the old set or the new one, never a new certificate beside
    the old key.
    """
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "..data"
    previous = directory / data.readlink() if data.is_symlink() else None
    version = Path(tempfile.mkdtemp(prefix="..version-", dir=directory))
    for name, content in files.items():
        (version / name).write_bytes(content)
    staged = directory / "..data_tmp"
    staged.symlink_to(version.name)
    staged.replace(data)  # rename(2) over the old link: the one atomic step
    for name in files:
        visible = directory / name
        if not visible.is_symlink():
            visible.unlink(missing_ok=True)
            visible.symlink_to(f"..data/{name}")
    if previous is not None:
        shutil.rmtree(previous)


# -- the same client interface over real HTTP -----------------------------------------------------


class WireResponse:
    """The parts of Flask's test response the tests read, from a real HTTP response."""

    def __init__(self, status: int, headers: Any, data: bytes) -> None:
        self.status_code = status
        self.headers = headers
        self.data = data
        self.text = data.decode("utf-8", "replace")
        self.mimetype = (headers.get("Content-Type") or "").split(";")[0].strip()

    def get_json(self) -> Any:
        return json.loads(self.data)


class WireClient:
    """``post``/``get`` like Flask's test client, over one keep-alive HTTP connection."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        import http.client

        self._open = lambda: http.client.HTTPConnection(host, port, timeout=timeout)
        self._conn = self._open()

    def _call(self, method: str, path: str, body: bytes | None, content_type: str) -> WireResponse:
        headers = {"Content-Type": content_type} if body is not None else {}
        try:
            self._conn.request(method, path, body=body, headers=headers)
            reply = self._conn.getresponse()
            data = reply.read()
        finally:
            if self._conn.sock is None:  # the server closed it: the next call reconnects
                self._conn = self._open()
        if reply.will_close:
            self._conn.close()
            self._conn = self._open()
        return WireResponse(reply.status, reply.headers, data)

    def post(
        self,
        path: str,
        json: Any = None,
        data: bytes | str | None = None,
        content_type: str = "application/json",
    ) -> WireResponse:
        import json as _json

        body = _json.dumps(json).encode() if json is not None else data
        if isinstance(body, str):
            body = body.encode()
        return self._call("POST", path, body if body is not None else b"", content_type)

    def get(self, path: str) -> WireResponse:
        return self._call("GET", path, None, "")

    def close(self) -> None:
        self._conn.close()
