"""The web dashboard's files: one page (``index.html``), its script and its style, written by
hand with nothing fetched from elsewhere, so it works on an air-gapped control plane.

Two servers serve them, unchanged, under the visibility API's path
``/apis/visibility.fleetgate.io/v1alpha1/dashboard/``: the visibility API itself (reached
through the API server, e.g. with ``kubectl proxy``), and ``fleetgate dashboard``, which
forwards the page's reads to the API server with the user's own kubeconfig. Either way the
page reads only API-server paths, as its user, and RBAC decides what it shows.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from flask import Response

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
HEADERS = {
    # the page talks to its own origin only, and runs no script it did not bring
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _files() -> dict[str, tuple[bytes, str]]:
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files(__name__).iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in TYPES:
            found[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return found


def asset(name: str) -> tuple[bytes, str] | None:
    """A file of the dashboard and its content type (``index.html`` for ''); None for any
    name that is not one of its files."""
    return _files().get(name or "index.html")


def response(name: str) -> Response | None:
    """The answer serving the file ``name`` (:func:`asset`) with the page's headers; None for
    a name that is not one of its files."""
    found = asset(name)
    if found is None:
        return None
    return Response(found[0], content_type=found[1], headers=HEADERS)
