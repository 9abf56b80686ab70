"""``/healthz`` and ``/readyz``: the answers, and answering them without a worker thread.

The kubelet restarts a webhook whose liveness probe times out (1 s by default) and takes a pod
whose readiness probe fails out of the Service. Both must be answered while every worker thread
evaluates costly CEL (issue 16), so the request gate (``webhook.slowclients``), which already
holds each whole request before any worker sees it, answers a plain ``GET`` or ``HEAD`` of these
paths itself with ``raw_answer``. Both answers are cheap: a constant, and the policy holder's
status (one attribute read, no lock). The Flask routes give the same answers from the same
``Probes``, for requests the gate leaves to the app (those with a body, say).
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

from engine.policy.reload import PolicyHolder

VERSION_HEADER = "X-Fleetgate-Policy-Version"
PROBES_EXTENSION = "fleetgate.probes"  # the app's Probes, in Flask's app.extensions
CONTENT_TYPE = "text/plain; charset=utf-8"
PATHS = ("/healthz", "/readyz")
_MAX_ISSUES = 20  # shown by /readyz
_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0")


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    status: int
    text: str  # the body, ending in a newline
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """A response as bytes, how many bytes of the buffer its request took, and whether the
    connection stays open for another request."""

    response: bytes
    consumed: int
    keep_alive: bool


class Probes:
    """The answers to the health probes over the live policy set in ``holder``."""

    def __init__(self, holder: PolicyHolder) -> None:
        self._holder = holder

    def answer(self, path: str) -> ProbeAnswer:
        """Liveness (``/healthz``: the process serves) or readiness (``/readyz``)."""
        if path == "/healthz":
            return ProbeAnswer(200, "ok\n")
        if path != "/readyz":
            raise ValueError(f"not a probe path: {path}")
        status = self._holder.status
        issues = "\n".join(str(issue) for issue in status.errors[:_MAX_ISSUES])
        if not status.ready:
            return ProbeAnswer(
                503, f"not ready: no valid policy set is loaded\n{issues}".strip() + "\n"
            )
        text = f"ready: policy version {status.version}"
        if not status.healthy:
            text += (
                f"\nthe last reload failed ({len(status.errors)} issue(s)); "
                f"the version above stays live\n{issues}"
            )
        return ProbeAnswer(200, text + "\n", ((VERSION_HEADER, status.version or ""),))


def raw_answer(probes: Probes, buffer: bytes | bytearray, server_name: str) -> RawAnswer | None:
    """The answer to the request at the start of ``buffer`` if it is a plain probe: ``GET`` or
    ``HEAD`` of a probe path, HTTP/1.x, without a body; None for anything else (the app
    answers it). The status line and headers are the ones cheroot writes for the Flask route."""
    if not buffer.startswith((b"GET /", b"HEAD /")):
        return None
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end]).split(b"\r\n")
    request_line = head[0].split(b" ")
    if len(request_line) != 3:
        return None
    method, target, version = request_line
    path = target.split(b"?", 1)[0].decode("ascii", "replace")
    if method not in (b"GET", b"HEAD") or path not in PATHS or version not in _VERSIONS:
        return None
    tokens: set[bytes] = set()
    for line in head[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip()
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return None
        if name == b"connection":
            tokens.update(token.strip().lower() for token in value.split(b","))
    keep_alive = b"close" not in tokens if version == b"HTTP/1.1" else False
    answer = probes.answer(path)
    body = answer.text.encode()
    headers = [
        ("Content-Type", CONTENT_TYPE),
        ("Content-Length", str(len(body))),
        *answer.headers,
        *([] if keep_alive else [("Connection", "close")]),
        ("Date", formatdate(usegmt=True)),
        ("Server", server_name),
    ]
    lines = [f"{version.decode()} {answer.status} {HTTPStatus(answer.status).phrase}"]
    lines += [f"{name}: {value}" for name, value in headers]
    response = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if method == b"GET":
        response += body
    return RawAnswer(response, end + 4, keep_alive)
