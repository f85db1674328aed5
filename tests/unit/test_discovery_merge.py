"""Aggregated discovery as a store of group version documents: merging sources, kube's group
and version order, freshness, the served document's ETag; and the discovery manager fetching
backends' documents over real mTLS (an in-process backend), in the background."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.aggregator.discovery import ACCEPT, SOURCE, DiscoveryManager
from gateway.aggregator.routes import Route, ServiceRef
from gateway.server.discovery import (
    AGGREGATOR_SOURCE,
    CRD_SOURCE,
    STALE,
    Discovery,
    DiscoveryStore,
    GroupVersions,
    VersionDocument,
    resources_from_aggregated,
    resources_from_legacy,
)
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ServiceAddress
from tests.support.inprocess import PKI, PROXY_CLIENT_CN, SERVICE_NAME, SERVICE_NAMESPACE, peer_cn
from tests.support.wait import eventually_async

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def flunders(kind: str = "Flunder") -> dict[str, Any]:
    return {"resource": "flunders", "responseKind": {"group": "wardle.example.com",
                                                     "version": "v1alpha1", "kind": kind},
            "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list"]}


def doc(group: str, version: str, **kwargs: Any) -> VersionDocument:
    return VersionDocument(group, version, (flunders(),), **kwargs)


def order(store: DiscoveryStore) -> list[tuple[str, list[str]]]:
    return [(name, [d.version for d in documents]) for name, documents in store.merged()]


# -- the store ---------------------------------------------------------------------------------


def test_groups_by_their_highest_priority_then_name_apiregistration_first():
    store = DiscoveryStore(pinned=("apiregistration.k8s.io",))
    store.add_source("remote", AGGREGATOR_SOURCE)
    for document in (
        doc("b.example.com", "v1", group_priority=100),
        doc("b.example.com", "v2", group_priority=17100),  # places its group
        doc("a.example.com", "v1", group_priority=16800),
        doc("c.example.com", "v1", group_priority=16800),  # a tie: by name
        doc("apiregistration.k8s.io", "v1", group_priority=1),
        doc("d.example.com", "v1"),  # no priority anywhere: kube's default 1000
        doc("e.example.com", "v1", group_priority=999),
    ):
        store.put("remote", document)
    assert [name for name, _ in order(store)] == [
        "apiregistration.k8s.io", "b.example.com", "a.example.com", "c.example.com",
        "d.example.com", "e.example.com"]


def test_versions_by_their_priority_then_in_kubes_version_order():
    store = DiscoveryStore()
    store.add_source("remote", AGGREGATOR_SOURCE)
    for version in ("v1alpha1", "v1beta1", "v2", "foo", "v1", "v10beta3", "v1beta2", "bar",
                    "v2alpha1"):
        store.put("remote", doc("g.example.com", version))
    store.put("remote", doc("g.example.com", "v1alpha2", version_priority=20))
    assert order(store) == [("g.example.com", [
        "v1alpha2", "v2", "v1", "v10beta3", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1",
        "bar", "foo"])]


def test_local_group_versions_take_their_apiservices_priorities():
    apiservices = {("rbac.authorization.k8s.io", "v1"): (17000, 15),
                   ("coordination.k8s.io", "v1"): (16500, 15),
                   ("coordination.k8s.io", "v1alpha2"): (16500, 20)}
    local = [VersionDocument("coordination.k8s.io", "v1"),
             VersionDocument("coordination.k8s.io", "v1alpha2"),
             VersionDocument("aaa.example.com", "v1"),  # no APIService: 1000
             VersionDocument("rbac.authorization.k8s.io", "v1")]
    store = DiscoveryStore(lambda g, v: apiservices.get((g, v)))
    store.add_source("local", 100, lambda: local)
    assert order(store) == [("rbac.authorization.k8s.io", ["v1"]),
                            ("coordination.k8s.io", ["v1alpha2", "v1"]),
                            ("aaa.example.com", ["v1"])]
    # a changed APIService counts once the store is told
    apiservices[("aaa.example.com", "v1")] = (18000, 15)
    assert order(store)[0][0] == "rbac.authorization.k8s.io"
    store.invalidate()
    assert order(store)[0][0] == "aaa.example.com"


def test_the_lowest_ranked_source_wins_a_group_version():
    store = DiscoveryStore()
    store.add_source("crd", CRD_SOURCE)
    store.add_source("local", 100, lambda: [VersionDocument("g", "v1", (flunders("Local"),))])
    store.add_source("remote", AGGREGATOR_SOURCE)
    store.put("crd", VersionDocument("g", "v1", (flunders("Crd"),)))
    store.put("crd", VersionDocument("g", "v2", (flunders("Crd"),)))
    kinds = {d.version: d.resources[0]["responseKind"]["kind"] for d in store.merged()[0][1]}
    assert kinds == {"v1": "Local", "v2": "Crd"}
    store.put("remote", VersionDocument("g", "v1", (flunders("Remote"),)))
    kinds = {d.version: d.resources[0]["responseKind"]["kind"] for d in store.merged()[0][1]}
    assert kinds == {"v1": "Remote", "v2": "Crd"}
    store.remove("remote", "g", "v1")
    kinds = {d.version: d.resources[0]["responseKind"]["kind"] for d in store.merged()[0][1]}
    assert kinds == {"v1": "Local", "v2": "Crd"}


def test_entries_carry_freshness_and_omit_empty_resources():
    assert doc("g", "v1").entry() == {"version": "v1", "resources": [flunders()],
                                      "freshness": "Current"}
    assert VersionDocument("g", "v1", freshness=STALE).entry() == {"version": "v1",
                                                                   "freshness": "Stale"}


def test_listeners_hear_of_changes_only():
    store = DiscoveryStore()
    store.add_source("remote", AGGREGATOR_SOURCE)
    heard: list[int] = []
    store.on_change(lambda: heard.append(1))
    store.put("remote", doc("g", "v1"))
    store.put("remote", doc("g", "v1"))  # the same again
    store.remove("remote", "g", "v2")  # nothing there
    assert len(heard) == 1
    store.put("remote", doc("g", "v1", freshness=STALE))
    store.remove("remote", "g", "v1")
    assert len(heard) == 3


# -- the served document -----------------------------------------------------------------------


async def _get(discovery: Discovery, path: str, **headers: str) -> web.Response:
    request = make_mocked_request("GET", path, headers=headers)
    handler = discovery.apis if path == "/apis" else discovery.api
    return await handler(request)  # type: ignore[return-value]


async def test_the_served_document_follows_the_store_with_its_etag():
    core = GroupVersions("", {"v1": []})
    discovery = Discovery(lambda: [core], pinned=("apiregistration.k8s.io",))
    remote = "remote"
    discovery.store.add_source(remote, AGGREGATOR_SOURCE)
    discovery.store.put(remote, doc("wardle.example.com", "v1alpha1"))
    first = await _get(discovery, "/apis", Accept=AGGREGATED)
    assert first.status == 200 and first.headers["Content-Type"] == AGGREGATED
    assert first.headers["Cache-Control"] == "public"
    body = json.loads(first.body)  # type: ignore[arg-type]
    assert body["items"] == [{"metadata": {"name": "wardle.example.com",
                                           "creationTimestamp": None},
                              "versions": [doc("wardle.example.com", "v1alpha1").entry()]}]
    etag = first.headers["ETag"]
    assert (await _get(discovery, "/apis", Accept=AGGREGATED,
                       **{"If-None-Match": etag})).status == 304
    # the same document again: the same ETag; the backend's resources change: a new one
    discovery.store.put(remote, doc("wardle.example.com", "v1alpha1"))
    assert (await _get(discovery, "/apis", Accept=AGGREGATED)).headers["ETag"] == etag
    discovery.store.put(remote, VersionDocument("wardle.example.com", "v1alpha1",
                                                (flunders("Other"),)))
    changed = await _get(discovery, "/apis", Accept=AGGREGATED, **{"If-None-Match": etag})
    assert changed.status == 200 and changed.headers["ETag"] != etag
    discovery.store.put(remote, VersionDocument("wardle.example.com", "v1alpha1",
                                                (flunders("Other"),), freshness=STALE))
    stale = json.loads((await _get(discovery, "/apis", Accept=AGGREGATED)).body)
    assert stale["items"][0]["versions"][0]["freshness"] == "Stale"
    # the core group is /api's alone
    core_doc = json.loads((await _get(discovery, "/api", Accept=AGGREGATED)).body)
    assert [i["metadata"]["name"] for i in core_doc["items"]] == [""]


# -- converting backends' documents ------------------------------------------------------------


def test_a_legacy_resource_list_in_the_v2_shape():
    listed = {"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1alpha1",
              "resources": [
                  {"name": "flunders", "singularName": "flunder", "namespaced": True,
                   "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"],
                   "categories": ["wardle"]},
                  {"name": "flunders/status", "singularName": "", "namespaced": True,
                   "kind": "Flunder", "verbs": ["get", "patch"]},
                  {"name": "fischers/scale", "singularName": "", "namespaced": False,
                   "kind": "", "verbs": ["get"]},
              ]}
    assert resources_from_legacy(listed) == (
        {"resource": "flunders", "responseKind": {"group": "", "version": "", "kind": "Flunder"},
         "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list"],
         "shortNames": ["fl"], "categories": ["wardle"],
         "subresources": [{"subresource": "status", "verbs": ["get", "patch"],
                           "responseKind": {"group": "", "version": "",
                                            "kind": "Flunder"}}]},
        {"resource": "fischers", "responseKind": {"group": "", "version": "", "kind": ""},
         "scope": "Cluster", "singularResource": "", "verbs": [],
         "subresources": [{"subresource": "scale", "verbs": ["get"],
                           "responseKind": {"group": "", "version": "", "kind": ""}}]},
    )
    with pytest.raises(ValueError, match="scope do not match"):
        resources_from_legacy({"resources": [
            {"name": "a", "namespaced": True, "kind": "A", "verbs": []},
            {"name": "a/status", "namespaced": False, "kind": "A", "verbs": []}]})


def test_a_missing_response_kind_is_made_empty():
    version = {"version": "v1", "resources": [
        {"resource": "a", "scope": "Cluster", "verbs": [], "responseKind": None,
         "subresources": [{"subresource": "status", "verbs": ["get"]}]}]}
    [resource] = resources_from_aggregated(version)
    empty = {"group": "", "version": "", "kind": ""}
    assert resource["responseKind"] == empty
    assert resource["subresources"][0]["responseKind"] == empty


# -- the manager, over mTLS --------------------------------------------------------------------


def aggregated_document(*group_versions: tuple[str, str]) -> dict[str, Any]:
    items: dict[str, list[dict[str, Any]]] = {}
    for group, version in group_versions:
        items.setdefault(group, []).append(
            {"version": version, "resources": [flunders()], "freshness": "Current"})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": [{"metadata": {"name": g}, "versions": v}
                                      for g, v in items.items()]}


@dataclass
class DiscoveryBackend:
    """An extension apiserver's discovery: /apis aggregated (ETag, 304) unless ``legacy_only``,
    /apis/<g>/<v> legacy; ``code`` answers everything with that status, ``hang`` holds /apis
    forever."""

    pki: PKI
    served: tuple[tuple[str, str], ...] = (("wardle.example.com", "v1alpha1"),)
    legacy_only: bool = False
    code: int = 200
    hang: bool = False
    received: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    async def start(self) -> DiscoveryBackend:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port,
                           ssl_context=self.pki.server_context())
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def asked(self, path: str = "/apis") -> list[dict[str, Any]]:
        return [r for r in self.received if r["path"] == path]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        record = {"path": request.path, "headers": request.headers.copy(),
                  "cn": peer_cn(request)}
        self.received.append(record)
        response = await self._answer(request)
        record["status"] = response.status
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        if self.code != 200:
            return web.Response(status=self.code, text="no")
        if request.path == "/apis":
            if self.hang:
                await asyncio.Event().wait()
            if self.legacy_only or "apidiscovery" not in request.headers.get("Accept", ""):
                return web.json_response({"kind": "APIGroupList", "groups": []})
            body = json.dumps(aggregated_document(*self.served)).encode()
            etag = f'"{hash(body)}"'
            if request.headers.get("If-None-Match") == etag:
                return web.Response(status=304, headers={"ETag": etag})
            return web.Response(body=body, headers={"ETag": etag, "Content-Type": AGGREGATED})
        _, group, version = request.path.strip("/").split("/")
        if (group, version) not in self.served:
            return web.Response(status=404, text="404 page not found")
        return web.json_response({"kind": "APIResourceList",
                                  "groupVersion": f"{group}/{version}",
                                  "resources": [{"name": "flunders", "singularName": "flunder",
                                                 "namespaced": True, "kind": "Flunder",
                                                 "verbs": ["get", "list"]}]})


class StaticResolver:
    """Every Service is the backend on 127.0.0.1 (the resolver is an interface)."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        return ServiceAddress("127.0.0.1", self.port, f"{name}.{namespace}.svc")


@dataclass
class World:
    pki: PKI
    backend: DiscoveryBackend
    store: DiscoveryStore
    manager: DiscoveryManager
    clients: ClientManager

    def route(self, group: str, version: str = "v1alpha1", *, service: str = SERVICE_NAME,
              group_priority: int = 1000, version_priority: int = 15) -> Route:
        return Route(f"{version}.{group}", group, version,
                     ServiceRef(SERVICE_NAMESPACE, service, 443), self.pki.ca_bundle,
                     group_priority_minimum=group_priority, version_priority=version_priority)

    def add(self, route: Route) -> Route:
        self.manager.observe(route.name, route, None)
        return route

    def document(self, group: str, version: str = "v1alpha1") -> VersionDocument | None:
        return self.store.get(SOURCE, group, version)

    async def settled(self, group: str, freshness: str, version: str = "v1alpha1"
                      ) -> VersionDocument:
        async def check() -> VersionDocument:
            found = self.document(group, version)
            assert found is not None and found.freshness == freshness, found
            return found

        return await eventually_async(check, timeout=10, what=f"{group} {freshness}")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    pki = PKI.make(tmp_path)
    backend = await DiscoveryBackend(pki).start()
    clients = ClientManager(pki.proxy_client.cert, pki.proxy_client.key)
    store = DiscoveryStore()
    manager = DiscoveryManager(store, clients, StaticResolver(backend.port),
                               resync_period=3600, timeout=0.5)
    task = asyncio.get_running_loop().create_task(manager.run())
    try:
        yield World(pki, backend, store, manager, clients)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await backend.stop()
        await clients.close()


async def test_apiservices_of_one_service_share_one_fetch_as_the_aggregator(world: World):
    world.backend.served = (("wardle.example.com", "v1alpha1"), ("wardle.example.com", "v1"))
    world.add(world.route("wardle.example.com", version_priority=20))
    world.add(world.route("wardle.example.com", "v1"))
    world.add(world.route("other.example.com", "v1"))  # not in the backend's document
    alpha = await world.settled("wardle.example.com", "Current")
    assert alpha.resources == (flunders(),)
    assert (alpha.group_priority, alpha.version_priority) == (1000, 20)
    assert (await world.settled("wardle.example.com", "Current", "v1")).resources == \
        (flunders(),)
    assert (await world.settled("other.example.com", "Current", "v1")).resources == ()
    [asked] = world.backend.asked()
    headers = asked["headers"]
    assert headers["Accept"] == ACCEPT and "If-None-Match" not in headers
    assert headers.getall("X-Remote-User") == ["system:kube-aggregator"]
    assert headers.getall("X-Remote-Group") == ["system:masters"]
    assert asked["cn"] == PROXY_CLIENT_CN

    # all dirty again: one fetch, with the ETag, answered 304: the resources stay, Current
    world.backend.code = 503
    world.manager.mark_all_dirty()
    assert (await world.settled("wardle.example.com", "Stale")).resources == (flunders(),)
    world.backend.code = 200
    world.manager.mark_all_dirty()
    assert (await world.settled("wardle.example.com", "Current")).resources == (flunders(),)
    assert (await world.settled("wardle.example.com", "Current", "v1")).resources == \
        (flunders(),)
    assert [r["status"] for r in world.backend.asked()] == [200, 503, 304]
    assert world.backend.asked()[2]["headers"]["If-None-Match"].startswith('"')
    assert not world.backend.asked("/apis/wardle.example.com/v1alpha1")  # no legacy fallback


async def test_a_backend_without_aggregated_discovery_is_asked_per_group_version(world: World):
    world.backend.legacy_only = True
    world.add(world.route("wardle.example.com"))
    world.add(world.route("missing.example.com"))
    found = await world.settled("wardle.example.com", "Current")
    [resource] = found.resources
    assert (resource["resource"], resource["scope"], resource["responseKind"]["kind"]) == (
        "flunders", "Namespaced", "Flunder")
    [legacy] = world.backend.asked("/apis/wardle.example.com/v1alpha1")
    assert legacy["headers"]["Accept"] == "application/json"
    assert legacy["headers"].getall("X-Remote-User") == ["system:kube-aggregator"]
    assert "X-Remote-Group" not in legacy["headers"]
    # a group version the backend does not serve: a failure, so Stale
    assert (await world.settled("missing.example.com", "Stale")).resources == ()


async def test_a_failing_backend_leaves_the_last_resources_stale(world: World):
    route = world.add(world.route("wardle.example.com"))
    known = (await world.settled("wardle.example.com", "Current")).resources
    for code in (503, 500):
        world.backend.code = code
        world.add(route)  # changed: asked again
        assert (await world.settled("wardle.example.com", "Stale")).resources == known
        world.backend.code = 200
        world.add(route)
        assert (await world.settled("wardle.example.com", "Current")).resources == known
    await world.backend.stop()  # connection refused
    world.add(route)
    assert (await world.settled("wardle.example.com", "Stale")).resources == known
    # nothing ever known: the version alone
    world.add(world.route("new.example.com"))
    assert (await world.settled("new.example.com", "Stale")).resources == ()


async def test_a_hanging_backend_holds_up_nothing(world: World):
    world.backend.hang = True
    route = world.add(world.route("wardle.example.com", group_priority=1234))
    # listed at once, before any answer: the version, no resources, Stale
    listed = world.document("wardle.example.com")
    assert listed == VersionDocument("wardle.example.com", "v1alpha1", (), STALE, 1234, 15)
    await eventually_async(lambda: world.backend.asked(), what="the backend asked")
    # given up after the timeout: still Stale, and asked again on the next change
    await world.settled("wardle.example.com", "Stale")
    await eventually_async(lambda: len(world.manager._running) == 0, what="the fetch over")
    assert len(world.backend.asked()) == 1
    world.backend.hang = False
    world.add(route)
    assert (await world.settled("wardle.example.com", "Current")).resources == (flunders(),)


async def test_a_deleted_or_local_apiservice_leaves_the_store(world: World):
    route = world.add(world.route("wardle.example.com"))
    await world.settled("wardle.example.com", "Current")
    world.manager.observe(route.name, None, None)
    assert world.document("wardle.example.com") is None
    world.add(route)
    await world.settled("wardle.example.com", "Current")
    world.manager.observe(route.name, Route(route.name, route.group, route.version, None), None)
    assert world.document("wardle.example.com") is None
