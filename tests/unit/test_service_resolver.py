"""The service resolver over the gateway's own Services and Endpoints (real SQLite store and
watch caches): an answer is remembered while neither cache changes, and any change to a
Service or Endpoints is seen by the next request."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gateway.aggregator.resolver import StoreServiceResolver
from gateway.apis.core.endpoints import ENDPOINTS
from gateway.apis.core.services import SERVICES
from gateway.apis.install import build_kube_core
from gateway.registry.lister import lister_for
from gateway.registry.options import StoreOptions
from gateway.registry.store import DeleteOptions, WriteOptions
from gateway.storage.factory import StorageFactory
from gateway.storage.sqlite import SQLiteStorage
from gateway.transport.resolver import ResolveError, ServiceAddress
from tests.support.wait import eventually_async

OPTIONS = WriteOptions(manager="test")
NAMESPACE, NAME = "wardle", "api"


class CountingLister:
    """A lister that counts the reads the resolver makes."""

    def __init__(self, lister) -> None:
        self.lister = lister
        self.cacher = lister.cacher
        self.reads = 0

    async def get(self, namespace: str, name: str):
        self.reads += 1
        return await self.lister.get(namespace, name)


@pytest.fixture
async def world(tmp_path: Path):
    storage = SQLiteStorage(tmp_path / "state.db")
    factory = StorageFactory(storage)
    core = build_kube_core(StoreOptions(factory))
    await storage.start()
    await factory.start_caches()
    await core.namespaces.create("", {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": NAMESPACE}}, OPTIONS)
    services = CountingLister(lister_for(factory, SERVICES))
    endpoints = CountingLister(lister_for(factory, ENDPOINTS))
    yield core, services, endpoints, StoreServiceResolver(services, endpoints, routing=True)
    await factory.close()
    await storage.close()


async def _endpoints(core, ip: str, port: int) -> None:
    obj = {"apiVersion": "v1", "kind": "Endpoints",
           "metadata": {"name": NAME, "namespace": NAMESPACE},
           "subsets": [{"addresses": [{"ip": ip}],
                        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}

    def replace(current):
        new = copy.deepcopy(obj)
        if current is not None:
            new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return new

    await core.store("endpoints").patch(NAMESPACE, NAME, replace, OPTIONS, may_create=True)


async def _resolves_to(resolver: StoreServiceResolver, expected: ServiceAddress) -> bool:
    try:
        return await resolver.resolve(NAMESPACE, NAME, 443) == expected
    except ResolveError:
        return False


async def test_answers_are_remembered_until_a_service_or_endpoints_changes(world) -> None:
    core, services, endpoints, resolver = world
    await core.store("services").create(NAMESPACE, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}, OPTIONS)
    await _endpoints(core, "127.0.0.1", 1111)
    first = ServiceAddress("127.0.0.1", 1111, f"{NAME}.{NAMESPACE}.svc")
    await eventually_async(lambda: _resolves_to(resolver, first), what="the first address")

    reads = services.reads + endpoints.reads
    for _ in range(10):
        assert await resolver.resolve(NAMESPACE, NAME, 443) == first
    assert services.reads + endpoints.reads == reads, "nothing changed: nothing read again"

    await _endpoints(core, "127.0.0.2", 2222)  # the Endpoints change
    second = ServiceAddress("127.0.0.2", 2222, f"{NAME}.{NAMESPACE}.svc")
    await eventually_async(lambda: _resolves_to(resolver, second), what="the new address")

    await core.store("services").delete(NAMESPACE, NAME, DeleteOptions(), OPTIONS)

    async def gone() -> bool:
        try:
            await resolver.resolve(NAMESPACE, NAME, 443)
        except ResolveError as err:
            return "not found" in str(err)
        return False

    await eventually_async(gone, what="the Service gone")
