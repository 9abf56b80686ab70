"""The JSON Schemas of the policy kinds, loaded once, and document validation against them."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from engine.errors import FleetgateError, QuantityError
from engine.quantity import parse_quantity

API_VERSION = "fleetgate.io/v1alpha1"
KINDS = {
    "Queue": "queue.schema.json",
    "SchedulingPolicy": "schedulingpolicy.schema.json",
    "AdmissionPolicy": "admissionpolicy.schema.json",
}
_SHARED = "common.schema.json"


@dataclass(frozen=True, slots=True)
class SchemaIssue:
    path: tuple[str | int, ...]
    message: str
    at_key: bool = False  # the issue is about the key itself (an unknown field)


def schema_dir() -> Path:
    """``schemas/`` of a source checkout, or the copy packaged inside ``engine/`` by a wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "schemas", here.parent / "schemas"):
        if (candidate / _SHARED).is_file():
            return candidate
    raise FleetgateError(f"policy schemas not found next to {here}")


@cache
def _validators() -> Mapping[str, Draft202012Validator]:
    folder = schema_dir()
    documents = {
        name: json.loads((folder / name).read_text(encoding="utf-8"))
        for name in (_SHARED, *KINDS.values())
    }
    registry: Registry = Registry().with_resources(
        (name, Resource.from_contents(doc, default_specification=DRAFT202012))
        for name, doc in documents.items()
    )
    validators = {}
    for kind, name in KINDS.items():
        Draft202012Validator.check_schema(documents[name])
        validators[kind] = Draft202012Validator(
            documents[name], registry=registry, format_checker=_FORMATS
        )
    return validators


_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("kubernetes-quantity", raises=QuantityError)
def _within_limits(instance: object) -> bool:
    """Range and precision of a quantity (the schema's pattern checks only its spelling)."""
    if isinstance(instance, str | int | float) and not isinstance(instance, bool):
        parse_quantity(instance)
    return True


def validate(document: Mapping[str, Any]) -> list[SchemaIssue]:
    """Every schema violation of one document; an unknown kind or apiVersion is one issue."""
    kind = document.get("kind")
    if document.get("apiVersion") != API_VERSION:
        got = document.get("apiVersion")
        return [SchemaIssue(("apiVersion",), f"apiVersion must be {API_VERSION!r}, got {got!r}")]
    if kind not in KINDS:
        known = ", ".join(sorted(KINDS))
        close = difflib.get_close_matches(kind, KINDS, n=1) if isinstance(kind, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [SchemaIssue(("kind",), f"unknown kind {kind!r}{hint}; expected one of {known}")]
    validator = _validators()[kind]
    issues = [issue for error in validator.iter_errors(document) for issue in _explain(error)]
    return sorted(set(issues), key=lambda i: ([str(p) for p in i.path], i.message))


def _explain(error: jsonschema.ValidationError) -> Iterator[SchemaIssue]:
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        for field in extra:
            hint = difflib.get_close_matches(field, allowed, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            known = ", ".join(allowed)
            yield SchemaIssue(
                (*path, field), f"unknown field {field!r}{suggestion}; known: {known}", True
            )
        if extra:
            return
    if error.schema.get("title") == "Kubernetes quantity" or _is_quantity(error):
        yield SchemaIssue(path, _quantity_message(error.instance))
        return
    if error.validator in ("oneOf", "anyOf") and error.context:
        best = jsonschema.exceptions.best_match(error.context)
        yield SchemaIssue((*path, *best.relative_path), best.message)
        return
    if error.validator == "not" and isinstance(error.instance, dict):
        yield SchemaIssue(path, "give either message or messageExpression, not both")
        return
    if error.validator == "pattern" and error.schema.get("title"):
        title = error.schema["title"]
        detail = error.schema.get("description", "")
        yield SchemaIssue(path, f"{error.instance!r} is not a valid {title}. {detail}".strip())
        return
    if error.validator == "type" and error.instance is None:
        yield SchemaIssue(path, f"is empty (null); expected {error.validator_value}")
        return
    if error.validator == "propertyNames":
        yield SchemaIssue(path, f"{error.instance!r} is not a valid resource name")
        return
    yield SchemaIssue(path, error.message)


def _is_quantity(error: jsonschema.ValidationError) -> bool:
    parent = error.parent
    return parent is not None and parent.schema.get("title") == "Kubernetes quantity"


def _quantity_message(value: object) -> str:
    try:
        number = parse_quantity(value)  # type: ignore[arg-type]
    except QuantityError as err:
        return str(err)
    if number < 0:
        return f"{value!r}: a quota quantity may not be negative"
    return f"{value!r} is not a valid quantity"
