"""The aggregator's request routing: a remote APIService's group version goes to its backend,
everything else to the aggregator's own generic apiserver (which serves apiregistration.k8s.io,
health, discovery and OpenAPI, and delegates the rest down the chain).

One dictionary lookup per request decides: ``/apis/<group>/<version>`` and everything under it
is looked up in the routing table (APIServiceRegistration.routes). A local route, or none, is
served down the chain. A remote route is served by the proxy, but only while its APIService
is Available: otherwise (or while no proxy is configured) the answer is kube-aggregator's
plain-text ``503 service unavailable``. The core group (``/api/v1``) is always local.

The proxy is anything with ``async serve(request, route) -> Response``; it is called only
for a remote, available route, and owns everything from there (resolving the Service, TLS,
identity headers, streaming, upgrades, its own error answers).

A request the proxy's fast lane took carries the route the lane chose it for (``ROUTE``): the
lane serves remote routes only, so such a request is never handed to the local servers, even
if its APIService changed in the meantime (it is answered as one that came a moment earlier).
"""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from gateway.aggregator.registration import APIServiceRegistration
from gateway.aggregator.routes import Route
from gateway.server.genericapiserver import GenericAPIServer
from gateway.server.request import Request, Response

#: The remote route a request was admitted to the fast lane for.
ROUTE = "gateway.route"


class Proxy(Protocol):
    async def serve(self, request: Request, route: Route) -> Response: ...


def service_unavailable() -> web.Response:
    """Go's http.Error(w, "service unavailable", 503): plain text, not a Status."""
    return web.Response(status=503, body=b"service unavailable\n", headers={
        "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"})


class AggregatorServer:
    """The outermost server of the chain: remote group versions, then the local servers."""

    def __init__(self, local: GenericAPIServer, registration: APIServiceRegistration,
                 proxy: Proxy | None = None) -> None:
        self.local = local
        self.registration = registration
        self.proxy = proxy

    def remote_route(self, path: str) -> Route | None:
        """The remote route ``path`` falls under (``/apis/<g>/<v>`` or below), or None."""
        if not path.startswith("/apis/"):
            return None
        parts = path.split("/", 4)  # "", "apis", group, version[, rest]
        if len(parts) < 4 or not parts[2] or not parts[3]:
            return None
        route = self.registration.routes.get((parts[2], parts[3]))
        if route is None or route.service is None or parts[2] in self.local.groups:
            return None  # the aggregator's own groups (apiregistration) are never proxied
        return route

    async def handle(self, request: Request) -> Response:
        route = request.get(ROUTE) or self.remote_route(request.path)
        if route is None:
            # only aiohttp's requests get here: the fast lane takes remote routes only (ROUTE)
            assert isinstance(request, web.BaseRequest)
            return await self.local.handle(request)
        if not route.available or self.proxy is None:
            return service_unavailable()
        return await self.proxy.serve(request, route)
