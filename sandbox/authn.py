"""Who is calling: bearer tokens to users, as kube-apiserver's static token authenticator.

kube-apiserver's ``--token-auth-file`` (k8s.io/apiserver ``token/tokenfile``) is a CSV file,
one user a line: ``token,user,uid[,"group1,group2"]``; fewer than three columns is an error, an
empty token is skipped, a repeated token keeps the last line. Every authenticated user also gets
the group ``system:authenticated`` (appended, as ``AuthenticatedGroupAdder`` does, unless the
user already has it or ``system:unauthenticated``).

The sandbox's own token (the one in its kubeconfig) is ``sandbox-admin`` in ``system:masters``:
RBAC never stops it, as before authorization existed. A sandbox without a token
(``Sandbox(token=None)``, plain HTTP for curl) treats a request without a known token as
``system:unsecured`` in ``system:masters`` (kube-apiserver's old insecure port did the same).
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandbox import errors

log = logging.getLogger("fleetgate.sandbox.authn")

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"


class TokenFileError(errors.SandboxError):
    """A token file that kube-apiserver would refuse to start with."""


@dataclass(frozen=True, slots=True)
class User:
    """``user.Info``: name, uid, groups and extra (key → values)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def privileged(self) -> bool:
        """In ``system:masters``: allowed everything, without looking at RBAC."""
        return MASTERS in self.groups

    def authenticated(self) -> User:
        """With ``system:authenticated`` added, as the authenticator chain adds it."""
        if AUTHENTICATED in self.groups or UNAUTHENTICATED in self.groups:
            return self
        return User(self.name, self.uid, (*self.groups, AUTHENTICATED), self.extra)

    def to_json(self) -> dict[str, object]:
        """``authentication.k8s.io/v1`` UserInfo."""
        info: dict[str, object] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            info["uid"] = self.uid
        if self.extra:
            info["extra"] = {key: list(values) for key, values in self.extra.items()}
        return info


ADMIN = User("sandbox-admin", groups=(MASTERS, AUTHENTICATED))

_acting = threading.local()


@contextlib.contextmanager
def acting_as(user: User) -> Iterator[None]:
    """Name ``user`` as the caller of what the store does on this thread meanwhile: admission
    webhooks get it as ``userInfo``, as kube-apiserver sends the request's user."""
    _acting.user = user
    try:
        yield
    finally:
        _acting.user = None


def acting() -> User | None:
    """The caller of the request this thread serves (None: an in-process controller)."""
    return getattr(_acting, "user", None)


UNSECURED = User("system:unsecured", groups=(MASTERS, AUTHENTICATED))


def parse_token_file(text: str, source: str = "token file") -> dict[str, User]:
    """token → User from kube-apiserver's token file format."""
    users: dict[str, User] = {}
    number = 0
    for record in csv.reader(io.StringIO(text)):
        if not record:  # Go's csv reader skips empty lines
            continue
        if len(record) < 3:
            raise TokenFileError(
                f"token file '{source}' must have at least 3 columns "
                f"(token, user name, user uid), found {len(record)}"
            )
        number += 1
        token = record[0]
        if not token:
            log.warning("empty token in %s, record number %d", source, number)
            continue
        if token in users:
            log.warning("duplicate token in %s, record number %d", source, number)
        groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
        users[token] = User(record[1], record[2], groups)
    return users


def load_token_file(path: str | Path) -> dict[str, User]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise TokenFileError(f"cannot read the token file {path}: {error}") from error
    try:
        return parse_token_file(text, str(path))
    except csv.Error as error:
        raise TokenFileError(f"token file '{path}': {error}") from error


class Authenticator:
    """Bearer token → :class:`User` (with ``system:authenticated``), or None when unknown."""

    def __init__(self, admin_token: str | None, users: Mapping[str, User] | None = None) -> None:
        self.admin_token = admin_token
        self._users = {token: user.authenticated() for token, user in (users or {}).items()}
        # a ServiceAccount's token Secret (sandbox.secrets): token → its user, or None
        self.service_accounts: Callable[[str], User | None] | None = None
        if admin_token:
            self._users[admin_token] = ADMIN

    def add(self, token: str, user: User) -> None:
        self._users[token] = user.authenticated()

    def token(self, token: str) -> User | None:
        if not token:
            return None
        found = self._users.get(token)
        if found is None and self.service_accounts is not None:
            found = self.service_accounts(token)
        return found

    def request(self, authorization: str | None) -> User:
        """The caller of a request with this Authorization header; 401 when it names nobody."""
        scheme, _, token = (authorization or "").partition(" ")
        user = self.token(token.strip()) if scheme.lower() == "bearer" else None
        if user is None and not self.admin_token:
            return UNSECURED
        if user is None:
            raise errors.StatusError(errors.status(401, "Unauthorized", "Unauthorized"))
        return user


def service_account_user(namespace: str, name: str, uid: str = "") -> User:
    """A ServiceAccount's user, with the groups kube-apiserver gives it."""
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    return User(f"system:serviceaccount:{namespace}:{name}", uid, groups).authenticated()
