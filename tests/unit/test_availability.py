"""The remote availability controller over a real store (SQLite and watch caches, the very
stores the gateway builds) and a real mTLS backend: each check's condition in kube's words,
status written only when it changes, lastTransitionTime only when the status flips."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from gateway.aggregator.apiservices import APISERVICES, available_condition
from gateway.aggregator.availability import AvailabilityController
from gateway.aggregator.metrics import AggregatorMetrics
from gateway.aggregator.resolver import StoreServiceResolver
from gateway.apis.core.endpoints import ENDPOINTS
from gateway.apis.core.services import SERVICES
from gateway.apis.install import build_kube_core
from gateway.registry.lister import lister_for
from gateway.registry.options import StoreOptions
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.storage.factory import StorageFactory
from gateway.storage.sqlite import SQLiteStorage
from gateway.transport.clients import ClientManager
from tests.support.inprocess import PKI, PROXY_CLIENT_CN, SERVICE_NAME, SERVICE_NAMESPACE, Backend
from tests.support.wait import eventually_async

NAME = "v1.g.example.com"
OPTIONS = WriteOptions(manager="test")


class World:
    """A store with the core resources and APIServices, the controller running over it."""

    def __init__(self, tmp_path: Path) -> None:
        self.storage = SQLiteStorage(tmp_path / "state.db")
        self.factory = StorageFactory(self.storage)
        self.core = build_kube_core(StoreOptions(self.factory))
        self.apiservices = RESTStore(APISERVICES,
                                     self.factory.cacher(APISERVICES.storage_prefix))
        self.services = self.core.store("services")
        self.endpoints = self.core.store("endpoints")
        self.pki = PKI.make(tmp_path / "pki")
        self.clients = ClientManager(self.pki.proxy_client.cert, self.pki.proxy_client.key)
        self.metrics = AggregatorMetrics()
        self.controller = AvailabilityController(
            self.apiservices, self.services, self.endpoints, self.clients,
            StoreServiceResolver(lister_for(self.factory, SERVICES),
                                 lister_for(self.factory, ENDPOINTS), routing=True), self.metrics,
            resync_period=3600)
        self._task: asyncio.Task | None = None

    async def start(self) -> World:
        await self.storage.start()
        await self.factory.start_caches()
        await self.core.namespaces.create("", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": SERVICE_NAMESPACE}},
                                          OPTIONS)
        self._task = asyncio.get_running_loop().create_task(self.controller.run())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.clients.close()
        await self.factory.close()
        await self.storage.close()

    async def create_apiservice(self, **service) -> None:
        obj = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": NAME},
               "spec": {"group": "g.example.com", "version": "v1",
                        "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE_NAME,
                                    **service},
                        "caBundle": self.pki.ca_bundle_b64,
                        "groupPriorityMinimum": 1000, "versionPriority": 15}}
        await self.apiservices.create("", obj, OPTIONS)

    async def create_service(self, port: int = 443, port_name: str = "https",
                             **spec) -> None:
        obj = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
               "spec": {"ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
                        **spec}}
        await self.services.create(SERVICE_NAMESPACE, obj, OPTIONS)

    async def set_endpoints(self, port: int, port_name: str = "https",
                            addresses: bool = True) -> None:
        subset: dict = {"ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}
        subset["addresses" if addresses else "notReadyAddresses"] = [{"ip": "127.0.0.1"}]
        obj = {"apiVersion": "v1", "kind": "Endpoints",
               "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
               "subsets": [subset]}

        def replace(current):
            new = copy.deepcopy(obj)
            if current is not None:
                new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return new

        await self.endpoints.patch(SERVICE_NAMESPACE, SERVICE_NAME, replace, OPTIONS,
                                   may_create=True)

    async def condition(self) -> dict:
        obj = await self.apiservices.get("", NAME)
        return available_condition(obj) or {}

    async def wait_for(self, reason: str) -> dict:
        async def check():
            condition = await self.condition()
            return condition if condition.get("reason") == reason else None

        return await eventually_async(check, what=f"condition {reason}")


@pytest.fixture
async def world(tmp_path: Path):
    w = await World(tmp_path).start()
    yield w
    await w.stop()


@pytest.fixture
async def backend(world: World):
    server = await Backend(world.pki).start()
    yield server
    server.release.set()
    await server.stop()


async def test_each_check_in_kube_order(world: World, backend: Backend) -> None:
    await world.create_apiservice(port=443)
    condition = await world.wait_for("ServiceNotFound")
    assert condition["status"] == "False"
    assert condition["message"] == 'service/api in "backends" is not present'
    assert world.metrics.registry.get_sample_value(
        "aggregator_unavailable_apiservice", {"name": NAME}) == 1

    await world.create_service(port=8443)
    condition = await world.wait_for("ServicePortError")
    assert condition["message"] == 'service/api in "backends" is not listening on port 443'

    await world.services.delete(SERVICE_NAMESPACE, SERVICE_NAME, DeleteOptions(), OPTIONS)
    await world.create_service(port=443)
    condition = await world.wait_for("EndpointsNotFound")
    assert condition["message"] == 'cannot find endpoints for service/api in "backends"'

    await world.set_endpoints(backend.port, addresses=False)
    condition = await world.wait_for("MissingEndpoints")
    assert condition["message"] == ('endpoints for service/api in "backends" have no addresses '
                                    'with port name "https"')

    await world.set_endpoints(backend.port)
    condition = await world.wait_for("Passed")
    assert condition["status"] == "True"
    assert condition["message"] == "all checks passed"
    assert world.metrics.registry.get_sample_value(
        "aggregator_unavailable_apiservice", {"name": NAME}) == 0

    # the discovery request: as the aggregator, with the proxy client certificate
    record = next(r for r in backend.received if r["path"] == "/apis/g.example.com/v1")
    headers = [(k, v) for k, v in record["headers"]]
    assert [v for k, v in headers if k == "X-Remote-User"] == ["system:kube-aggregator"]
    assert [v for k, v in headers if k == "X-Remote-Group"] == ["system:masters"]
    assert not [k for k, _ in headers if k.lower() == "x-remote-uid"]
    assert record["client_cn"] == PROXY_CLIENT_CN


async def test_failed_discovery_checks(world: World, backend: Backend) -> None:
    backend.discovery_code = 403
    await world.create_service()
    await world.set_endpoints(backend.port)
    await world.create_apiservice()
    url = f"https://127.0.0.1:{backend.port}/apis/g.example.com/v1"
    condition = await world.wait_for("FailedDiscoveryCheck")
    assert condition["status"] == "False"
    assert condition["message"] == f"bad status from {url}: 403"

    backend.discovery_code = 200  # re-checked with back-off, no event needed
    first = await world.wait_for("Passed")

    await backend.stop()
    await world.set_endpoints(backend.port)  # an Endpoints change: checked again
    await world.controller.sync(NAME)
    condition = await world.wait_for("FailedDiscoveryCheck")
    assert condition["message"] == (f'failing or missing response from {url}: Get "{url}": '
                                    f"dial tcp 127.0.0.1:{backend.port}: connect: connection "
                                    "refused")
    assert condition["lastTransitionTime"] >= first["lastTransitionTime"]


async def test_discovery_does_not_verify_the_backend(world: World, backend: Backend) -> None:
    """kube's discovery check is insecure: no caBundle, no server name check."""
    other = PKI.make(world.pki.dir / "other")
    stranger = await Backend(other, require_client=False).start()
    try:
        await world.create_service()
        await world.set_endpoints(stranger.port)
        await world.create_apiservice()
        assert (await world.wait_for("Passed"))["status"] == "True"
    finally:
        await stranger.stop()


async def test_status_is_written_only_when_it_changes(world: World, backend: Backend) -> None:
    await world.create_apiservice()
    await world.wait_for("ServiceNotFound")
    before = await world.apiservices.get("", NAME)
    assert await world.controller.sync(NAME)
    assert await world.controller.sync(NAME)
    after = await world.apiservices.get("", NAME)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # a new reason at the same status keeps lastTransitionTime
    await world.create_service(port=8443)
    changed = await world.wait_for("ServicePortError")
    assert changed["lastTransitionTime"] == available_condition(before)["lastTransitionTime"]
    assert [c["type"] for c in (await world.apiservices.get("", NAME))["status"][
        "conditions"]] == ["Available"]


async def test_other_service_types_skip_the_port_and_endpoints_checks(
        world: World, backend: Backend) -> None:
    await world.create_service(port=443, type="NodePort")
    await world.create_apiservice()
    # no Endpoints at all: the discovery check decides, and the resolver finds none
    condition = await world.wait_for("FailedDiscoveryCheck")
    assert condition["message"] == 'endpoints "api" not found'


async def test_local_apiservices_are_left_alone(world: World) -> None:
    obj = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
           "metadata": {"name": "v1.local.example.com"},
           "spec": {"group": "local.example.com", "version": "v1",
                    "groupPriorityMinimum": 1000, "versionPriority": 15}}
    created = await world.apiservices.create("", obj, OPTIONS)
    assert await world.controller.sync("v1.local.example.com")
    current = await world.apiservices.get("", "v1.local.example.com")
    assert current["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert available_condition(current)["reason"] == "Local"
