"""List pages and watch streams of one resource as plain dicts, through ``ApiClient``.

One generic path for every kind (built-in or CRD): the typed APIs would turn objects into
models, and the snapshot builder reads dicts, as ``kubectl get -o json`` prints them.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from reconciler.resources import Resource

JSON = {"Accept": "application/json"}


class ResourceClient:
    def __init__(self, api_client: ApiClient, resource: Resource, request_timeout: float = 30.0):
        self.api_client = api_client
        self.resource = resource
        self.request_timeout = request_timeout

    def _get(self, version: str, query: list[tuple[str, Any]], timeout: Any) -> Any:
        """The raw urllib3 response of a GET; ApiException on a status outside 2xx."""
        method, url, headers, body, post = self.api_client.param_serialize(
            "GET",
            self.resource.path(version),
            query_params=query,
            header_params=dict(JSON),
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(
            method, url, headers, body, post, _request_timeout=timeout
        )
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response

    def list_page(
        self,
        version: str,
        limit: int,
        continue_token: str = "",
        *,
        resource_version: str = "",
        match: str = "",
    ) -> dict[str, Any]:
        """One page of the list across all namespaces; items carry apiVersion and kind (a
        real server leaves them out of the items of built-in kinds). Without
        ``resource_version``, the most recent state (a consistent read)."""
        query: list[tuple[str, Any]] = []
        if limit:
            query.append(("limit", limit))
        if continue_token:
            query.append(("continue", continue_token))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if match:
            query.append(("resourceVersionMatch", match))
        response = self._get(version, query, self.request_timeout)
        data = json.loads(response.read())
        if not isinstance(data, dict) or not isinstance(data.get("items", []), list):
            raise ValueError(f"{self.resource.path(version)}: the answer is not a list")
        api_version = self.resource.api_version(version)
        for item in data.get("items") or []:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", self.resource.kind)
        return data

    def watch_function(self, version: str) -> Any:
        """A function for ``kubernetes.watch.Watch.stream``: it takes the watch keyword
        arguments of the generated list functions and returns the streaming response."""

        def watch(
            *,
            watch: bool = True,
            resource_version: str | None = None,
            allow_watch_bookmarks: bool = True,
            timeout_seconds: int = 60,
            _preload_content: bool = False,
            _request_timeout: Any = None,
        ) -> Any:
            query: list[tuple[str, Any]] = [("watch", "true" if watch else "false")]
            if resource_version:
                query.append(("resourceVersion", resource_version))
            if allow_watch_bookmarks:
                query.append(("allowWatchBookmarks", "true"))
            query.append(("timeoutSeconds", timeout_seconds))
            # a connection that goes silent (no bookmark, no event) past the server's own
            # timeout is dead: the read timeout ends it
            timeout = _request_timeout or (self.request_timeout, timeout_seconds + 10)
            return self._get(version, query, timeout).response

        return watch
