"""The test extension apiserver (tests/support/backend.py), driven directly over mutual TLS
with client certificates from a test front-proxy CA, as the gateway will drive it."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
import yaml
from aiohttp import web

from tests.support.backend import (
    APISERVICE_NAME,
    DISCOVERY_V2,
    GV_PATH,
    BackendProcess,
    parse_quantity,
)
from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, Pair, issue_pair, pem

FLUNDERS = f"{GV_PATH}/namespaces/x/flunders"
USER = {"X-Remote-User": "alice", "X-Remote-Group": "devs"}


@dataclass(frozen=True)
class PKI:
    ca_file: Path
    proxy: Pair  # CN front-proxy-client, from the request-header CA
    other_cn: Pair  # same CA, a CN not allowed
    stranger: Pair  # CN front-proxy-client, from another CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    out = tmp_path_factory.mktemp("front-proxy")
    ca = Issuer.new("front-proxy-ca")
    (out / "front-proxy-ca.crt").write_bytes(pem(ca.cert))
    return PKI(out / "front-proxy-ca.crt",
               issue_pair(out, "proxy", "front-proxy-client", ca, usages=(CLIENT_AUTH,)),
               issue_pair(out, "other", "someone-else", ca, usages=(CLIENT_AUTH,)),
               issue_pair(out, "stranger", "front-proxy-client", Issuer.new("other-ca"),
                          usages=(CLIENT_AUTH,)))


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[BackendProcess]:
    with BackendProcess(tmp_path_factory.mktemp("backend"), requestheader_ca=pki.ca_file) as b:
        yield b


def call(backend: BackendProcess, pki: PKI, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None, cert: Any = "proxy") -> tuple[int, Any]:
    """As alice through the front proxy unless told otherwise; (status, JSON or text)."""
    code, raw, _ = backend.request(method, path, body, USER if headers is None else headers,
                                   cert=pki.proxy if cert == "proxy" else cert)
    try:
        return code, json.loads(raw)
    except ValueError:
        return code, raw.decode()


def connection(backend: BackendProcess, cert: Pair | None) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection("127.0.0.1", backend.port, timeout=10,
                                       context=backend.ssl_context(cert))


# -- authentication ---------------------------------------------------------------------------

def test_identity_comes_from_headers_with_the_front_proxy_certificate(backend, pki):
    backend.clear_requests()
    conn = connection(backend, pki.proxy)
    conn.putrequest("GET", f"{FLUNDERS}/any/whoami?x=1")
    for name, value in [("X-Remote-User", "alice"), ("X-Remote-Group", "devs"),
                        ("X-Remote-Group", "ops"), ("X-Remote-Extra-Scopes", "a"),
                        ("X-Remote-Extra-Scopes", "b"),
                        ("X-Remote-Extra-" + quote("example.com/team", safe=""), "blue")]:
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    body = json.loads(response.read())
    assert response.status == 200, body
    assert (body["user"], body["groups"], body["authenticated"]) == ("alice", ["devs", "ops"],
                                                                     True)
    assert body["extra"] == {"scopes": ["a", "b"], "example.com/team": ["blue"]}
    assert response.getheader("Access-Control-Allow-Origin") == "*"
    [seen] = backend.requests(f"{FLUNDERS}/any/whoami")
    assert (seen.method, seen.query, seen.user, seen.client_cn) == (
        "GET", "x=1", "alice", "front-proxy-client")
    assert seen.header_all("x-remote-group") == ["devs", "ops"]
    assert seen.header("X-Remote-User") == "alice"


def test_headers_without_a_client_certificate_are_anonymous(backend, pki):
    backend.clear_requests()
    code, body = call(backend, pki, "GET", FLUNDERS, cert=None)
    assert code == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    [seen] = backend.requests(FLUNDERS)
    assert (seen.user, seen.groups, seen.authenticated, seen.client_cn) == (
        "system:anonymous", ["system:unauthenticated"], False, None)
    assert seen.header("X-Remote-User") == "alice"  # it arrived, and did not count


def test_headers_with_a_certificate_whose_cn_is_not_allowed_are_anonymous(backend, pki):
    backend.clear_requests()
    code, body = call(backend, pki, "GET", FLUNDERS, cert=pki.other_cn)
    assert code == 401, body
    [seen] = backend.requests(FLUNDERS)
    assert (seen.user, seen.client_cn) == ("system:anonymous", "someone-else")
    assert "not allowed" in seen.reason


def test_front_proxy_certificate_without_a_user_header_is_anonymous(backend, pki):
    code, _ = call(backend, pki, "GET", FLUNDERS, headers={})
    assert code == 401


def test_a_certificate_from_another_ca_fails_the_handshake(backend, pki):
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        conn = connection(backend, pki.stranger)
        conn.request("GET", FLUNDERS, headers=USER)
        conn.getresponse().read()


def test_health_and_discovery_are_open_to_anonymous(backend, pki):
    for path in ("/healthz", "/readyz", "/livez"):
        code, body = call(backend, pki, "GET", path, cert=None)
        assert (code, body) == (200, "ok")
    code, body = call(backend, pki, "GET", "/version", cert=None)
    assert code == 200 and body["major"] == "1"


# -- discovery --------------------------------------------------------------------------------

def test_legacy_discovery(backend, pki):
    code, groups = call(backend, pki, "GET", "/apis", cert=None)
    assert code == 200 and groups["kind"] == "APIGroupList"
    version = {"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"}
    assert groups["groups"] == [{"name": "wardle.example.com", "versions": [version],
                                 "preferredVersion": version}]
    code, group = call(backend, pki, "GET", "/apis/wardle.example.com")
    assert (code, group["kind"], group["preferredVersion"]) == (200, "APIGroup", version)
    code, resources = call(backend, pki, "GET", GV_PATH)
    assert (code, resources["kind"], resources["groupVersion"]) == (
        200, "APIResourceList", "wardle.example.com/v1alpha1")
    [flunders] = resources["resources"]
    assert flunders["name"] == "flunders" and flunders["kind"] == "Flunder"
    assert flunders["namespaced"] is True and flunders["shortNames"] == ["fl"]
    assert flunders["categories"] == ["wardle"]
    assert {"get", "list", "watch", "create", "delete"} <= set(flunders["verbs"])


def test_aggregated_discovery_with_etag(backend, pki):
    accept = f"{DISCOVERY_V2},application/json"
    code, raw, headers = backend.request("GET", "/apis", headers={"Accept": accept})
    assert code == 200 and headers["Content-Type"] == DISCOVERY_V2
    document = json.loads(raw)
    assert (document["apiVersion"], document["kind"]) == ("apidiscovery.k8s.io/v2",
                                                          "APIGroupDiscoveryList")
    [group] = document["items"]
    assert group["metadata"]["name"] == "wardle.example.com"
    [version] = group["versions"]
    assert version["version"] == "v1alpha1" and version["freshness"] == "Current"
    [resource] = version["resources"]
    assert resource["resource"] == "flunders" and resource["scope"] == "Namespaced"
    assert resource["responseKind"] == {"group": "wardle.example.com", "version": "v1alpha1",
                                        "kind": "Flunder"}
    etag = headers["ETag"]
    code, raw, headers = backend.request("GET", "/apis", headers={
        "Accept": accept, "If-None-Match": etag})
    assert (code, raw, headers["ETag"]) == (304, b"", etag)
    code, raw, headers = backend.request("GET", "/apis", headers={"Accept": "application/json"})
    assert code == 200 and json.loads(raw)["kind"] == "APIGroupList"


# -- OpenAPI ----------------------------------------------------------------------------------

def test_openapi_v2(backend, pki):
    code, raw, headers = backend.request("GET", "/openapi/v2")
    spec = json.loads(raw)
    assert code == 200 and spec["swagger"] == "2.0"
    flunder = spec["definitions"]["com.example.wardle.v1alpha1.Flunder"]
    assert flunder["x-kubernetes-group-version-kind"] == [
        {"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"}]
    assert f"{GV_PATH}/namespaces/{{namespace}}/flunders/{{name}}" in spec["paths"]
    code, _, _ = backend.request("GET", "/openapi/v2", headers={"If-None-Match":
                                                                headers["ETag"]})
    assert code == 304


def test_openapi_v3(backend, pki):
    code, root = call(backend, pki, "GET", "/openapi/v3", cert=None)
    assert code == 200
    url = root["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/wardle.example.com/v1alpha1?hash=")
    code, raw, headers = backend.request("GET", url)
    document = json.loads(raw)
    assert code == 200 and document["openapi"].startswith("3.")
    assert "immutable" in headers["Cache-Control"]
    assert "com.example.wardle.v1alpha1.Flunder" in document["components"]["schemas"]


# -- flunders ---------------------------------------------------------------------------------

def flunder(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
            "metadata": {"name": name, "labels": labels}, "spec": {"reference": "x"}}


def test_create_get_list_update_patch_delete(backend, pki):
    path = f"{GV_PATH}/namespaces/crud/flunders"
    code, created = call(backend, pki, "POST", path, flunder("one", tier="a"))
    assert code == 201, created
    meta = created["metadata"]
    assert meta["namespace"] == "crud" and meta["uid"] and meta["creationTimestamp"]
    assert (created["apiVersion"], created["kind"]) == ("wardle.example.com/v1alpha1",
                                                        "Flunder")
    code, body = call(backend, pki, "POST", path, flunder("one"))
    assert (code, body["reason"]) == (409, "AlreadyExists")
    assert call(backend, pki, "POST", path, flunder("two", tier="b"))[0] == 201
    code, got = call(backend, pki, "GET", f"{path}/one")
    assert (code, got) == (200, created)

    _, listed = call(backend, pki, "GET", path)
    assert listed["kind"] == "FlunderList" and int(listed["metadata"]["resourceVersion"]) >= \
        int(meta["resourceVersion"])
    assert [i["metadata"]["name"] for i in listed["items"]] == ["one", "two"]
    code, listed = call(backend, pki, "GET", f"{path}?labelSelector=tier%3Db")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["two"]
    code, page = call(backend, pki, "GET", f"{path}?limit=1")
    assert len(page["items"]) == 1 and page["metadata"]["remainingItemCount"] == 1
    code, rest = call(backend, pki, "GET", f"{path}?limit=1&continue="
                      + quote(page["metadata"]["continue"]))
    assert [i["metadata"]["name"] for i in rest["items"]] == ["two"]
    code, table = call(backend, pki, "GET", path, headers={
        **USER, "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    assert table["kind"] == "Table" and [r["cells"][0] for r in table["rows"]] == ["one", "two"]

    stale = {**created, "spec": {"reference": "y"}}
    code, updated = call(backend, pki, "PUT", f"{path}/one", stale)
    assert code == 200 and updated["metadata"]["generation"] == 2
    code, body = call(backend, pki, "PUT", f"{path}/one", stale)
    assert (code, body["reason"]) == (409, "Conflict")
    code, patched = call(backend, pki, "PATCH", f"{path}/one",
                         json.dumps({"metadata": {"labels": {"p": "q"}}}).encode(),
                         {**USER, "Content-Type": "application/merge-patch+json"})
    assert code == 200 and patched["metadata"]["labels"] == {"tier": "a", "p": "q"}

    code, deleted = call(backend, pki, "DELETE", f"{path}/one")
    assert code == 200 and deleted["metadata"]["name"] == "one"
    code, body = call(backend, pki, "GET", f"{path}/one")
    assert (code, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert body["message"] == 'flunders.wardle.example.com "one" not found'
    code, body = call(backend, pki, "GET", f"{GV_PATH}/widgets")
    assert (code, body["reason"]) == (404, "NotFound")


def test_finalizers_hold_a_deleted_object_until_they_go(backend, pki):
    path = f"{GV_PATH}/namespaces/finalizing/flunders"
    held = {**flunder("held"), "metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    assert call(backend, pki, "POST", path, held)[0] == 201
    assert call(backend, pki, "POST", path, flunder("free"))[0] == 201

    code, listed = call(backend, pki, "DELETE", path)  # deletecollection
    assert code == 200 and sorted(i["metadata"]["name"] for i in listed["items"]) == [
        "free", "held"]
    _, listed = call(backend, pki, "GET", path)
    [left] = listed["items"]
    assert left["metadata"]["name"] == "held" and left["metadata"]["deletionTimestamp"]
    marked = left["metadata"]["deletionTimestamp"]
    code, again = call(backend, pki, "DELETE", f"{path}/held")
    assert code == 200 and again["metadata"]["deletionTimestamp"] == marked

    code, updated = call(backend, pki, "PATCH", f"{path}/held",
                         json.dumps({"metadata": {"labels": {"a": "b"}}}).encode(),
                         {**USER, "Content-Type": "application/merge-patch+json"})
    assert code == 200 and updated["metadata"]["deletionTimestamp"] == marked, "kept"
    code, _ = call(backend, pki, "PATCH", f"{path}/held",
                   json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]).encode(),
                   {**USER, "Content-Type": "application/json-patch+json"})
    assert code == 200
    assert call(backend, pki, "GET", f"{path}/held")[0] == 404, "gone with its last finalizer"


def test_behave_by_method(backend, pki):
    path = f"{GV_PATH}/namespaces/by-method/flunders"
    try:
        backend.behave(statuses={f"DELETE {path}": 405, f"DELETE {path}/*": 403, path: 500})
        code, body = call(backend, pki, "DELETE", path)
        assert (code, body["reason"], body["message"]) == (405, "MethodNotAllowed",
                                                           "told to answer 405")
        code, body = call(backend, pki, "DELETE", f"{path}/x")
        assert (code, body["reason"]) == (403, "Forbidden")
        assert call(backend, pki, "GET", path)[0] == 500, "a key of any method"
        assert call(backend, pki, "GET", f"{path}/x")[0] == 404, "not matched: served"
    finally:
        backend.behave()


def read_events(response: http.client.HTTPResponse, count: int) -> list[dict[str, Any]]:
    return [json.loads(response.readline()) for _ in range(count)]


def test_watch_streams_events_one_by_one(backend, pki):
    path = f"{GV_PATH}/namespaces/watched/flunders"
    call(backend, pki, "POST", path, flunder("before"))
    _, listed = call(backend, pki, "GET", path)
    conn = connection(backend, pki.proxy)
    conn.request("GET", f"{path}?watch=1&resourceVersion="
                 f"{listed['metadata']['resourceVersion']}", headers=USER)
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Transfer-Encoding") == "chunked"
    _, created = call(backend, pki, "POST", path, flunder("a"))
    [added] = read_events(response, 1)  # arrives before anything else happens
    assert (added["type"], added["object"]) == ("ADDED", created)
    call(backend, pki, "PUT", f"{path}/a", {**created, "spec": {"reference": "z"}})
    call(backend, pki, "DELETE", f"{path}/a")
    modified, deleted = read_events(response, 2)
    assert (modified["type"], modified["object"]["spec"]) == ("MODIFIED", {"reference": "z"})
    assert deleted["type"] == "DELETED" and deleted["object"]["metadata"]["name"] == "a"
    conn.close()

    # without a resourceVersion: the current state as ADDED first
    conn = connection(backend, pki.proxy)
    conn.request("GET", f"{path}?watch=true&timeoutSeconds=1", headers=USER)
    response = conn.getresponse()
    events = [json.loads(line) for line in response.read().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "before")]


def test_bulk_list_streams_in_chunks(backend, pki):
    conn = connection(backend, pki.proxy)
    conn.request("GET", f"{FLUNDERS}?bulk=50Mi", headers=USER)
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert response.getheader("Content-Length") is None
    total, head, tail = 0, b"", b""
    while chunk := response.read(1 << 20):
        head = head or chunk[:200]
        tail = (tail + chunk)[-200:]
        total += len(chunk)
    assert total >= parse_quantity("50Mi")
    assert head.startswith(b'{"kind":"FlunderList"') and tail.endswith(b"}]}")

    code, small = call(backend, pki, "GET", f"{FLUNDERS}?bulk=100Ki")
    assert code == 200 and len(small["items"]) >= 6
    assert small["items"][0]["metadata"]["name"] == "bulk-0000000"


def test_redirect_slow_and_fail(backend, pki):
    conn = connection(backend, pki.proxy)
    conn.request("GET", f"{FLUNDERS}/y/redirect?to=https://elsewhere.test/", headers=USER)
    response = conn.getresponse()
    response.read()
    assert (response.status, response.getheader("Location")) == (302,
                                                                 "https://elsewhere.test/")
    code, body = call(backend, pki, "GET", f"{FLUNDERS}/y/slow?seconds=0.2")
    assert (code, body) == (200, {"slept": 0.2})
    code, body = call(backend, pki, "GET", f"{FLUNDERS}/y/fail?code=503&reason=Busy")
    assert (code, body["code"], body["reason"]) == (503, 503, "Busy")


async def test_websocket_echo(backend, pki):
    context = backend.ssl_context(pki.proxy)
    async with aiohttp.ClientSession() as session, session.ws_connect(
            f"{backend.url}{FLUNDERS}/y/echo", ssl=context, headers=USER,
            protocols=("v5.channel.k8s.io", "v4.channel.k8s.io")) as ws:
        assert ws.protocol == "v5.channel.k8s.io"
        await ws.send_str("hello")
        assert await ws.receive_str(timeout=5) == "hello"
        await ws.send_bytes(b"\x00\x01binary")
        assert await ws.receive_bytes(timeout=5) == b"\x00\x01binary"
    [seen] = backend.requests(f"{FLUNDERS}/y/echo")[-1:]
    assert seen.user == "alice" and seen.header("Upgrade").lower() == "websocket"


async def test_websocket_echo_is_refused_to_anonymous(backend):
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await session.ws_connect(f"{backend.url}{FLUNDERS}/y/echo",
                                     ssl=backend.ssl_context())
    assert err.value.status == 401


# -- the process ------------------------------------------------------------------------------

def test_kill_and_restart_on_the_same_port(tmp_path, pki):
    with BackendProcess(tmp_path, requestheader_ca=pki.ca_file) as b:
        port, bundle = b.port, b.ca_bundle_b64
        assert call(b, pki, "POST", FLUNDERS, flunder("gone"))[0] == 201
        b.kill()
        assert not b.alive()
        with pytest.raises(OSError):
            b.request("GET", "/healthz", timeout=5)
        b.restart()
        assert (b.port, b.ca_bundle_b64) == (port, bundle)
        assert call(b, pki, "GET", f"{FLUNDERS}/gone")[0] == 404  # memory is not kept
        assert [r.method for r in b.requests(FLUNDERS)] == ["POST"]  # the log is


class ConfigMapServer:
    """The core apiserver as far as an extension apiserver's start-up is concerned."""

    def __init__(self, workdir: Path, data: dict[str, str]) -> None:
        ca = Issuer.new("core-ca")
        pair = issue_pair(workdir, "core", "localhost", ca, usages=(SERVER_AUTH,),
                          sans=("127.0.0.1",))
        self.ca_pem = pem(ca.cert)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(pair.cert, pair.key)
        self.data = data
        self.port = 0
        self.seen: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConfigMapServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def handle(request: web.Request) -> web.Response:
            self.seen.append(request.headers.get("Authorization", ""))
            return web.json_response({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
                "name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": self.data})

        app = web.Application()
        app.router.add_get("/api/v1/namespaces/kube-system/configmaps/"
                           "extension-apiserver-authentication", handle)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.context)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "core",
            "clusters": [{"name": "core", "cluster": {
                "server": f"https://127.0.0.1:{self.port}",
                "certificate-authority-data": base64.b64encode(self.ca_pem).decode()}}],
            "users": [{"name": "admin", "user": {"token": "admin-token"}}],
            "contexts": [{"name": "core", "context": {"cluster": "core", "user": "admin"}}]}))
        return path


def test_trust_read_from_the_extension_apiserver_authentication_configmap(tmp_path, pki):
    data = {"requestheader-client-ca-file": pki.ca_file.read_text(),
            "requestheader-allowed-names": json.dumps(["someone-else"]),
            "requestheader-username-headers": json.dumps(["X-Remote-User"]),
            "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"])}
    with ConfigMapServer(tmp_path, data) as core, BackendProcess(
            tmp_path / "b", kubeconfig=core.kubeconfig(tmp_path / "kubeconfig")) as b:
        assert core.seen == ["Bearer admin-token"]
        code, body = call(b, pki, "GET", f"{FLUNDERS}/y/whoami", cert=pki.other_cn)
        assert (code, body["user"]) == (200, "alice")
        assert call(b, pki, "GET", f"{FLUNDERS}/y/whoami")[0] == 401  # CN not in the list


def test_manifests_register_the_backend(tmp_path, pki):
    b = BackendProcess(tmp_path, name="api", namespace="wardle", requestheader_ca=pki.ca_file)
    docs = list(yaml.safe_load_all(b.manifests_yaml("127.0.0.1", endpoint_slice=True)))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Namespace", "Service", "Endpoints", "EndpointSlice", "APIService"]
    service, endpoints, apiservice = docs[1], docs[2], docs[4]
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP",
                                         "targetPort": b.port}]
    assert endpoints["subsets"] == [{"addresses": [{"ip": "127.0.0.1"}], "ports": [
        {"name": "https", "port": b.port, "protocol": "TCP"}]}]
    assert apiservice["metadata"]["name"] == APISERVICE_NAME == "v1alpha1.wardle.example.com"
    assert apiservice["spec"]["service"] == {"namespace": "wardle", "name": "api", "port": 443}
    assert apiservice["spec"]["caBundle"] == b.ca_bundle_b64
    assert (apiservice["spec"]["groupPriorityMinimum"], apiservice["spec"]["versionPriority"]) \
        == (1000, 15)
    assert b"BEGIN CERTIFICATE" in base64.b64decode(b.ca_bundle_b64)
    assert b.service_host == "api.wardle.svc"


def test_serving_certificate_names_the_service(backend):
    """What the aggregator checks: ServerName <name>.<namespace>.svc, the APIService's
    caBundle as the only trust."""
    context = ssl.create_default_context(cadata=base64.b64decode(backend.ca_bundle_b64).decode())
    with socket.create_connection(("127.0.0.1", backend.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="api.wardle.svc") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_behave_delays_and_fails_chosen_paths(backend, pki):
    try:
        backend.behave(statuses={GV_PATH: 503}, delays={f"{FLUNDERS}/*": 0.3})
        code, body = call(backend, pki, "GET", GV_PATH)
        assert (code, body["code"]) == (503, 503)
        assert call(backend, pki, "GET", "/apis/wardle.example.com")[0] == 200
        code, raw, _ = backend.request("GET", f"{FLUNDERS}/y/whoami", headers=USER,
                                       cert=pki.proxy, timeout=0.1)
    except TimeoutError:
        pass  # the delay held it
    else:
        raise AssertionError(f"answered at once: {code} {raw!r}")
    finally:
        backend.behave()
    assert call(backend, pki, "GET", GV_PATH)[0] == 200


def test_stop_does_not_wait_for_open_watches(tmp_path, pki):
    b = BackendProcess(tmp_path, requestheader_ca=pki.ca_file).start()
    conn = connection(b, pki.proxy)
    conn.request("GET", f"{FLUNDERS}?watch=1", headers=USER)
    assert conn.getresponse().status == 200
    assert b.stop(timeout=8) == 0  # not SIGKILLed after the timeout
    conn.close()
