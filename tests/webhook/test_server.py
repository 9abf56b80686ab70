"""The app on the real server (cheroot) over 127.0.0.1: HTTP, TLS, rotation, hot policy swap.

Every server listens on an ephemeral port and is stopped in teardown; every socket operation has
a timeout, and every wait polls with a deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.waiting import eventually
from tests.webhook.helpers import (
    apply_patch,
    created_binding,
    example,
    patch_of,
    review,
    write_certificates,
)
from webhook.app import MAX_BODY, VERSION_HEADER
from webhook.serve import WebhookServer

MUTATE = "/mutate/resourcebindings"
VALIDATE = "/validate/workloads"
TIMEOUT_S = 5.0


@contextlib.contextmanager
def serving(app, **options: Any) -> Iterator[WebhookServer]:
    server = WebhookServer(app, "127.0.0.1", 0, threads=8, **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def connect(server: WebhookServer, context: ssl.SSLContext | None = None):
    host, port = server.address
    if server.scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=TIMEOUT_S, context=context)
    return http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)


def call(conn, method: str, path: str, body: Any = None) -> tuple[int, Any, bytes]:
    data = body if isinstance(body, bytes | type(None)) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    conn.request(method, path, body=data, headers=headers)
    reply = conn.getresponse()
    return reply.status, reply.headers, reply.read()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    eventually(condition, what=what)


def test_plain_http_serves_every_route(make_app):
    with serving(make_app()) as server:
        conn = connect(server)
        status, headers, body = call(conn, "POST", MUTATE, review(created_binding()))
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        answer = json.loads(body)
        assert answer["response"]["allowed"] is True
        assert patch_of(answer)[0]["path"] == "/spec/suspension"
        assert headers[VERSION_HEADER] == answer["response"]["auditAnnotations"]["policy-version"]

        status, _, body = call(
            conn, "POST", VALIDATE, review(example("PyTorchJob", "llama-pretrain"))
        )
        assert (status, json.loads(body)["response"]["allowed"]) == (200, True)

        for path in ("/healthz", "/readyz"):
            assert call(conn, "GET", path)[0] == 200
        status, headers, body = call(conn, "GET", "/metrics")
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = body.decode()
        assert (
            f'fleetgate_webhook_requests_total{{endpoint="{MUTATE}",result="patched"}} 1.0' in text
        )
        assert 'fleetgate_webhook_patches_total{decision="held"} 1.0' in text
        assert "fleetgate_webhook_request_duration_seconds_bucket" in text
        assert "fleetgate_policy_version_info{version=" in text
        conn.close()


def test_bad_input_over_the_wire(make_app):
    with serving(make_app()) as server:
        conn = connect(server)
        status, headers, body = call(conn, "POST", MUTATE, b"{not json")
        assert status == 400
        assert headers["Content-Type"].startswith("text/plain")
        assert b"not JSON" in body
        review_without_uid = review(created_binding())
        del review_without_uid["request"]["uid"]
        assert call(conn, "POST", MUTATE, review_without_uid)[0] == 400
        conn.close()


def test_a_body_over_3_mib_is_refused_with_413(make_app):
    document = review(created_binding())
    document["request"]["object"]["metadata"]["annotations"]["padding"] = "x" * MAX_BODY
    body = json.dumps(document).encode()
    with serving(make_app()) as server:
        conn = connect(server)
        try:
            status, _, text = call(conn, "POST", MUTATE, body)
        except (BrokenPipeError, ConnectionResetError):
            pytest.fail("the server must answer 413, not drop the connection")
        assert status == 413
        assert b"larger than 3 MiB" in text
        conn.close()


# -- TLS ------------------------------------------------------------------------------------------


def client_context(ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def served_serial(server: WebhookServer, context: ssl.SSLContext) -> int:
    """The serial number of the certificate a new connection is shown (after a full request)."""
    conn = connect(server, context)
    assert call(conn, "GET", "/healthz")[0] == 200
    der = conn.sock.getpeercert(binary_form=True)
    conn.close()
    return x509.load_der_x509_certificate(der).serial_number


def test_tls_handshake_with_a_generated_certificate(make_app, tmp_path):
    cert, key, ca_file, _ = write_certificates(tmp_path / "tls")
    with serving(make_app(), tls=(cert, key)) as server:
        assert server.scheme == "https"
        conn = connect(server, client_context(ca_file))
        status, _, body = call(conn, "POST", MUTATE, review(created_binding()))
        assert status == 200
        assert json.loads(body)["response"]["allowed"] is True
        assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")
        conn.close()

        untrusting = ssl.create_default_context()  # the system CAs do not know our CA
        with pytest.raises(ssl.SSLCertVerificationError):
            call(connect(server, untrusting), "GET", "/healthz")

        plain = http.client.HTTPConnection(*server.address, timeout=TIMEOUT_S)
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            call(plain, "GET", "/healthz")  # plain HTTP to the TLS port gets no answer
        plain.close()


def test_rotated_certificate_is_picked_up_without_a_restart(make_app, tmp_path):
    directory = tmp_path / "tls"
    cert, key, ca_file, ca = write_certificates(directory)
    results: list[bool] = []
    with serving(
        make_app(), tls=(cert, key), reload_interval=0.05, on_certificate_reload=results.append
    ) as server:
        context = client_context(ca_file)
        first = served_serial(server, context)
        kept = connect(server, context)  # a keep-alive connection opened before the rotation
        assert call(kept, "GET", "/healthz")[0] == 200

        write_certificates(directory, ca=ca)  # cert-manager renews: same CA, new cert and key
        wait_until(lambda: served_serial(server, context) != first, "the new certificate")
        assert results == [True]
        assert call(kept, "GET", "/healthz")[0] == 200  # open connections keep working
        kept.close()


def test_a_renewal_never_shows_a_new_certificate_beside_the_old_key(tmp_path, monkeypatch):
    # The rotation test above polls every 50 ms; a renewal written file by file once let it
    # see the new certificate with the old key (CI, 2026-11-29). The kubelet swaps a Secret
    # volume in one rename, so every state a reader can see must be a matching pair.
    directory = tmp_path / "tls"
    cert, key, _, ca = write_certificates(directory)
    seen: list[bool] = []

    def loads() -> bool:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
        except (ssl.SSLError, OSError):
            return False
        return True

    def watched(step: Callable[..., Any]) -> Callable[..., Any]:
        def after(self: Path, *args: Any, **kwargs: Any) -> Any:
            result = step(self, *args, **kwargs)
            seen.append(loads())
            return result

        return after

    for name in ("replace", "rename", "write_bytes", "symlink_to", "unlink"):
        monkeypatch.setattr(Path, name, watched(getattr(Path, name)))
    before = cert.read_bytes()
    write_certificates(directory, ca=ca)
    monkeypatch.undo()
    assert cert.read_bytes() != before and loads()
    assert seen and all(seen)


def test_a_half_written_certificate_pair_keeps_the_old_one_until_complete(make_app, tmp_path):
    directory = tmp_path / "tls"
    cert, key, ca_file, ca = write_certificates(directory)
    results: list[bool] = []
    with serving(
        make_app(), tls=(cert, key), reload_interval=0.05, on_certificate_reload=results.append
    ) as server:
        context = client_context(ca_file)
        first = served_serial(server, context)
        staged = write_certificates(tmp_path / "next", ca=ca)
        shutil.copyfile(staged[0], tmp_path / ".crt")
        (tmp_path / ".crt").replace(cert)  # the certificate first: it does not match the key
        wait_until(lambda: False in results, "the mismatched pair to be refused")
        assert served_serial(server, context) == first
        shutil.copyfile(staged[1], tmp_path / ".key")
        (tmp_path / ".key").replace(key)
        wait_until(lambda: True in results, "the completed pair to load")
        assert served_serial(server, context) != first


# -- policy hot swap under load -------------------------------------------------------------------


def test_policy_hot_swap_while_requests_are_in_flight(make_app, holder, policy_dir):
    queues = policy_dir / "queues.yaml"
    original = queues.read_text()
    edited = original.replace("  weight: 2\n", "  weight: 3\n")
    assert edited != original
    first = holder.current.version
    queues.write_text(edited)
    assert holder.reload()
    second = holder.current.version
    assert first != second

    workers, swaps = 8, 8
    results: list[tuple[int, str, str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    with serving(make_app()) as server:
        done = threading.Event()

        def send_many() -> None:
            conn = connect(server)
            try:
                while not done.is_set():
                    binding = created_binding()
                    status, headers, body = call(conn, "POST", MUTATE, review(binding))
                    answer = json.loads(body)
                    audit = answer["response"]["auditAnnotations"]["policy-version"]
                    patched = apply_patch(binding, patch_of(answer))
                    stamped = patched["metadata"]["annotations"]["fleetgate.io/policy-version"]
                    with lock:
                        results.append((status, headers[VERSION_HEADER], audit, stamped))
            except Exception as err:  # noqa: BLE001 - a thread's failure is asserted below
                with lock:
                    errors.append(err)
            finally:
                conn.close()

        threads = [threading.Thread(target=send_many) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for swap in range(swaps):  # second → first → second …, while requests keep coming
            answered = len(results) + len(errors)
            wait_until(lambda n=answered: len(results) + len(errors) > n, "answers between swaps")
            queues.write_text(edited if swap % 2 else original)
            assert holder.reload(), holder.status.errors
        answered = len(results) + len(errors)
        wait_until(lambda: len(results) + len(errors) > answered, "answers after the last swap")
        done.set()
        for thread in threads:
            thread.join(timeout=TIMEOUT_S)
        assert not any(thread.is_alive() for thread in threads)

    assert errors == []
    assert len(results) >= 100
    assert {status for status, *_ in results} == {200}
    for _, header, audit, stamped in results:
        assert header == audit == stamped  # one version per response, never a mix
        assert header in (first, second)
    seen = {header for _, header, *_ in results}
    assert seen == {first, second}, f"only {seen} seen over {swaps} swaps"
