"""Where a Service reference points: the address the gateway dials for a backend or webhook.

By default ``<name>.<namespace>.svc:<port>``, which the cluster's DNS answers when the gateway
runs inside Kubernetes. With ``--enable-aggregator-routing`` the gateway reads its own core/v1
Service and Endpoints instead (kube's endpoint routing): the Service port is mapped to its
Endpoints port by name, and an ExternalName Service resolves to its external name. Either way
the TLS server name is ``<name>.<namespace>.svc``.
"""

from __future__ import annotations

import random
from typing import Any

from gateway.registry.lister import Lister
from gateway.storage.errors import KeyNotFoundError, StorageError
from gateway.transport.resolver import ResolveError, ServiceAddress

#: Most Services remembered (one per APIService backend in practice).
_MAX_CACHED = 1024


class StoreServiceResolver:
    """A ServiceResolver over the gateway's own Services and Endpoints.

    What a Service and its Endpoints resolve to is remembered together with the two objects it
    was computed from: the watch cache replaces an object on every change (never edits one in
    place), so the same objects read again mean the same answer, and a changed Service or
    Endpoints is resolved afresh. While neither watch cache has changed at all since (their
    revisions), the answer is given without reading them again (the proxy asks on every
    request). With routing, an address is still picked among the ready ones on every request.
    """

    def __init__(self, services: Lister, endpoints: Lister, *, routing: bool) -> None:
        self.services = services
        self.endpoints = endpoints
        self.routing = routing
        # (namespace, name, port) -> (service, endpoints or None, answer, the caches'
        # revisions when it was last found current)
        self._cache: dict[tuple[str, str, int], tuple[dict, dict | None, Any, tuple]] = {}

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        if not self.routing:
            server_name = f"{name}.{namespace}.svc"
            return ServiceAddress(server_name, port, server_name)
        key = (namespace, name, port)
        stamp = (self.services.cacher.revision, self.endpoints.cacher.revision)
        cached = self._cache.get(key)
        if cached is not None and cached[3] == stamp:
            return cached[2] if cached[1] is None else self._pick(cached[2], name)
        service = await self._get(self.services, namespace, name, "service")
        cached = self._cache.get(key)
        if cached is not None and cached[0] is service:
            if cached[1] is None:  # an ExternalName Service
                self._cache[key] = (*cached[:3], stamp)
                return cached[2]
            endpoints = await self._get(self.endpoints, namespace, name, "endpoints")
            if cached[1] is endpoints:
                self._cache[key] = (*cached[:3], stamp)
                return self._pick(cached[2], name)
        answer, found = await self._compute(service, namespace, name, port)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[key] = (service, found, answer, stamp)
        return answer if found is None else self._pick(answer, name)

    @staticmethod
    def _pick(candidates: Any, name: str) -> ServiceAddress:
        if not candidates:
            raise ResolveError(f'no endpoints available for service "{name}"')
        return candidates[0] if len(candidates) == 1 else random.choice(candidates)

    async def _compute(self, service: dict, namespace: str, name: str,
                       port: int) -> tuple[Any, dict | None]:
        """(an ExternalName's address, None) or (the candidate addresses, the Endpoints)."""
        server_name = f"{name}.{namespace}.svc"
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return ServiceAddress(spec.get("externalName", ""), port, server_name), None
        port_name = next((p.get("name", "") for p in spec.get("ports") or []
                          if p.get("port") == port), None)
        if port_name is None:
            raise ResolveError(f'no service port {port} found for service "{name}"')
        endpoints = await self._get(self.endpoints, namespace, name, "endpoints")
        candidates = [ServiceAddress(address["ip"], int(p["port"]), server_name)
                      for subset in endpoints.get("subsets") or []
                      for p in subset.get("ports") or [] if p.get("name", "") == port_name
                      for address in subset.get("addresses") or []]
        return candidates, endpoints

    async def _get(self, lister: Lister, namespace: str, name: str, what: str) -> dict:
        try:
            return await lister.get(namespace, name)
        except KeyNotFoundError:
            raise ResolveError(f'{what} "{name}" not found') from None
        except StorageError as err:
            raise ResolveError(f'{what} "{name}": {err}') from None
