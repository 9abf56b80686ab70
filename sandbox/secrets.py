"""Secrets as kube-apiserver and the token controller treat them.

- ``stringData`` is write-only: each key is merged into ``data`` (base64), replacing a key of the
  same name, and never stored (``pkg/apis/core/v1/conversion.go``).
- ``data`` values must be base64: kube-apiserver decodes them while reading the JSON body and
  answers 400 ``illegal base64 data at input byte N``.
- ``type`` defaults to ``Opaque`` and cannot change (422 ``field is immutable``).
- ``kubernetes.io/tls`` needs ``tls.crt`` and ``tls.key``; ``kubernetes.io/service-account-token``
  needs the annotation ``kubernetes.io/service-account.name`` (422 otherwise).
- The legacy token controller fills a ``kubernetes.io/service-account-token`` Secret whose
  ServiceAccount exists: ``data.token``, ``data.namespace``, ``data["ca.crt"]`` (the server's
  CA, when it has one) and the ServiceAccount's uid in ``kubernetes.io/service-account.uid``.
  kube-controller-manager does it moments after the create; the sandbox does it in the create
  itself. The token authenticates as ``system:serviceaccount:NS:NAME`` while the Secret holds it
  (``sandbox.authn``).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from sandbox import errors

OPAQUE = "Opaque"
TLS = "kubernetes.io/tls"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SA_NAME = "kubernetes.io/service-account.name"
SA_UID = "kubernetes.io/service-account.uid"


def _invalid(name: str, field: str, reason: str, message: str) -> errors.StatusError:
    return errors.invalid("", "Secret", name, [(field, reason, message)])


def prepare(
    new: dict[str, Any],
    current: Mapping[str, Any] | None,
    service_account: Callable[[str, str], Mapping[str, Any] | None],
    ca_pem: bytes | None,
) -> None:
    """Turn ``new`` into what is stored (in place); raise the Status kube-apiserver answers."""
    name = str((new.get("metadata") or {}).get("name") or "")
    data = new.get("data") or {}
    if not isinstance(data, dict):
        raise errors.bad_request("data must be an object of base64 strings")
    for key, value in data.items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError) as error:
            why = f"illegal base64 data in data[{key!r}]: {error}"
            raise errors.bad_request(
                f'Secret in version "v1" cannot be handled as a Secret: {why}'
            ) from error
    for key, value in (new.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        new["data"] = data
    kind = new.setdefault("type", OPAQUE)
    if current is not None and current.get("type", OPAQUE) != kind:
        raise _invalid(name, "type", "FieldValueInvalid", f'Invalid value: "{kind}": '
                       "field is immutable")  # fmt: skip
    if kind == TLS:
        for key in ("tls.crt", "tls.key"):
            if key not in data:
                raise _invalid(name, f"data[{key}]", "FieldValueRequired", "Required value")
    if kind == SERVICE_ACCOUNT_TOKEN:
        _token(new, data, service_account, ca_pem, name)


def _token(
    new: dict[str, Any],
    data: dict[str, Any],
    service_account: Callable[[str, str], Mapping[str, Any] | None],
    ca_pem: bytes | None,
    name: str,
) -> None:
    metadata = new["metadata"]
    notes = metadata.setdefault("annotations", {})
    account = notes.get(SA_NAME)
    if not account:
        field = f"metadata.annotations[{SA_NAME}]"
        raise _invalid(name, field, "FieldValueRequired", "Required value")
    namespace = str(metadata.get("namespace") or "")
    found = service_account(namespace, account)
    if found is None or data.get("token"):
        return
    data["token"] = base64.b64encode(secrets.token_urlsafe(32).encode()).decode()
    data["namespace"] = base64.b64encode(namespace.encode()).decode()
    if ca_pem:
        data["ca.crt"] = base64.b64encode(ca_pem).decode()
    notes[SA_UID] = str((found.get("metadata") or {}).get("uid") or "")
    new["data"] = data


def token_of(secret: Mapping[str, Any]) -> str:
    """The token a filled service-account-token Secret holds ("" for any other Secret)."""
    if secret.get("type") != SERVICE_ACCOUNT_TOKEN:
        return ""
    value = (secret.get("data") or {}).get("token") or ""
    try:
        return base64.b64decode(value).decode()
    except (binascii.Error, ValueError):
        return ""


class TokenIndex:
    """Bearer token → the ServiceAccount whose token Secret holds it, as kube-apiserver's
    legacy service-account token authenticator finds it: the Secret and the ServiceAccount (of
    the uid the Secret names) must both still exist."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._where: dict[str, tuple[str, str]] = {}  # token → (namespace, Secret name)

    def user(self, token: str) -> Any:
        from sandbox.authn import service_account_user

        where = self._where.get(token)
        secret = self._secret(*where) if where is not None else None
        if secret is None or token_of(secret) != token:
            secret = self._find(token)
        if secret is None:
            return None
        metadata = secret["metadata"]
        namespace, notes = metadata["namespace"], metadata.get("annotations") or {}
        account = self.store.service_account(namespace, notes.get(SA_NAME, ""))
        uid = str(((account or {}).get("metadata") or {}).get("uid") or "")
        if account is None or uid != notes.get(SA_UID):
            return None
        return service_account_user(namespace, notes[SA_NAME], uid)

    def _secret(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self.store.get("secrets", name, namespace=namespace)
        except errors.StatusError:
            return None

    def _find(self, token: str) -> Mapping[str, Any] | None:
        found: list[Mapping[str, Any]] = []

        def visit(secret: Mapping[str, Any]) -> None:
            if not found and token_of(secret) == token:
                found.append(secret)

        self.store.scan("secrets", visit)
        if not found:
            return None
        metadata = found[0]["metadata"]
        self._where[token] = (metadata["namespace"], metadata["name"])
        return found[0]
