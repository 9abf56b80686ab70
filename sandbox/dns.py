"""Names the sandbox resolves in place of cluster DNS: ``(host, port)`` → ``(address, port)``.

kube-apiserver reaches an admission webhook's ``url:`` and an APIService's Service by DNS name
(``fleetgate-webhook.fleetgate-system.svc``) and checks the serving certificate against that
name. The sandbox has no cluster DNS: :data:`Hosts` maps such a name and port to where the
server really listens (127.0.0.1 and a free port), and :func:`route` makes a connection dial that
address while TLS still sends and verifies the name, so a certificate made for the Service's
name is checked exactly as the real API server checks it.
"""

from __future__ import annotations

import http.client
import socket
from typing import Any

Hosts = dict[tuple[str, int], tuple[str, int]]


def route(connection: http.client.HTTPConnection, hosts: Hosts | None) -> None:
    """Dial ``hosts[(connection.host, connection.port)]`` when there is one (in place)."""
    where = (hosts or {}).get((connection.host, connection.port))
    if where is None:
        return

    def dial(_address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        return socket.create_connection(where, *args, **kwargs)

    connection._create_connection = dial  # type: ignore[attr-defined]
