"""The REST verbs of one resource, over its generic store (kube's endpoints/handlers).

``ResourceEndpoints`` is installed in a GenericAPIServer for (group, version, resource) and
dispatches on the verb the request-info filter found.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.endpoints import status
from gateway.endpoints.request import (
    body_media_type,
    decode_object,
    dry_run,
    int_param,
    read_body,
)
from gateway.registry.store import RESTStore
from gateway.server.requestinfo import RequestInfo
from gateway.storage.codec import dumps
from gateway.storage.interface import Preconditions

JSON = "application/json"


def json_response(obj: Any, code: int = 200) -> web.Response:
    return web.Response(status=code, body=dumps(obj), content_type=JSON)


class ResourceEndpoints:
    """Serves every verb on one resource."""

    def __init__(self, store: RESTStore) -> None:
        self.store = store
        self.resource = store.resource
        self._verbs = {
            "get": self.get,
            "list": self.list,
            "create": self.create,
            "update": self.update,
            "delete": self.delete,
        }

    async def __call__(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if info.subresource or (info.namespace and not self.resource.namespaced):
            raise status.not_found()
        handler = self._verbs.get(info.verb)
        if handler is None:
            raise status.method_not_allowed(info.verb, self.resource.plural, self.resource.group)
        return await handler(request, info)

    async def get(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        return json_response(await self.store.get(info.namespace, info.name))

    async def list(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        rv = request.query.get("resourceVersion", "")
        token = request.query.get("continue", "")
        if token and rv not in ("", "0"):
            raise status.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        limit = int_param(request, "limit")
        revision = _revision(rv)
        result = await self.store.list(
            info.namespace,
            limit=limit,
            continue_token=token,
            revision=revision,
            from_cache=rv == "0" and not token,
        )
        meta: dict[str, Any] = {"resourceVersion": str(result.revision)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        return json_response({
            "kind": self.resource.list_kind,
            "apiVersion": self.resource.api_version,
            "metadata": meta,
            "items": result.items,
        })

    async def _body(self, request: web.BaseRequest) -> dict[str, Any]:
        body = await read_body(request)
        return decode_object(body, body_media_type(request))

    async def create(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if info.name:
            raise status.method_not_allowed("create", self.resource.plural, self.resource.group)
        obj = await self._body(request)
        created = await self.store.create(info.namespace, obj, dry_run=dry_run(request))
        return json_response(created, 201)

    async def update(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        obj = await self._body(request)
        updated, created = await self.store.update(
            info.namespace, info.name, obj, dry_run=dry_run(request)
        )
        return json_response(updated, 201 if created else 200)

    async def delete(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        preconditions = None
        if request.can_read_body:
            options = await self._body(request)
            given = options.get("preconditions") or {}
            if given:
                preconditions = Preconditions(
                    uid=given.get("uid"), resource_version=given.get("resourceVersion")
                )
        deleted = await self.store.delete(
            info.namespace, info.name, preconditions=preconditions, dry_run=dry_run(request)
        )
        details = {"name": info.name, "kind": self.resource.plural,
                   "uid": deleted.get("metadata", {}).get("uid", "")}
        if self.resource.group:
            details["group"] = self.resource.group
        return json_response({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Success", "details": details,
        })


def _revision(rv: str) -> int:
    if rv in ("", "0"):
        return 0
    try:
        revision = int(rv)
    except ValueError:
        raise status.bad_request(f"invalid resource version {rv!r}") from None
    if revision < 0:
        raise status.bad_request(f"invalid resource version {rv!r}")
    return revision
