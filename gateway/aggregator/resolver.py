"""Where a Service reference points: the address the gateway dials for a backend or webhook.

By default ``<name>.<namespace>.svc:<port>``, which the cluster's DNS answers when the gateway
runs inside Kubernetes. With ``--enable-aggregator-routing`` the gateway reads its own core/v1
Service and Endpoints instead (kube's endpoint routing): the Service port is mapped to its
Endpoints port by name, and an ExternalName Service resolves to its external name. Either way
the TLS server name is ``<name>.<namespace>.svc``.
"""

from __future__ import annotations

import random

from gateway.registry.store import RESTStore
from gateway.storage.errors import KeyNotFoundError, StorageError
from gateway.transport.resolver import ResolveError, ServiceAddress


class StoreServiceResolver:
    """A ServiceResolver over the gateway's own Services and Endpoints."""

    def __init__(self, services: RESTStore, endpoints: RESTStore, *, routing: bool) -> None:
        self.services = services
        self.endpoints = endpoints
        self.routing = routing

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        server_name = f"{name}.{namespace}.svc"
        if not self.routing:
            return ServiceAddress(server_name, port, server_name)
        service = await self._get(self.services, namespace, name, "service")
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return ServiceAddress(spec.get("externalName", ""), port, server_name)
        port_name = next((p.get("name", "") for p in spec.get("ports") or []
                          if p.get("port") == port), None)
        if port_name is None:
            raise ResolveError(f'no service port {port} found for service "{name}"')
        endpoints = await self._get(self.endpoints, namespace, name, "endpoints")
        candidates = [(address["ip"], p["port"])
                      for subset in endpoints.get("subsets") or []
                      for p in subset.get("ports") or [] if p.get("name", "") == port_name
                      for address in subset.get("addresses") or []]
        if not candidates:
            raise ResolveError(f'no endpoints available for service "{name}"')
        host, target = random.choice(candidates)
        return ServiceAddress(host, int(target), server_name)

    async def _get(self, store: RESTStore, namespace: str, name: str, what: str) -> dict:
        try:
            return await store.cacher.get_cached(store.resource.key(namespace, name))
        except KeyNotFoundError:
            raise ResolveError(f'{what} "{name}" not found') from None
        except StorageError as err:
            raise ResolveError(f'{what} "{name}": {err}') from None
