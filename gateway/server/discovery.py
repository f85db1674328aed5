"""API discovery: /api, /apis, /apis/<group>, /apis/<group>/<version>, and the aggregated
discovery document (apidiscovery.k8s.io/v2) kubectl asks for first.

The legacy documents are built from the resources the servers installed, in installation
order, and rebuilt only when that set changes.

The aggregated documents are a merge of per group version documents kept by a
``DiscoveryStore``, fed by sources: the gateway's own servers (pulled), each backend of a
remote APIService (pushed by gateway.aggregator.discovery), CRDs next. Each group version has
a group priority (groupPriorityMinimum) and a version priority (versionPriority), those of
its APIService, and a freshness (``Current``, or ``Stale`` when its backend could not be asked
and the resources are the last ones known). Groups come by highest group priority, then name
(apiregistration.k8s.io pinned first); versions by version priority, then kube's version
order. Aggregated documents carry a quoted ETag (a hash of the body, so a backend's change
makes a new one) and answer 304 to a matching If-None-Match.

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
from gateway.apimachinery.versions import version_rank
from gateway.endpoints.negotiation import JSON
from gateway.registry.resource import SUBRESOURCES, ResourceDef
from gateway.storage.codec import dumps

AGGREGATED = "apidiscovery.k8s.io"
def _verbs(sub: str) -> list[str]:
    known = SUBRESOURCES.get(sub)
    return list(known.verbs) if known is not None else ["get"]


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
    entry["storageVersionHash"] = storage_version_hash(
        resource.group, resource.storage_version or resource.version, resource.kind)
    entries = [entry]
    for sub in resource.subresources:
        group, version, kind = resource.subresource_kind(sub)
        listed: dict[str, Any] = {"name": f"{resource.plural}/{sub}", "singularName": "",
                                  "namespaced": resource.namespaced}
        if (group, version) != (resource.group, resource.version):
            listed.update(group=group, version=version)
        entries.append({**listed, "kind": kind, "verbs": _verbs(sub)})
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
        entry["subresources"] = [{"subresource": sub, "responseKind": dict(zip(
            ("group", "version", "kind"), resource.subresource_kind(sub), strict=True)),
            "verbs": _verbs(sub)} for sub in resource.subresources]
    return entry


EMPTY_KIND: dict[str, str] = {"group": "", "version": "", "kind": ""}


def aggregated_list(groups: Iterable[tuple[str, list[VersionDocument]]],
                    version: str) -> dict[str, Any]:
    """The ``APIGroupDiscoveryList`` of merged groups (see ``DiscoveryStore.merged``)."""
    items = [{"metadata": {"name": name, "creationTimestamp": None},
              "versions": [document.entry() for document in documents]}
             for name, documents in groups]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{AGGREGATED}/{version}",
            "metadata": {}, "items": items}


# -- the aggregated discovery store ------------------------------------------------------------

#: A version entry's freshness (apidiscovery v2 DiscoveryFreshness).
CURRENT = "Current"
STALE = "Stale"
#: Priorities of a group version no APIService gives any (kube's defaults).
DEFAULT_GROUP_PRIORITY = 1000
DEFAULT_VERSION_PRIORITY = 15
#: The group priority of a pinned group (apiregistration.k8s.io), above every other.
PINNED_GROUP_PRIORITY = 20001
#: Source ranks: where two sources give the same group version, the lower rank wins (kube's
#: Aggregator 0 < Builtin 100 < CRD 200).
AGGREGATOR_SOURCE = 0
BUILTIN_SOURCE = 100
CRD_SOURCE = 200

@dataclass(frozen=True)
class VersionDocument:
    """What discovery says about one group version: its resources (apidiscovery v2
    ``APIResourceDiscovery`` objects, as JSON), their freshness, and the priorities that place
    it (None: its APIService's, else kube's defaults)."""

    group: str
    version: str
    resources: tuple[dict[str, Any], ...] = ()
    freshness: str = CURRENT
    group_priority: int | None = None
    version_priority: int | None = None

    def entry(self) -> dict[str, Any]:
        """The ``APIVersionDiscovery`` (resources omitted when there are none, as Go's
        omitempty)."""
        entry: dict[str, Any] = {"version": self.version}
        if self.resources:
            entry["resources"] = list(self.resources)
        entry["freshness"] = self.freshness
        return entry


@dataclass(frozen=True)
class _Placed:
    document: VersionDocument
    group_priority: int
    version_priority: int


#: Gives (groupPriorityMinimum, versionPriority) of a group version, None when unknown.
Priorities = Callable[[str, str], "tuple[int, int] | None"]


class DiscoveryStore:
    """The group versions aggregated discovery lists, kept per source and merged on demand.

    A source is either pulled (a callable giving its documents, asked again after
    ``invalidate``: the gateway's own servers, whose groups change only with CRDs) or pushed
    (``put``/``remove``: the documents fetched from backends). Where sources overlap on a group
    version, the one of lowest rank wins. ``merged`` orders them as kube's aggregated
    discovery handler does: groups by their highest group priority (then name), versions by
    version priority (then kube's version order). Listeners are told after every change.
    """

    def __init__(self, priorities: Priorities | None = None,
                 pinned: tuple[str, ...] = ()) -> None:
        self._priorities = priorities or (lambda group, version: None)
        self._pinned = set(pinned)
        self._ranks: dict[str, int] = {}
        self._pulled: dict[str, Callable[[], Iterable[VersionDocument]]] = {}
        self._pushed: dict[str, dict[tuple[str, str], VersionDocument]] = {}
        self._merged: list[tuple[str, list[_Placed]]] | None = None
        self._listeners: list[Callable[[], None]] = []

    def add_source(self, name: str, rank: int,
                   documents: Callable[[], Iterable[VersionDocument]] | None = None) -> None:
        """A source, pulled from ``documents`` or, without it, pushed to."""
        self._ranks[name] = rank
        if documents is not None:
            self._pulled[name] = documents
        else:
            self._pushed.setdefault(name, {})
        self.invalidate()

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def invalidate(self) -> None:
        """Merge again on the next read (a pulled source or the priorities changed)."""
        self._merged = None
        for listener in self._listeners:
            listener()

    def get(self, source: str, group: str, version: str) -> VersionDocument | None:
        return self._pushed[source].get((group, version))

    def put(self, source: str, document: VersionDocument) -> None:
        documents = self._pushed[source]
        key = (document.group, document.version)
        if documents.get(key) != document:
            documents[key] = document
            self.invalidate()

    def remove(self, source: str, group: str, version: str) -> None:
        if self._pushed[source].pop((group, version), None) is not None:
            self.invalidate()

    # -- merging ------------------------------------------------------------------------------

    def merged(self) -> list[tuple[str, list[VersionDocument]]]:
        """Every group with its versions, in kube's aggregated discovery order."""
        if self._merged is None:
            self._merged = self._merge()
        return [(name, [p.document for p in placed]) for name, placed in self._merged]

    def _merge(self) -> list[tuple[str, list[_Placed]]]:
        chosen: dict[tuple[str, str], tuple[int, VersionDocument]] = {}
        for name in sorted(self._ranks, key=lambda n: self._ranks[n]):
            pulled = self._pulled.get(name)
            documents = pulled() if pulled is not None else self._pushed[name].values()
            for document in documents:
                chosen.setdefault((document.group, document.version),
                                  (self._ranks[name], document))
        groups: dict[str, list[_Placed]] = {}
        for _, document in chosen.values():
            groups.setdefault(document.group, []).append(self._placed(document))
        for placed in groups.values():
            placed.sort(key=lambda p: (-p.version_priority, version_rank(p.document.version)))
        return sorted(groups.items(),
                      key=lambda item: (-max(p.group_priority for p in item[1]), item[0]))

    def _placed(self, document: VersionDocument) -> _Placed:
        known = self._priorities(document.group, document.version)
        group_priority, version_priority = known or (DEFAULT_GROUP_PRIORITY,
                                                     DEFAULT_VERSION_PRIORITY)
        if document.group_priority is not None:
            group_priority = document.group_priority
        if document.version_priority is not None:
            version_priority = document.version_priority
        if document.group in self._pinned:
            group_priority = PINNED_GROUP_PRIORITY
        return _Placed(document, group_priority, version_priority)


def local_documents(groups: Iterable[GroupVersions]) -> list[VersionDocument]:
    """The documents of groups the gateway serves itself."""
    return [VersionDocument(group.name, version,
                            tuple(_aggregated_resource(r) for r in resources))
            for group in groups for version, resources in group.versions.items()]


def resources_from_legacy(resource_list: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """An ``APIResourceList``'s resources as aggregated discovery lists them (kube's
    ConvertGroupVersionIntoToDiscovery): subresources ("<resource>/<sub>") go under their
    resource, one made up for a subresource without one."""
    resources: dict[str, dict[str, Any]] = {}
    listed = [r for r in resource_list.get("resources") or [] if isinstance(r, dict)]
    for item in listed:
        name = item.get("name", "")
        if "/" in name:
            continue
        entry: dict[str, Any] = {
            "resource": name,
            "responseKind": {"group": item.get("group", ""), "version": item.get("version", ""),
                             "kind": item.get("kind", "")},
            "scope": "Namespaced" if item.get("namespaced") else "Cluster",
            "singularResource": item.get("singularName", ""),
            "verbs": list(item.get("verbs") or []),
        }
        if item.get("shortNames"):
            entry["shortNames"] = list(item["shortNames"])
        if item.get("categories"):
            entry["categories"] = list(item["categories"])
        resources[name] = entry
    for item in listed:
        parent, slash, sub = item.get("name", "").partition("/")
        if not slash:
            continue
        scope = "Namespaced" if item.get("namespaced") else "Cluster"
        entry = resources.setdefault(parent, {"resource": parent, "responseKind": EMPTY_KIND,
                                              "scope": scope, "singularResource": "",
                                              "verbs": []})
        if entry["scope"] != scope:
            raise ValueError(f"Error: Parent {parent} (scope: {entry['scope']}) and "
                             f"subresource {sub} (scope: {scope}) scope do not match")
        kind = EMPTY_KIND if not item.get("kind") else {
            "group": item.get("group", ""), "version": item.get("version", ""),
            "kind": item["kind"]}
        entry.setdefault("subresources", []).append(
            {"subresource": sub, "responseKind": kind, "verbs": list(item.get("verbs") or [])})
    return tuple(resources.values())


def resources_from_aggregated(version: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """A backend's ``APIVersionDiscovery`` resources, a missing responseKind made an empty one
    (as kube does, so that older clients do not trip on it)."""
    out = []
    for resource in version.get("resources") or []:
        if not isinstance(resource, dict):
            continue
        resource = dict(resource)
        if not resource.get("responseKind"):
            resource["responseKind"] = EMPTY_KIND
        if resource.get("subresources"):
            resource["subresources"] = [
                {**sub, "responseKind": sub.get("responseKind") or EMPTY_KIND}
                for sub in resource["subresources"] if isinstance(sub, dict)]
        out.append(resource)
    return tuple(out)


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
    """Serves discovery for a set of API groups that can change (CRDs, APIServices).

    The aggregated documents come from ``store``: the gateway's own groups are its built-in
    source (placed by ``priorities``, their APIServices'), and other sources (backends, CRDs)
    add theirs; any change there makes a new document and ETag.
    """

    LOCAL_SOURCE = "local"

    def __init__(self, groups: Callable[[], list[GroupVersions]],
                 registered: Callable[[], list[RegisteredGroup]] | None = None,
                 pinned: tuple[str, ...] = (), priorities: Priorities | None = None) -> None:
        self._groups = groups
        self._registered = registered
        self._pinned = pinned
        self._cache: dict[str, tuple[bytes, str]] = {}
        self.store = DiscoveryStore(priorities, pinned)
        self.store.on_change(self._cache.clear)
        self.store.add_source(self.LOCAL_SOURCE, BUILTIN_SOURCE,
                              lambda: local_documents(self._groups()))

    def invalidate(self) -> None:
        """The served groups or the APIServices changed."""
        self.store.invalidate()  # clears the documents too

    def _document(self, key: str, build: Callable[[], Any]) -> tuple[bytes, str]:
        cached = self._cache.get(key)
        if cached is None:
            body = dumps(build())
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            cached = self._cache[key] = (body, etag)
        return cached

    def _aggregated(self, request: web.BaseRequest, legacy: bool,
                    version: str) -> web.Response:
        body, etag = self._document(f"agg/{legacy}/{version}", lambda: aggregated_list(
            [(name, documents) for name, documents in self.store.merged()
             if (name == "") == legacy], version))
        headers = {"ETag": etag, "Vary": "Accept", "Cache-Control": "public",
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
