"""API discovery: /api, /apis, /apis/<group>, /apis/<group>/<version>, and the aggregated
discovery document (apidiscovery.k8s.io/v2) kubectl asks for first.

The documents are built from the resources the servers installed, in installation order, and
rebuilt only when that set changes. Aggregated documents carry a quoted ETag and answer 304 to
a matching If-None-Match.

When the aggregator gives its registered groups (one entry per API group that has
APIServices, in kube-aggregator's order, local and remote alike), the legacy documents follow
them as kube-aggregator does: /apis lists the pinned groups (apiregistration.k8s.io) first,
then the registered groups in their order, then any served group no APIService names yet;
/apis/<group> of a registered group lists its APIServices' versions, preferred first.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.endpoints.negotiation import JSON
from gateway.registry.resource import ResourceDef
from gateway.storage.codec import dumps

AGGREGATED = "apidiscovery.k8s.io"
SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "finalize": ["update"],
                     "scale": ["get", "patch", "update"], "token": ["create"]}


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """kube's hash of the storage version, which clients compare to see a migration."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


@dataclass
class GroupVersions:
    """What one API group serves, by version, in the order installed."""

    name: str
    versions: dict[str, list[ResourceDef]] = field(default_factory=dict)

    @property
    def preferred(self) -> str:
        return next(iter(self.versions))

    def group_version(self, version: str) -> str:
        return f"{self.name}/{version}" if self.name else version


@dataclass(frozen=True)
class RegisteredGroup:
    """An API group as its APIServices describe it."""

    name: str
    #: Highest priority first: the first is the preferred version.
    versions: tuple[str, ...]
    #: The versions an extension apiserver serves (the others are served here).
    remote: frozenset[str] = frozenset()


def _resource_entries(resource: ResourceDef) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": resource.plural, "singularName": resource.singular,
        "namespaced": resource.namespaced, "kind": resource.kind,
        "verbs": sorted(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    entry["storageVersionHash"] = storage_version_hash(resource.group, resource.version,
                                                       resource.kind)
    entries = [entry]
    for sub in resource.subresources:
        entries.append({"name": f"{resource.plural}/{sub}", "singularName": "",
                        "namespaced": resource.namespaced, "kind": resource.kind,
                        "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])})
    return entries


def api_resource_list(group: GroupVersions, version: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": "APIResourceList"}
    if group.name:
        doc["apiVersion"] = "v1"
    doc["groupVersion"] = group.group_version(version)
    doc["resources"] = [e for r in group.versions[version] for e in _resource_entries(r)]
    return doc


def api_group(group: GroupVersions) -> dict[str, Any]:
    return _api_group(group.name, list(group.versions))


def _api_group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}" if name else v, "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(groups: Iterable[GroupVersions]) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [api_group(g) for g in groups if g.name]}


def api_versions(request: web.BaseRequest) -> dict[str, Any]:
    host = request.headers.get("Host") or f"{request.url.host}:{request.url.port}"
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}


def _aggregated_resource(resource: ResourceDef) -> dict[str, Any]:
    kind = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    entry: dict[str, Any] = {
        "resource": resource.plural, "responseKind": kind,
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular, "verbs": sorted(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    if resource.subresources:
        entry["subresources"] = [{"subresource": sub, "responseKind": kind,
                                  "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])}
                                 for sub in resource.subresources]
    return entry


def aggregated_list(groups: Iterable[GroupVersions], version: str) -> dict[str, Any]:
    items = []
    for group in groups:
        versions = [{"version": v, "resources": [_aggregated_resource(r) for r in resources],
                     "freshness": "Current"} for v, resources in group.versions.items()]
        items.append({"metadata": {"name": group.name, "creationTimestamp": None},
                      "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{AGGREGATED}/{version}",
            "metadata": {}, "items": items}


def _wants_aggregated(request: web.BaseRequest) -> str:
    """The aggregated discovery version the Accept header asks for first, or ""."""
    for part in request.headers.get("Accept", "").split(","):
        params = dict(p.strip().partition("=")[::2] for p in part.split(";")[1:])
        if params.get("g") == AGGREGATED and params.get("as") == "APIGroupDiscoveryList":
            if params.get("v") in ("v2", "v2beta1"):
                return params["v"]
        elif part.split(";")[0].strip() in (JSON, "*/*", "application/*"):
            return ""
    return ""


class Discovery:
    """Serves discovery for a set of API groups that can change (CRDs, APIServices)."""

    def __init__(self, groups: Callable[[], list[GroupVersions]],
                 registered: Callable[[], list[RegisteredGroup]] | None = None,
                 pinned: tuple[str, ...] = ()) -> None:
        self._groups = groups
        self._registered = registered
        self._pinned = pinned
        self._cache: dict[str, tuple[bytes, str]] = {}

    def invalidate(self) -> None:
        self._cache.clear()

    def _document(self, key: str, build: Callable[[], Any]) -> tuple[bytes, str]:
        cached = self._cache.get(key)
        if cached is None:
            body = dumps(build())
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            cached = self._cache[key] = (body, etag)
        return cached

    def _aggregated(self, request: web.BaseRequest, legacy: bool,
                    version: str) -> web.Response:
        groups = [g for g in self._groups() if (g.name == "") == legacy]
        body, etag = self._document(f"agg/{legacy}/{version}",
                                    lambda: aggregated_list(groups, version))
        headers = {"ETag": etag, "Vary": "Accept",
                   "Content-Type": f"{JSON};g={AGGREGATED};v={version};as=APIGroupDiscoveryList"}
        if etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers=headers)

    async def api(self, request: web.BaseRequest) -> web.StreamResponse:
        version = _wants_aggregated(request)
        if version:
            return self._aggregated(request, True, version)
        return _json(api_versions(request))

    async def apis(self, request: web.BaseRequest) -> web.StreamResponse:
        version = _wants_aggregated(request)
        if version:
            return self._aggregated(request, False, version)
        body, _ = self._document("apis", self._legacy_group_list)
        return web.Response(body=body, content_type=JSON, headers={"Vary": "Accept"})

    def _legacy_group_list(self) -> dict[str, Any]:
        if self._registered is None:
            return api_group_list(self._groups())
        local = {g.name: g for g in self._groups() if g.name}
        listed: dict[str, dict[str, Any]] = {}
        for name in self._pinned:
            if name in local:
                listed[name] = api_group(local[name])
        for registered in self._registered():
            if registered.name not in listed:
                listed[registered.name] = _api_group(registered.name, self._versions_of(
                    registered, local.get(registered.name)))
        for name, group in local.items():
            if name not in listed:
                listed[name] = api_group(group)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(listed.values())}

    @staticmethod
    def _versions_of(registered: RegisteredGroup, local: GroupVersions | None) -> list[str]:
        """The APIServices' versions in their order, then served versions none names."""
        versions = list(registered.versions)
        if local is not None:
            versions += [v for v in local.versions if v not in registered.versions]
        return versions

    def _registered_group(self, name: str) -> RegisteredGroup | None:
        if self._registered is None or not name or name in self._pinned:
            return None
        for registered in self._registered():
            if registered.name == name:
                return registered
        return None

    async def group_path(self, request: web.BaseRequest) -> web.StreamResponse:
        """/api/v1, /apis/<group> and /apis/<group>/<version>."""
        parts = request.path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            name, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) in (2, 3):
            name, version = parts[1], parts[2] if len(parts) == 3 else ""
        else:
            raise status.not_found()
        if not version:
            registered = self._registered_group(name)
            if registered is not None:
                local = next((g for g in self._groups() if g.name == name), None)
                doc = _api_group(name, self._versions_of(registered, local))
            else:
                doc = api_group(self._find(name))
            return _json({"kind": "APIGroup", "apiVersion": "v1", **doc})
        group = self._find(name)
        if version not in group.versions:
            raise status.not_found()
        body, _ = self._document(f"rl/{name}/{version}",
                                 lambda: api_resource_list(group, version))
        return web.Response(body=body, content_type=JSON)

    def _find(self, name: str) -> GroupVersions:
        for group in self._groups():
            if group.name == name:
                return group
        raise status.not_found()


def _json(obj: Any) -> web.Response:
    return web.Response(body=dumps(obj), content_type=JSON)
