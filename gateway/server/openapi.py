"""/openapi/v2 and /openapi/v3: the API described from the served resources and their schemas.

Definitions keep kube's names (io.k8s.api.core.v1.ConfigMap) and x-kubernetes-group-version-kind,
so ``kubectl explain``, ``kubectl apply`` and ``--validate=strict`` find what they look for.
/openapi/v3 is an index of one document per group version, each at a URL with ``?hash=``;
requested with its current hash a document is cacheable for good, with an old hash it redirects.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.registry.resource import ResourceDef
from gateway.schema.dsl import DEFINITIONS, META
from gateway.storage.codec import dumps
from gateway.version import git_version

JSON = "application/json"
SHARED = (f"{META}.Status", f"{META}.DeleteOptions", f"{META}.WatchEvent", f"{META}.Patch")
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")
DEFINITIONS.setdefault(f"{META}.Patch", {
    "type": "object", "description": "A patch body; its media type says how it applies."})


# -- schemas -----------------------------------------------------------------------------------


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        if "$ref" in node and node["$ref"] not in out:
            out.add(node["$ref"])
            _refs(DEFINITIONS.get(node["$ref"]), out)
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def reachable(roots: list[str]) -> list[str]:
    names: set[str] = set()
    for root in roots:
        _refs({"$ref": root}, names)
    return sorted(n for n in names if n in DEFINITIONS)


def _render(node: Any, prefix: str, v3: bool) -> Any:
    """A schema with bare $refs turned into document refs (v3: allOf when described)."""
    if isinstance(node, list):
        return [_render(v, prefix, v3) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = {"$ref": prefix + node["$ref"]}
        rest = {k: _render(v, prefix, v3) for k, v in node.items() if k != "$ref"}
        if not rest:
            return ref
        return {"allOf": [ref], **rest} if v3 else {**ref, **rest}
    return {k: _render(v, prefix, v3) for k, v in node.items()}


# -- operations --------------------------------------------------------------------------------


def _group_word(resource: ResourceDef) -> str:
    name = resource.group.split(".")[0] if resource.group else "core"
    return name[:1].upper() + name[1:] + resource.version[:1].upper() + resource.version[1:]


def _param(name: str, where: str, v3: bool, *, required: bool = False,
           kind: str = "string") -> dict[str, Any]:
    param: dict[str, Any] = {"name": name, "in": where}
    if required:
        param["required"] = True
    if v3:
        param["schema"] = {"type": kind, "uniqueItems": True}
    else:
        param.update(type=kind, uniqueItems=True)
    return param


WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
LIST_PARAMS = (("allowWatchBookmarks", "boolean"), ("continue", "string"),
               ("fieldSelector", "string"), ("labelSelector", "string"), ("limit", "integer"),
               ("resourceVersion", "string"), ("resourceVersionMatch", "string"),
               ("sendInitialEvents", "boolean"), ("timeoutSeconds", "integer"),
               ("watch", "boolean"))


def _operation(resource: ResourceDef, action: str, verb_id: str, response: str, v3: bool, *,
               query: tuple = (), body: str | None = None, patch: bool = False,
               namespaced: bool) -> dict[str, Any]:
    ns_word = "Namespaced" if namespaced else ""
    op: dict[str, Any] = {
        "operationId": f"{verb_id}{_group_word(resource)}{ns_word}{resource.kind}",
        "parameters": [_param(name, "query", v3, kind=kind) for name, kind in query],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": resource.group, "kind": resource.kind,
                                            "version": resource.version},
        "tags": [_group_word(resource)],
    }
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    if v3:
        op["responses"] = {"200": {"description": "OK", "content": {
            JSON: {"schema": {"$ref": ref + response}}}}}
        if body is not None:
            types = PATCH_TYPES if patch else ("*/*",)
            op["requestBody"] = {"required": True, "content": {
                t: {"schema": {"$ref": ref + body}} for t in types}}
    else:
        op["responses"] = {"200": {"description": "OK", "schema": {"$ref": ref + response}}}
        op["produces"] = [JSON, "application/yaml"]
        if body is not None:
            op["parameters"].append({"name": "body", "in": "body", "required": True,
                                     "schema": {"$ref": ref + body}})
            if patch:
                op["consumes"] = list(PATCH_TYPES)
    return op


def resource_paths(resource: ResourceDef, v3: bool) -> dict[str, Any]:
    """The paths and operations of one resource, as kube publishes them."""
    base = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    ns = resource.namespaced
    collection = f"{base}/namespaces/{{namespace}}/{resource.plural}" if ns else \
        f"{base}/{resource.plural}"
    item = collection + "/{name}"
    kind, list_kind = resource.schema, resource.schema + "List"
    status_ref = f"{META}.Status"
    write = tuple((p, "string") for p in WRITE_PARAMS)
    path_params = [_param("namespace", "path", v3, required=True)] if ns else []
    paths = {
        collection: {
            "get": _operation(resource, "list", "list", list_kind, v3, query=LIST_PARAMS,
                              namespaced=ns),
            "post": _operation(resource, "post", "create", kind, v3, query=write, body=kind,
                               namespaced=ns),
            "delete": _operation(resource, "deletecollection", "deleteCollection", status_ref,
                                 v3, query=LIST_PARAMS + write, namespaced=ns),
            "parameters": path_params,
        },
        item: {
            "get": _operation(resource, "get", "read", kind, v3, namespaced=ns),
            "put": _operation(resource, "put", "replace", kind, v3, query=write, body=kind,
                              namespaced=ns),
            "patch": _operation(resource, "patch", "patch", kind, v3,
                                query=(*write, ("force", "boolean")), body=f"{META}.Patch",
                                patch=True, namespaced=ns),
            "delete": _operation(resource, "delete", "delete", status_ref, v3, query=(
                ("dryRun", "string"), ("gracePeriodSeconds", "integer"),
                ("propagationPolicy", "string")), body=f"{META}.DeleteOptions",
                namespaced=ns),
            "parameters": [_param("name", "path", v3, required=True), *path_params],
        },
    }
    if ns:
        paths[f"{base}/{resource.plural}"] = {
            "get": _operation(resource, "list", "list", list_kind, v3, query=LIST_PARAMS,
                              namespaced=False) | {
                "operationId": f"list{_group_word(resource)}{resource.kind}ForAllNamespaces"},
        }
    for sub in resource.subresources:
        if sub != "status":
            continue
        paths[f"{item}/status"] = {
            "get": _operation(resource, "get", "read", kind, v3, namespaced=ns)
            | {"operationId": f"read{_group_word(resource)}{'Namespaced' if ns else ''}"
               f"{resource.kind}Status"},
            "put": _operation(resource, "put", "replace", kind, v3, query=write, body=kind,
                              namespaced=ns)
            | {"operationId": f"replace{_group_word(resource)}{'Namespaced' if ns else ''}"
               f"{resource.kind}Status"},
            "patch": _operation(resource, "patch", "patch", kind, v3,
                                query=(*write, ("force", "boolean")), body=f"{META}.Patch",
                                patch=True, namespaced=ns)
            | {"operationId": f"patch{_group_word(resource)}{'Namespaced' if ns else ''}"
               f"{resource.kind}Status"},
            "parameters": [_param("name", "path", v3, required=True), *path_params],
        }
    return paths


# -- documents --------------------------------------------------------------------------------


def _info() -> dict[str, str]:
    return {"title": "Kubernetes", "version": git_version()}


def v2_document(resources: list[ResourceDef]) -> dict[str, Any]:
    served = [r for r in resources if r.schema]
    names = reachable([r.schema for r in served] + [r.schema + "List" for r in served]
                      + list(SHARED))
    paths: dict[str, Any] = {}
    for resource in served:
        paths.update(resource_paths(resource, v3=False))
    return {"swagger": "2.0", "info": _info(), "paths": paths,
            "definitions": {n: _render(DEFINITIONS[n], "#/definitions/", False) for n in names}}


def v3_document(resources: list[ResourceDef]) -> dict[str, Any]:
    served = [r for r in resources if r.schema]
    names = reachable([r.schema for r in served] + [r.schema + "List" for r in served]
                      + list(SHARED))
    paths: dict[str, Any] = {}
    for resource in served:
        paths.update(resource_paths(resource, v3=True))
    schemas = {n: _render(copy.deepcopy(DEFINITIONS[n]), "#/components/schemas/", True)
               for n in names}
    return {"openapi": "3.0.0", "info": _info(), "paths": paths,
            "components": {"schemas": schemas}}


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


class OpenAPI:
    """Serves the OpenAPI documents; rebuilt when the served resources change."""

    def __init__(self, resources: Callable[[], list[ResourceDef]]) -> None:
        self._resources = resources
        self._cache: dict[str, tuple[bytes, str]] = {}

    def invalidate(self) -> None:
        self._cache.clear()

    def _by_group_version(self) -> dict[str, list[ResourceDef]]:
        out: dict[str, list[ResourceDef]] = {}
        for resource in self._resources():
            out.setdefault(gv_path(resource.group, resource.version), []).append(resource)
        return out

    def _document(self, key: str, build: Callable[[], Any]) -> tuple[bytes, str]:
        cached = self._cache.get(key)
        if cached is None:
            body = dumps(build())
            cached = self._cache[key] = (body, hashlib.sha512(body).hexdigest()[:64].upper())
        return cached

    async def v2(self, request: web.BaseRequest) -> web.StreamResponse:
        body, digest = self._document("v2", lambda: v2_document(self._resources()))
        return _cacheable(request, body, digest, immutable=False)

    async def v3_index(self, request: web.BaseRequest) -> web.StreamResponse:
        groups = self._by_group_version()
        paths = {}
        for gv, resources in groups.items():
            _, digest = self._document(f"v3/{gv}", lambda r=resources: v3_document(r))
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
        return web.Response(body=dumps({"paths": paths}), content_type=JSON)

    async def v3_group_version(self, request: web.BaseRequest) -> web.StreamResponse:
        gv = request.path[len("/openapi/v3/"):].strip("/")
        resources = self._by_group_version().get(gv)
        if resources is None:
            raise status.not_found()
        body, digest = self._document(f"v3/{gv}", lambda: v3_document(resources))
        wanted = request.query.get("hash")
        if wanted is not None and wanted != digest:
            return web.Response(status=301, headers={
                "Location": f"/openapi/v3/{gv}?hash={digest}"})
        return _cacheable(request, body, digest, immutable=wanted is not None)


def _cacheable(request: web.BaseRequest, body: bytes, digest: str, *,
               immutable: bool) -> web.Response:
    etag = f'"{digest}"'
    headers = {"ETag": etag, "Vary": "Accept",
               "Cache-Control": "public, immutable" if immutable else "no-cache, private"}
    if immutable:
        headers["Expires"] = "Thu, 31 Dec 2099 23:59:59 GMT"
    if etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type=JSON, headers=headers)
