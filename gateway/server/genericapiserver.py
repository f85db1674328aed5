"""One server of the delegation chain: it serves its own paths and hands on the rest.

kube-apiserver chains three servers (aggregator -> kube core -> apiextensions) and ends in a
404 handler; each is a generic apiserver with its own API groups and non-resource paths. Here a
GenericAPIServer routes by dictionary lookups on the already-parsed request info: an exact path
for non-resource requests, (group, version, resource) for resource requests. Anything it does
not know goes to its delegate unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import REQUEST_INFO
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.endpoints.negotiation import status_response
from gateway.registry.resource import ResourceDef
from gateway.server.discovery import GroupVersions

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
ResourceHandler = Callable[[web.BaseRequest, RequestInfo], Awaitable[web.StreamResponse]]

async def not_found_handler(request: web.BaseRequest) -> web.StreamResponse:
    """The end of the chain: nobody serves this path. Negotiated, as kube's router answers an
    unknown route (protobuf for a client that asks for it first)."""
    return status_response(request.headers, status.not_found())


def not_found_until_installed(installed: Callable[[], bool]) -> Handler:
    """The end of the chain while routes are still being installed at start (APIServices
    registered, later CRDs): a path nobody serves yet may be served in a moment, so 503 with
    Retry-After, as kube's not-found handler answers before its mux is complete; 404 after."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if not installed():
            return status_response(request.headers, status.paths_not_installed())
        return await not_found_handler(request)

    return handle


class GenericAPIServer:
    """A named server with its own routes and a delegate for everything else."""

    def __init__(self, name: str, delegate: Handler = not_found_handler) -> None:
        self.name = name
        self.delegate = delegate
        self.paths: dict[str, Handler] = {}
        self.prefixes: list[tuple[str, Handler]] = []
        self.resources: dict[tuple[str, str, str], ResourceHandler] = {}
        #: What this server serves, for discovery and OpenAPI, in installation order.
        self.groups: dict[str, GroupVersions] = {}
        self._listeners: list[Callable[[], None]] = []

    def add_paths(self, routes: dict[str, Handler]) -> None:
        """Serve each non-resource path exactly (no prefix matching)."""
        self.paths.update(routes)

    def add_prefix(self, prefix: str, handler: Handler) -> None:
        """Serve every non-resource path under ``prefix`` (few: tried after exact paths)."""
        self.prefixes.append((prefix, handler))

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every change of what this server serves (``install_api``,
        ``uninstall_api``): discovery, OpenAPI and the APIService registration follow."""
        self._listeners.append(callback)

    def _changed(self) -> None:
        for callback in self._listeners:
            callback()

    def install_api(self, resource: ResourceDef, handler: ResourceHandler) -> None:
        """Serve ``resource`` and list it in discovery; installed again, it replaces the
        entry of the same (group, version, plural) in place."""
        self.install_resource(resource.group, resource.version, resource.plural, handler)
        group = self.groups.setdefault(resource.group, GroupVersions(resource.group))
        listed = group.versions.setdefault(resource.version, [])
        for index, known in enumerate(listed):
            if known.plural == resource.plural:
                listed[index] = resource
                break
        else:
            listed.append(resource)
        self._changed()

    def uninstall_api(self, resource: ResourceDef) -> None:
        """Stop serving ``resource`` and take it out of discovery (see ``uninstall_resource``)."""
        self.uninstall_resource(resource.group, resource.version, resource.plural)

    @property
    def api_resources(self) -> list[ResourceDef]:
        return [r for g in self.groups.values() for rs in g.versions.values() for r in rs]

    def install_resource(
        self, group: str, version: str, resource: str, handler: ResourceHandler
    ) -> None:
        """Serve ``/api[s]/<group>/<version>/[namespaces/<ns>/]<resource>...`` (routing only:
        ``install_api`` lists it in discovery too)."""
        self.resources[(group, version, resource)] = handler

    def uninstall_resource(self, group: str, version: str, resource: str) -> None:
        """Stop serving ``resource`` and take it out of discovery; a version left without
        resources disappears, and a group left without versions."""
        routed = self.resources.pop((group, version, resource), None) is not None
        listed = False
        served = self.groups.get(group)
        if served is not None and version in served.versions:
            resources = served.versions[version]
            kept = [r for r in resources if r.plural != resource]
            listed = len(kept) != len(resources)
            if kept:
                served.versions[version] = kept
            else:
                del served.versions[version]
                if not served.versions:
                    del self.groups[group]
        if routed or listed:
            self._changed()

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        info: RequestInfo = request[REQUEST_INFO]
        if info.is_resource_request:
            # the core group lives under /api only, every other group under /apis only
            if (info.api_prefix == "api") == (info.api_group == ""):
                key = (info.api_group, info.api_version, info.resource)
                resource_handler = self.resources.get(key)
                if resource_handler is not None:
                    return await resource_handler(request, info)
        else:
            handler = self.paths.get(request.path)
            if handler is not None:
                return await handler(request)
            for prefix, prefixed in self.prefixes:
                if request.path.startswith(prefix):
                    return await prefixed(request)
        return await self.delegate(request)
