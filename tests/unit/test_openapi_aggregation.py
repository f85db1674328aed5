"""The aggregator's OpenAPI: merging backends' v2 documents into the gateway's, downloading them
from a real mTLS backend (identity, If-None-Match/304, 404, failures, refresh, deletion), and
what /openapi/v2 and /openapi/v3 then serve."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.aggregator import openapi as aggregated
from gateway.aggregator.openapi import AggregatedOpenAPI, OpenAPIDownloads, merge_v2
from gateway.aggregator.routes import Route, ServiceRef
from gateway.apimachinery.status import StatusError
from gateway.apis.install import build_kube_core
from gateway.registry.options import StoreOptions
from gateway.server.openapi import OpenAPI, v2_message
from gateway.storage.factory import StorageFactory
from gateway.storage.sqlite import SQLiteStorage
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ResolveError, ServiceAddress
from tests.support import backend as wardle
from tests.support.inprocess import (
    PKI,
    PROXY_CLIENT_CN,
    SERVER_NAME,
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    peer_cn,
)
from tests.support.wait import eventually_async

NAME = wardle.APISERVICE_NAME
PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."


# -- merging ----------------------------------------------------------------------------------


def _doc(paths: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1"},
            "paths": paths, "definitions": definitions}


def test_merge_adds_paths_and_definitions():
    local = _doc({"/api/v1/a": {"get": {}}}, {"A": {"type": "object"}})
    remote = _doc({"/apis/g/v1/b": {"get": {}}}, {"B": {"type": "string"}})
    merged, conflicts = merge_v2(local, [("v1.g", remote)])
    assert merged["paths"] == {"/api/v1/a": {"get": {}}, "/apis/g/v1/b": {"get": {}}}
    assert merged["definitions"] == {"A": {"type": "object"}, "B": {"type": "string"}}
    assert merged["info"] == local["info"] and conflicts == []
    assert local["definitions"] == {"A": {"type": "object"}}  # the inputs are left alone


def test_identical_definitions_are_shared_and_differing_ones_keep_the_first():
    local = _doc({"/p": {"get": {"operationId": "local"}}},
                 {"Same": {"type": "object", "properties": {"a": {"type": "string"}}},
                  "Differs": {"type": "object"}})
    remote = _doc({"/p": {"get": {"operationId": "remote"}}},
                  {"Same": {"type": "object", "properties": {"a": {"type": "string"}}},
                   "Differs": {"type": "string"}})
    other = _doc({}, {"Differs": {"type": "integer"}, "New": {"type": "boolean"}})
    merged, conflicts = merge_v2(local, [("v1.a", remote), ("v1.b", other)])
    assert merged["definitions"]["Differs"] == {"type": "object"}
    assert merged["definitions"]["New"] == {"type": "boolean"}
    assert merged["paths"]["/p"]["get"]["operationId"] == "local"
    assert conflicts == [("v1.a", "Differs"), ("v1.b", "Differs")]


def test_remote_without_paths_or_definitions():
    merged, conflicts = merge_v2(_doc({}, {"A": {}}), [("v1.x", {"swagger": "2.0"})])
    assert merged["definitions"] == {"A": {}} and conflicts == []


# -- a backend --------------------------------------------------------------------------------


class OpenAPIBackend:
    """An mTLS backend serving /openapi/v2 (with an ETag; 304 on If-None-Match) and
    /openapi/v3; ``v2_code``/``v3_code`` replace the answers with that status."""

    def __init__(self, pki: PKI) -> None:
        self.pki = pki
        self.v2: dict[str, Any] = wardle.openapi_v2()
        self.v3_key = f"apis/{wardle.GROUP}/{wardle.VERSION}"
        self.v2_code = 200
        self.v3_code = 200
        self.received: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> OpenAPIBackend:
        app = web.Application()
        app.router.add_get("/openapi/v2", self._v2)
        app.router.add_get("/openapi/v3", self._v3)
        app.router.add_get("/openapi/v3/{tail:.*}", self._v3_document)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0,
                           ssl_context=self.pki.server_context())
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _record(self, request: web.Request) -> None:
        self.received.append({"path": request.path, "cn": peer_cn(request),
                              "headers": list(request.headers.items()),
                              "query": request.query_string})

    async def _v2(self, request: web.Request) -> web.Response:
        self._record(request)
        if self.v2_code != 200:
            return web.Response(status=self.v2_code, text="no")
        body = json.dumps(self.v2).encode()
        etag = '"' + hashlib.sha512(body).hexdigest().upper() + '"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=body, content_type="application/json",
                            headers={"ETag": etag})

    async def _v3(self, request: web.Request) -> web.Response:
        self._record(request)
        if self.v3_code != 200:
            return web.Response(status=self.v3_code, text="no")
        return web.json_response({"paths": {self.v3_key: {
            "serverRelativeURL": f"/openapi/v3/{self.v3_key}?hash=ABC"}}})

    async def _v3_document(self, request: web.Request) -> web.Response:
        self._record(request)
        return web.json_response(wardle.openapi_v3_group_version(),
                                 headers={"Cache-Control": "public, immutable"})

    def headers(self, index: int = -1) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key, value in self.received[index]["headers"]:
            out.setdefault(key.lower(), []).append(value)
        return out

    def count(self, path: str) -> int:
        return sum(1 for r in self.received if r["path"] == path)


class Registration:
    """APIServiceRegistration's observer interface, driven by the test."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.observers: list[Callable[..., None]] = []

    def observe(self, observer: Callable[..., None]) -> None:
        self.observers.append(observer)

    def by_name(self) -> dict[str, Route]:
        return dict(self.routes)

    def set(self, route: Route | None, name: str = NAME) -> None:
        if route is None:
            self.routes.pop(name, None)
        else:
            self.routes[name] = route
        for observer in self.observers:
            observer(name, route, None)


class Resolver:
    def __init__(self, port: int) -> None:
        self.port = port
        self.fail = False

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        if self.fail:
            raise ResolveError("no endpoints")
        assert (namespace, name, port) == (SERVICE_NAMESPACE, SERVICE_NAME, 443)
        return ServiceAddress("127.0.0.1", self.port, SERVER_NAME)


class Recorder:
    """Stands in for the proxy: records what it was asked to serve."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def serve(self, request: web.BaseRequest, route: Route) -> web.StreamResponse:
        self.calls.append((request.path_qs, route.name))
        return web.Response(text="proxied")


@pytest.fixture
async def world(tmp_path: Path):
    pki = PKI.make(tmp_path)
    backend = await OpenAPIBackend(pki).start()
    clients = ClientManager(pki.proxy_client.cert, pki.proxy_client.key)
    registration = Registration()
    resolver = Resolver(backend.port)
    route = Route(NAME, wardle.GROUP, wardle.VERSION,
                  ServiceRef(SERVICE_NAMESPACE, SERVICE_NAME), ca_bundle=pki.ca_bundle,
                  available=True)
    proxy = Recorder()
    core = build_kube_core(StoreOptions(StorageFactory(SQLiteStorage(tmp_path / "state.db"))))
    resources = [resource for resource, _ in core.served()]
    local = OpenAPI(lambda: resources)
    served = AggregatedOpenAPI(local, registration, clients, resolver, proxy)  # type: ignore
    changes: list[int] = []
    served.downloads.on_change(lambda: changes.append(1))
    yield SimpleNamespace(backend=backend, registration=registration, route=route,
                          served=served, downloads=served.downloads, changes=changes,
                          resolver=resolver, proxy=proxy, local=local)
    for timer in served.downloads._timers.values():
        timer.cancel()
    await clients.close()
    await backend.stop()


def _unavailable(route: Route) -> Route:
    return Route(route.name, route.group, route.version, route.service,
                 ca_bundle=route.ca_bundle, available=False)


# -- downloading ------------------------------------------------------------------------------


async def test_download_as_the_aggregator_with_the_client_certificate(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    held = world.downloads.specs[NAME]
    assert held.v2 == world.backend.v2
    assert held.v3_paths == {world.backend.v3_key: {
        "serverRelativeURL": f"/openapi/v3/{world.backend.v3_key}?hash=ABC"}}
    assert world.changes == [1]
    v2_request = next(r for r in world.backend.received if r["path"] == "/openapi/v2")
    assert v2_request["cn"] == PROXY_CLIENT_CN
    headers = world.backend.headers(world.backend.received.index(v2_request))
    assert headers["x-remote-user"] == ["system:aggregator"]
    assert "x-remote-group" not in headers and "if-none-match" not in headers
    assert headers["accept"] == ["application/json"]
    assert NAME in world.downloads._timers  # the next refresh is scheduled


async def test_unchanged_spec_is_kept_with_304(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    etag = world.downloads.specs[NAME].v2_etag
    assert etag
    await world.downloads.sync(NAME)
    assert world.backend.headers(-2)["if-none-match"] == [etag]  # -1 is the v3 index
    assert world.downloads.specs[NAME].v2 == world.backend.v2
    assert world.changes == [1]  # nothing changed: the merged document is not rebuilt


async def test_a_changed_spec_replaces_the_held_one(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    world.backend.v2["definitions"]["com.example.New"] = {"type": "string"}
    await world.downloads.sync(NAME)
    assert "com.example.New" in world.downloads.specs[NAME].v2["definitions"]
    assert world.changes == [1, 1]


async def test_404_means_no_document(world):
    world.backend.v2_code = world.backend.v3_code = 404
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    held = world.downloads.specs[NAME]
    assert held.v2 is None and held.v3_paths == {}


async def test_a_failure_keeps_the_held_copy_and_retries_later(world, monkeypatch):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    delays = []
    monkeypatch.setattr(world.downloads, "_add_later",
                        lambda name, delay: delays.append((name, delay)))
    world.backend.v2_code = 500
    await world.downloads.sync(NAME)
    world.resolver.fail = True
    await world.downloads.sync(NAME)
    assert world.downloads.specs[NAME].v2 == world.backend.v2
    assert delays == [(NAME, aggregated.FAILURE_DELAY), (NAME, 2 * aggregated.FAILURE_DELAY)]
    world.resolver.fail = False
    world.backend.v2_code = 200
    await world.downloads.sync(NAME)
    assert delays[-1] == (NAME, aggregated.REFRESH_PERIOD)


async def test_unavailable_and_local_apiservices_are_not_downloaded(world):
    world.registration.set(_unavailable(world.route))
    await world.downloads.sync(NAME)
    local = Route("v1.local.example.com", "local.example.com", "v1", None, available=True)
    world.registration.set(local, local.name)
    await world.downloads.sync(local.name)
    assert world.backend.received == [] and world.downloads.specs == {}


async def test_deleted_apiservice_drops_its_documents(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    world.registration.set(None)
    assert NAME not in world.downloads.specs and NAME not in world.downloads._timers
    assert world.changes == [1, 1]


async def test_run_downloads_every_remote_apiservice_and_each_change(world):
    world.registration.routes[NAME] = world.route  # routed before the controller starts
    task = asyncio.ensure_future(world.downloads.run())
    try:
        await eventually_async(lambda: NAME in world.downloads.specs, what="first download")
        before = world.backend.count("/openapi/v2")
        world.registration.set(world.route)  # a change: downloaded again at once
        await eventually_async(lambda: world.backend.count("/openapi/v2") > before,
                               what="download after a change")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- serving ----------------------------------------------------------------------------------


def request(path: str, **headers: str) -> web.BaseRequest:
    return make_mocked_request("GET", path, headers=headers)


async def test_v2_serves_the_merged_document_and_a_new_etag_after_a_change(world):
    response = await world.served.v2(request("/openapi/v2", Accept="application/json"))
    assert wardle.DEFINITION not in json.loads(response.body)["definitions"]
    first = response.headers["ETag"]
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    response = await world.served.v2(request("/openapi/v2", Accept="application/json"))
    document = json.loads(response.body)
    assert wardle.DEFINITION in document["definitions"]
    assert f"{wardle.GV_PATH}/namespaces/{{namespace}}/flunders" in document["paths"]
    assert response.headers["ETag"] != first
    response = await world.served.v2(request("/openapi/v2", Accept=PROTOBUF,
                                             **{"If-None-Match": response.headers["ETag"]}))
    assert response.status == 304
    response = await world.served.v2(request("/openapi/v2", Accept=PROTOBUF))
    decoded = v2_message("Document")()
    decoded.ParseFromString(response.body)
    assert wardle.DEFINITION in [d.name for d in decoded.definitions.additional_properties]


async def test_v2_keeps_the_gateways_own_conflicting_definition(world):
    own = world.local.v2_spec().document["definitions"][f"{META}ObjectMeta"]
    assert own != world.backend.v2["definitions"][f"{META}ObjectMeta"]
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    merged = world.served.v2_spec().document
    assert merged["definitions"][f"{META}ObjectMeta"] == own
    assert "managedFields" in own["properties"]
    assert wardle.DEFINITION in merged["definitions"]


async def test_the_merged_document_is_built_once_per_change(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    first = world.served.v2_spec()
    assert world.served.v2_spec() is first
    await world.downloads.sync(NAME)  # 304: nothing new
    assert world.served.v2_spec() is first
    world.local.invalidate()  # the gateway's own resources changed
    assert world.served.v2_spec() is not first


async def test_v3_index_lists_available_backends(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    index = json.loads((await world.served.v3_index(request("/openapi/v3"))).body)
    key = world.backend.v3_key
    assert index["paths"][key] == {"serverRelativeURL": f"/openapi/v3/{key}?hash=ABC"}
    world.registration.set(_unavailable(world.route))
    index = json.loads((await world.served.v3_index(request("/openapi/v3"))).body)
    assert key not in index["paths"]


async def test_v3_group_version_of_a_backend_is_proxied(world):
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    key = world.backend.v3_key
    response = await world.served.v3_group_version(request(f"/openapi/v3/{key}?hash=ABC"))
    assert response.text == "proxied"
    assert world.proxy.calls == [(f"/openapi/v3/{key}?hash=ABC", NAME)]
    world.registration.set(_unavailable(world.route))
    with pytest.raises(StatusError) as err:
        await world.served.v3_group_version(request(f"/openapi/v3/{key}"))
    assert err.value.code == 404


async def test_a_local_group_version_stays_local(world):
    world.backend.v3_key = "api/v1"  # a backend claiming a group version the gateway serves
    world.registration.set(world.route)
    await world.downloads.sync(NAME)
    index = json.loads((await world.served.v3_index(request("/openapi/v3"))).body)
    assert index["paths"]["api/v1"] == world.local.v3_paths()["api/v1"]
    response = await world.served.v3_group_version(request("/openapi/v3/api/v1"))
    assert response.status == 200 and world.proxy.calls == []
    assert "io.k8s.api.core.v1.ConfigMap" in json.loads(response.body)["components"]["schemas"]


def test_downloads_observe_the_registration():
    registration = Registration()
    downloads = OpenAPIDownloads(registration, ClientManager(), Resolver(1))  # type: ignore
    assert downloads._observed in registration.observers
