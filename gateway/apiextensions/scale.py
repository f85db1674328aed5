"""The scale subresource of a custom resource: the object seen as an autoscaling/v1 Scale
through the CRD version's ``specReplicasPath``, ``statusReplicasPath`` and
``labelSelectorPath`` (what ``kubectl scale`` and autoscalers use).

GET answers the Scale; PUT takes a Scale; PATCH (JSON or merge patch) is applied to the Scale.
A write changes only the spec replicas of the object, through the generic store (so the
CRD's schema and rules still judge the result); a Scale that carries a resourceVersion is a
precondition, one without writes unconditionally, as kube's scale update does.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.apiextensions.scaleview import ScaleView
from gateway.apimachinery import status
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.endpoints import patch as patches
from gateway.endpoints.handlers import ResourceEndpoints
from gateway.endpoints.negotiation import MediaType, negotiate, respond
from gateway.endpoints.request import body_media_type, decode_object, read_body
from gateway.storage.codec import loads

Object = dict[str, Any]


class ScaleEndpoints:
    """GET, PUT and PATCH of ``<resource>/<name>/scale``."""

    def __init__(self, endpoints: ResourceEndpoints, paths: Object) -> None:
        self.endpoints = endpoints
        self.store = endpoints.store
        self.view = ScaleView(paths)

    def scale_of(self, obj: Object) -> Object:
        return self.view.view(obj)

    async def __call__(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        media = negotiate(request, protobuf=True)  # autoscaling/v1 Scale is built in
        if info.verb == "get":
            obj = await self.store.get(info.namespace, info.name)
            return respond(self.scale_of(obj), media)
        if info.verb == "update":
            scale = decode_object(await read_body(request), body_media_type(request), "Scale")
            return await self._write(request, info, media, lambda _: scale)
        if info.verb == "patch":
            return await self._patch(request, info, media)
        raise status.method_not_allowed(info.verb, f"{self.store.resource.plural}/scale",
                                        self.store.resource.group)

    async def _patch(self, request: web.BaseRequest, info: RequestInfo,
                     media: MediaType) -> web.StreamResponse:
        patch_type = body_media_type(request)
        if patch_type not in (patches.JSON_PATCH, patches.MERGE_PATCH):
            raise status.unsupported_media_type((patches.JSON_PATCH, patches.MERGE_PATCH))
        try:
            document = loads(await read_body(request))
        except ValueError as err:
            raise status.bad_request(f"error decoding patch: {err}") from None

        def patched(scale: Object) -> Object:
            if patch_type == patches.JSON_PATCH:
                return patches.apply_json_patch(scale, document)
            if not isinstance(document, dict):
                raise status.bad_request("a merge patch must be a JSON object")
            return patches.merge_patch(scale, document)

        return await self._write(request, info, media, patched)

    async def _write(self, request: web.BaseRequest, info: RequestInfo, media: MediaType,
                     make_scale: Any) -> web.StreamResponse:
        options = self.endpoints.write_options(request, info, "UpdateOptions")

        def mutate(current: Object | None) -> Object:
            if current is None:
                raise status.not_found(self.store.resource.plural, info.name,
                                       self.store.resource.group)
            scale = make_scale(self.scale_of(current))
            new = self.view.apply(scale, current)
            wanted = (scale.get("metadata") or {}).get("resourceVersion")
            new["metadata"]["resourceVersion"] = wanted or current["metadata"].get(
                "resourceVersion")
            return new

        obj, _ = await self.store.patch(info.namespace, info.name, mutate, options)
        return respond(self.scale_of(obj), media)

