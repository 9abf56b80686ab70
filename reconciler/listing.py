"""Which jobs a list asks for, and a page of them at a time, as a Kubernetes list pages
(``limit``, ``metadata.continue``, ``remainingItemCount``): shared by ``/api/v1/jobs`` and
the visibility API (which takes the filter as a ``fieldSelector``)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from reconciler.jobsview import STATES, JobEntry, PassView
from reconciler.latest import ApiError

DEFAULT_LIMIT = 500
MAX_LIMIT = 1000  # a larger ``limit`` is served as this many, as a Kubernetes server may do
FIELDS = {  # a fieldSelector's field → JobFilter's
    "queue": "queue",
    "state": "state",
    "kind": "kind",
    "reason": "reason",
    "metadata.namespace": "namespace",
}


@dataclass(frozen=True, slots=True)
class JobFilter:
    queue: str = ""  # the queue and every queue below it
    state: str = ""
    namespace: str = ""
    kind: str = ""  # the template's kind
    reason: str = ""

    def check(self, view: PassView) -> None:
        if self.state and self.state not in STATES:
            raise ApiError(
                400, "BadRequest", f"state {self.state!r} is not one of {', '.join(STATES)}"
            )
        if self.queue and view.queue(self.queue) is None:
            raise ApiError(
                404, "NotFound", f'queue "{self.queue}" not found', name=self.queue, kind="queue"
            )

    def select(self, view: PassView) -> list[JobEntry]:
        queues = view.subtree(self.queue) if self.queue else None
        return [
            e
            for e in view.jobs
            if (queues is None or e.queue in queues)
            and (not self.state or e.state == self.state)
            and (not self.namespace or e.ref.split("/", 1)[0] == self.namespace)
            and (not self.kind or e.workload.split("/", 1)[0] == self.kind)
            and (not self.reason or e.reason == self.reason)
        ]


def field_selector(text: str | None, namespace: str = "") -> JobFilter:
    """The filter a ``fieldSelector`` asks for (``queue=research,state=pending``; ``=`` and
    ``==`` only), within ``namespace`` when the list is a namespace's."""
    found = {"namespace": namespace}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        field, equals, value = part.replace("==", "=").partition("=")
        field = field.strip()
        if not equals or "!" in field:
            raise ApiError(
                400, "BadRequest", f"invalid field selector {part.strip()!r}: only = is served"
            )
        if field not in FIELDS:
            raise ApiError(
                400,
                "BadRequest",
                f'"{field[:63]}" is not a known field selector: only {", ".join(FIELDS)}',
            )
        key = FIELDS[field]
        if key == "namespace" and namespace and value != namespace:
            found["namespace"] = "\0"  # another namespace's jobs within this one: none
        else:
            found[key] = value.strip()
    return JobFilter(**found)


@dataclass(frozen=True, slots=True)
class Page:
    items: Sequence[JobEntry]
    token: str  # continue; empty on the last page
    remaining: int


def limit_of(text: str | None) -> int:
    if text is None or text == "":
        return DEFAULT_LIMIT
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ApiError(400, "BadRequest", f"limit must be a positive integer, not {text!r}")
    return min(value, MAX_LIMIT)


def page_of(matching: Sequence[JobEntry], wanted: JobFilter, limit: int, token: str | None) -> Page:
    """The page of ``matching`` (sorted by binding) after the one ``token`` ended."""
    after = _continue_from(token, wanted)
    start = next((i for i, e in enumerate(matching) if e.ref > after), len(matching))
    items = matching[start : start + limit]
    rest = len(matching) - start - len(items)
    return Page(items, _token(items[-1].ref, wanted) if rest else "", rest)


def _said(wanted: JobFilter) -> Mapping[str, str]:
    """The filter as a token carries it: queue and state always (tokens of older versions
    carry those two), the rest when set."""
    fields = asdict(wanted)
    return {k: v for k, v in fields.items() if v or k in ("queue", "state")}


def _token(after: str, wanted: JobFilter) -> str:
    raw = json.dumps({"after": after, **_said(wanted)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _continue_from(token: str | None, wanted: JobFilter) -> str:
    """The binding after which a continued list starts ('' for the first page)."""
    if not token:
        return ""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after = str(decoded.pop("after"))
        issued = JobFilter(**{k: str(v) for k, v in decoded.items()})
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise ApiError(400, "BadRequest", "continue is not a token this API issued") from None
    if issued != wanted:
        said = " ".join(f"{k}={v!r}" for k, v in _said(issued).items())
        raise ApiError(
            400,
            "BadRequest",
            f"continue was issued for {said}; repeat those parameters with it",
        )
    return after
