"""Text a tenant wrote (annotations, names computed from them): checked before use, made safe
before it is echoed.

A job's annotations are free text of up to 256 KiB. fleetgate copies some of what they say into
its decisions, and from there into binding annotations, Events, conditions, logs, the API and
the CLI's terminal output. Two rules keep that safe:

- a value used as a name (a group, a queue, the parts of a dependency reference) must be a
  Kubernetes name (``name_problem``); one that is not is rejected with a reason, and never used;
- a value echoed in a message is escaped and capped (``echo``): control characters, the Unicode
  line and paragraph separators and the bidirectional controls become ``\\xNN``/``\\uNNNN``
  escapes, so a value can break no line, terminal or log record, and at most ``limit``
  characters of it are kept.
"""

from __future__ import annotations

import re

MAX_ECHO = 253
"""Characters of a tenant's value echoed in a message (a Kubernetes name's longest)."""

SUBDOMAIN_MAX = 253
LABEL_MAX = 63
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# C0, DEL, C1; line/paragraph separators; bidi embeddings, overrides and isolates; BOM
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


_PARTIAL = re.compile(r"\\(x[0-9a-f]?|u[0-9a-f]{0,3})?$")
_UNESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4})")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def echo(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` safe to echo: unsafe characters escaped, and no more than ``limit`` characters
    of the result kept (then ``…`` and how many of ``text``'s were left out, ≤ 26 more)."""
    safe = _UNSAFE.sub(_escaped, text[:limit])
    if len(safe) > limit:  # escapes made it longer: never end inside one
        safe = _PARTIAL.sub("", safe[:limit])
    kept = len(_UNESCAPE.sub("?", safe))
    return safe if kept >= len(text) else f"{safe}…(+{len(text) - kept} characters)"


def name_problem(text: str, *, label: bool = False) -> str | None:
    """Why ``text`` is not a Kubernetes name (a DNS-1123 subdomain, or with ``label`` a
    DNS-1123 label), or None when it is one."""
    most, pattern = (LABEL_MAX, _LABEL) if label else (SUBDOMAIN_MAX, _SUBDOMAIN)
    kind = "DNS-1123 label" if label else "DNS-1123 subdomain"
    if not text:
        return f"an empty name is not a {kind}"
    if len(text) > most:
        return f"{len(text)} characters, more than a {kind}'s {most}"
    if pattern.fullmatch(text) is None:
        extra = "" if label else ", '.'"
        return (
            f"'{echo(text)}' is not a {kind}: lower-case letters, digits, '-'{extra}, "
            "starting and ending with a letter or digit"
        )
    return None
