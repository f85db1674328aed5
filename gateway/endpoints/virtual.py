"""Create-only resources that are computed, not stored (TokenReview, access reviews...).

The body is read and checked like any other (JSON, YAML or protobuf; kind and apiVersion;
fields against the schema); the resource computes its status; the answer is 201 Created.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.objects import drop_nulls
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.endpoints.negotiation import negotiate, respond
from gateway.endpoints.request import body_media_type, decode_object, read_body
from gateway.registry.resource import ResourceDef
from gateway.schema.walk import check

Compute = Callable[[web.BaseRequest, RequestInfo, dict[str, Any]], Awaitable[dict[str, Any]]]


async def read_typed_body(request: web.BaseRequest, kind: str, api_version: str,
                          schema: dict) -> dict[str, Any]:
    """A request body that must be of ``kind``; fields checked against ``schema``."""
    obj = decode_object(await read_body(request), body_media_type(request), kind)
    if obj.get("kind", kind) != kind or obj.get("apiVersion", api_version) != api_version:
        raise status.bad_request(f"the body must be a {api_version} {kind}, not "
                                 f"{obj.get('apiVersion')} {obj.get('kind')}")
    result = check(obj, schema)
    if result.errors:
        raise status.bad_request(f'{kind} in version "{api_version.rpartition("/")[2]}" '
                                 f"cannot be handled as a {kind}: {'; '.join(result.errors)}")
    if result.unknown and request.query.get("fieldValidation") == "Strict":
        raise status.bad_request("strict decoding error: " + ", ".join(
            f'unknown field "{path}"' for path in result.unknown))
    obj["kind"], obj["apiVersion"] = kind, api_version
    drop_nulls(obj)
    obj.setdefault("metadata", {})
    return obj


class CreateOnlyEndpoints:
    """Serves POST of one computed resource."""

    def __init__(self, resource: ResourceDef, compute: Compute) -> None:
        self.resource = resource
        self.compute = compute

    async def __call__(self, request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if info.verb != "create" or info.name or info.subresource:
            raise status.method_not_allowed(info.verb, self.resource.plural, self.resource.group)
        media = negotiate(request, protobuf=True)
        obj = await read_typed_body(request, self.resource.kind, self.resource.api_version,
                                    self.resource.schema_ref)
        if self.resource.namespaced:
            meta = obj["metadata"]
            if meta.get("namespace") and meta["namespace"] != info.namespace:
                raise status.bad_request("the namespace of the provided object does not "
                                         "match the namespace sent on the request")
            meta["namespace"] = info.namespace
        return respond(await self.compute(request, info, obj), media, 201)
