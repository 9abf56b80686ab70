"""Schema validation of Karmada objects against the real CRD schemas.

``FLEETGATE_KARMADA_CRDS`` (default ``../shared/crds/karmada`` beside the repository) holds the
upstream CRD manifests (``openAPIV3Schema`` per version; :mod:`sandbox.crds` also serves them as
``CustomResourceDefinition`` objects) and, for Cluster, which Karmada serves
from an aggregated API server rather than a CRD, the swagger definitions. Objects of the other
kinds are not schema-checked. When the directory is absent nothing is checked, and
:func:`load_schemas` says so in :attr:`Schemas.note`.

The OpenAPI v3 subset in CRDs maps onto JSON Schema draft 4 except for ``nullable`` and
``x-kubernetes-int-or-string``, rewritten here; other ``x-kubernetes-*`` keys are ignored.
Unknown fields are not pruned (the real server drops them silently).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft4Validator
from jsonschema.exceptions import ValidationError

from sandbox.errors import StatusError, invalid

ENV = "FLEETGATE_KARMADA_CRDS"
DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "crds" / "karmada"
CLUSTER_DEFINITIONS = "cluster.karmada.io_v1alpha1.swagger-definitions.json"
_CLUSTER_PREFIX = "com.github.karmada-io.karmada.pkg.apis.cluster.v1alpha1."


@dataclass(frozen=True)
class Schemas:
    """Validators by (apiVersion, kind); ``note`` says where they came from, or why none."""

    validators: Mapping[tuple[str, str], Draft4Validator] = field(default_factory=dict)
    note: str = ""
    # the CustomResourceDefinition manifests read, as found (sandbox.crds serves them)
    crds: tuple[Mapping[str, Any], ...] = ()

    def validate(self, obj: Mapping[str, Any], group: str) -> None:
        """Raise a 422 Invalid StatusError listing every schema violation of ``obj``."""
        key = (str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        validator = self.validators.get(key)
        if validator is None:
            return
        causes = [_cause(error) for error in _errors(validator, obj)]
        if causes:
            name = str((obj.get("metadata") or {}).get("name", ""))
            raise invalid(group, key[1], name, causes)

    def check(self, obj: Mapping[str, Any], group: str) -> StatusError | None:
        try:
            self.validate(obj, group)
        except StatusError as error:
            return error
        return None


def _errors(validator: Draft4Validator, obj: Mapping[str, Any]) -> Iterator[ValidationError]:
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    yield from errors


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _quote(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _cause(error: ValidationError) -> tuple[str, str, str]:
    """(field, metav1.CauseType, message) worded like apiextensions' validation errors."""
    where = _path(error.absolute_path)
    if error.validator == "required":
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        missing = next((n for n in error.validator_value if n not in instance), "")
        field_path = f"{where}.{missing}" if where else missing
        return field_path, "FieldValueRequired", "Required value"
    if error.validator == "type":
        expected = error.validator_value
        expected = expected if isinstance(expected, str) else " or ".join(expected)
        message = (
            f"Invalid value: {_quote(_short(error.instance))}: {where} in body must be of type "
            f"{expected}: {_quote(_type_name(error.instance))}"
        )
        return where, "FieldValueTypeInvalid", message
    if error.validator == "enum":
        supported = ", ".join(_quote(v) for v in error.validator_value)
        message = f"Unsupported value: {_quote(error.instance)}: supported values: {supported}"
        return where, "FieldValueNotSupported", message
    return (
        where,
        "FieldValueInvalid",
        f"Invalid value: {_quote(_short(error.instance))}: {error.message}",
    )


def _short(value: Any) -> Any:
    return (
        value if isinstance(value, str | int | float | bool) or value is None else _type_name(value)
    )


def _type_name(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer"}
    return names.get(type(value), "number" if isinstance(value, float) else "null")


def _openapi_to_jsonschema(node: Any) -> Any:
    """Rewrite ``nullable`` and ``x-kubernetes-int-or-string`` into draft-4 terms, recursively."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _openapi_to_jsonschema(v) for k, v in node.items()}
    if out.get("x-kubernetes-int-or-string") and "type" not in out and "anyOf" not in out:
        out["type"] = ["integer", "string"]
    if out.pop("nullable", False):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif "type" not in out:
            return out
    return out


def _crds(directory: Path) -> tuple[dict[str, Any], ...]:
    """The CustomResourceDefinition documents of the directory's YAML files, in file order."""
    found = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found.append(doc)
    return tuple(found)


def _crd_validators(crds: tuple[dict[str, Any], ...]) -> dict[tuple[str, str], Draft4Validator]:
    validators = {}
    for doc in crds:
        spec = doc["spec"]
        for version in spec.get("versions", []):
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema:
                api_version = f"{spec['group']}/{version['name']}"
                converted = _openapi_to_jsonschema(schema)
                validators[(api_version, spec["names"]["kind"])] = Draft4Validator(converted)
    return validators


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _cluster_validator(path: Path) -> Draft4Validator:
    """Cluster from the swagger definitions; ``io.k8s.*`` refs (not included) accept anything."""
    definitions = dict(json.loads(path.read_text())["definitions"])
    for ref in set(_refs(definitions)):
        name = ref.removeprefix("#/definitions/")
        definitions.setdefault(name, {})
    root = {"definitions": definitions, "$ref": f"#/definitions/{_CLUSTER_PREFIX}Cluster"}
    return Draft4Validator(root)


def crd_directory() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT_DIR)


def load_schemas(directory: Path | None = None) -> Schemas:
    """Validators from ``directory`` (default: ``$FLEETGATE_KARMADA_CRDS``); cached per path."""
    return _load(Path(directory or crd_directory()).resolve())


@functools.lru_cache(maxsize=4)
def _load(directory: Path) -> Schemas:
    if not directory.is_dir():
        return Schemas(note=f"Karmada CRDs not found at {directory} ({ENV}): no schema validation")
    crds = _crds(directory)
    validators = _crd_validators(crds)
    cluster = directory / CLUSTER_DEFINITIONS
    if cluster.is_file():
        validators[("cluster.karmada.io/v1alpha1", "Cluster")] = _cluster_validator(cluster)
    kinds = ", ".join(sorted({kind for _, kind in validators}))
    return Schemas(validators, note=f"schema validation of {kinds} from {directory}", crds=crds)
