"""The API server's front door, in the order kube-apiserver's filters run: authenticate the
caller (:mod:`sandbox.authn`), authorize the request by RBAC (:mod:`sandbox.rbac`, with the
attributes :mod:`sandbox.requestinfo` reads from the URL), then serve what the store does not:
the review kinds (:mod:`sandbox.reviews`) and aggregated APIs (:mod:`sandbox.aggregator`).

The HTTP handler calls :meth:`Access.admit` first on every request and :meth:`Access.serve`
before its own routing. A caller in ``system:masters`` (the sandbox's own token) costs one
dict look-up: nothing is read from the store for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sandbox import discovery, errors, reviews
from sandbox.aggregator import Aggregator, api_groups, claiming
from sandbox.authn import Authenticator, User
from sandbox.dns import Hosts
from sandbox.frontproxy import FrontProxy
from sandbox.rbac import Authorizer
from sandbox.requestinfo import attributes

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from sandbox.resources import Registry
    from sandbox.store import Store

Reply = Callable[[int, Any], None]  # a JSON answer: (status code, body)


class Access:
    def __init__(
        self,
        authenticator: Authenticator,
        front_proxy: FrontProxy,
        service_urls: Mapping[tuple[str, str, int], str],
        hosts: Hosts | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.front_proxy = front_proxy
        self.service_urls = service_urls
        self.aggregator = Aggregator(front_proxy, lambda: self.service_urls, hosts)
        self._served: tuple[Registry, frozenset[str], frozenset[tuple[str, str]]] | None = None

    def admit(
        self,
        store: Store,
        authorization: str | None,
        method: str,
        path: str,
        query: Mapping[str, str],
    ) -> User:
        """The caller, once allowed to make this request: 401 or 403 otherwise."""
        user = self.authenticator.request(authorization)
        if not user.privileged:
            Authorizer(store).check(attributes(user, method, path, query))
        return user

    def serve(
        self,
        handler: BaseHTTPRequestHandler,
        reply: Reply,
        store: Store,
        user: User,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: bytes,
    ) -> bool:
        """Answer a review, an aggregated API's request or discovery that includes one; False
        when the request is the store's to serve. ``reply`` sends a JSON answer; an aggregated
        API's answer is relayed on ``handler``."""
        parts = [p for p in path.split("/") if p]
        if not parts or parts[0] != "apis":
            return False
        review = reviews.review_kind(parts)
        if review is not None:
            kind, namespace = review
            answer = reviews.answer(
                kind, namespace, method, body, user, self.authenticator, Authorizer(store)
            )
            reply(201, answer)
            return True
        local, served = self._local(store)
        if len(parts) >= 3 and (parts[1], parts[2]) in served:
            return False  # the common case, decided without reading the store
        if len(parts) == 1 and method == "GET":
            aggregated = api_groups(store, local)
            if not aggregated:
                return False
            listing = discovery.api_group_list(store.registry)
            reply(200, listing | {"groups": listing["groups"] + aggregated})
            return True
        if len(parts) == 2 and parts[1] in local:
            return False
        if len(parts) == 2:
            return self._group(reply, store, local, parts[1], method)
        service = claiming(store, parts[1], parts[2])
        if service is None:
            return False
        watch = (len(parts) > 3 and parts[3] == "watch") or _truthy(query.get("watch"))
        self.aggregator.proxy(handler, service, user, method, body, watch)
        return True

    def _local(self, store: Store) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
        """The groups and (group, version)s the store serves, computed once per registry."""
        registry = store.registry
        if self._served is None or self._served[0] is not registry:
            pairs = frozenset((rt.group, v) for rt in registry for v in rt.versions)
            self._served = (registry, frozenset(g for g, _ in pairs), pairs)
        return self._served[1], self._served[2]

    def _group(self, reply: Reply, store: Store, local: set[str], group: str, method: str) -> bool:
        found = [g for g in api_groups(store, local) if g["name"] == group]
        if not found:
            return False
        if method != "GET":
            raise errors.method_not_allowed(method, f"/apis/{group}")
        reply(200, found[0])
        return True

    def close(self) -> None:
        self.aggregator.close()


def _truthy(value: Any) -> bool:
    return isinstance(value, str) and value.lower() not in ("", "false", "0")
