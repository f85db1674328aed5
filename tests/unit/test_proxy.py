"""The proxy to APIService backends, between a real client and a real mTLS backend: identity
headers, forwarding headers, streaming both ways, kube's plain-text errors, upgrades."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import tracemalloc
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gateway.aggregator import proxy as proxy_module
from gateway.aggregator.metrics import AggregatorMetrics
from gateway.aggregator.proxy import Proxy, escape_extra_key
from gateway.aggregator.routes import Route, ServiceRef
from gateway.apimachinery.context import REQUEST_INFO, USER
from gateway.apimachinery.requestinfo import parse_request_info
from gateway.apimachinery.user import UserInfo
from gateway.server.filters.requestid import REQUEST_ID
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ResolveError, ServiceAddress
from tests.support.inprocess import (
    PKI,
    PROXY_CLIENT_CN,
    SERVER_NAME,
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    Backend,
    RawUpgradeBackend,
    json_lines,
)

USER_INFO = UserInfo("alice", "uid-1", ("devs", "system:authenticated"),
                     {"example.org/team": ("a", "b"), "50%": ("x",)})


class StaticResolver:
    """The ServiceResolver interface, answering one address (or failing)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.fail = False

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        if self.fail:
            raise ResolveError(f'service "{name}" not found')
        return ServiceAddress("127.0.0.1", self.port, f"{name}.{namespace}.svc")


class Front:
    """The gateway's side: a plain HTTP server whose handler leaves what the filters leave on
    a request (user, request info, request id) and calls the proxy."""

    def __init__(self, proxy: Proxy, route: Route) -> None:
        self.proxy = proxy
        self.route = route
        self.user: UserInfo | None = USER_INFO
        self.port = 0
        self._runner: web.ServerRunner | None = None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if self.user is not None:
            request[USER] = self.user
        request[REQUEST_INFO] = parse_request_info(request.method, request.path,
                                                   request.query_string)
        request[REQUEST_ID] = "audit-1"
        return await self.proxy.serve(request, self.route)

    async def start(self) -> Front:
        self._runner = web.ServerRunner(web.Server(self._handle, handler_cancellation=True),
                                        access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def route_for(pki: PKI, **kwargs) -> Route:
    return Route(name="v1.g.example.com", group="g.example.com", version="v1",
                 service=ServiceRef(SERVICE_NAMESPACE, SERVICE_NAME, 443),
                 ca_bundle=kwargs.pop("ca_bundle", pki.ca_bundle), available=True, **kwargs)


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    return PKI.make(tmp_path)


@pytest.fixture
async def backend(pki: PKI):
    server = await Backend(pki).start()
    yield server
    server.release.set()
    await server.stop()


@pytest.fixture
async def clients(pki: PKI):
    manager = ClientManager(pki.proxy_client.cert, pki.proxy_client.key)
    yield manager
    await manager.close()


@pytest.fixture
async def front(pki: PKI, backend: Backend, clients: ClientManager):
    resolver = StaticResolver(backend.port)
    server = await Front(Proxy(clients, resolver, AggregatorMetrics()), route_for(pki)).start()
    server.resolver = resolver  # type: ignore[attr-defined]
    yield server
    await server.stop()


@pytest.fixture
async def http():
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


def _values(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for k, v in headers if k.lower() == name.lower()]


def test_extra_keys_are_escaped_as_kube_escapes_them() -> None:
    assert escape_extra_key("example.org/team") == "example.org%2Fteam"
    assert escape_extra_key("50%") == "50%25"
    assert escape_extra_key("a b:c") == "a%20b%3Ac"
    assert escape_extra_key("ok-Key_1.~!#$&'*+^`|") == "ok-Key_1.~!#$&'*+^`|"
    assert escape_extra_key("ü") == "%C3%BC"


async def test_identity_and_forwarding_headers(front: Front, backend: Backend,
                                               http: aiohttp.ClientSession) -> None:
    sent = [("X-Remote-User", "mallory"), ("X-Remote-Group", "system:masters"),
            ("X-Remote-Uid", "0"), ("X-Remote-Extra-Scope", "all"),
            ("Authorization", "Bearer secret"), ("Impersonate-User", "root"),
            ("Impersonate-Extra-Scope", "x"), ("X-Forwarded-For", "10.9.9.9"),
            ("Keep-Alive", "timeout=5"), ("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"),
            ("Accept", "application/json"), ("X-Custom", "kept")]
    async with http.get(f"{front.url}/apis/g.example.com/v1/namespaces/x/things/echo"
                        "?b=2&a=1&a=0&sp=a+b", headers=sent) as response:
        assert response.status == 200
        assert response.headers["X-Backend"] == "yes"
        assert response.headers["Set-Cookie"] == "a=1"
        assert response.headers["Audit-ID"] == "audit-1"
        record = await response.json()
    headers = [(k, v) for k, v in record["headers"]]
    assert record["client_cn"] == PROXY_CLIENT_CN
    assert _values(headers, "X-Remote-User") == ["alice"]
    assert _values(headers, "X-Remote-Group") == ["devs", "system:authenticated"]
    assert _values(headers, "X-Remote-Extra-example.org%2Fteam") == ["a", "b"]
    assert _values(headers, "X-Remote-Extra-50%25") == ["x"]
    names = {k.lower() for k, _ in headers}
    for gone in ("x-remote-uid", "x-remote-extra-scope", "authorization", "impersonate-user",
                 "impersonate-extra-scope", "keep-alive", "x-hop"):
        assert gone not in names, gone
    assert _values(headers, "X-Forwarded-For") == ["10.9.9.9, 127.0.0.1"]
    assert _values(headers, "X-Forwarded-Proto") == ["https"]
    assert _values(headers, "X-Forwarded-Host") == [f"127.0.0.1:{backend.port}"]
    assert _values(headers, "X-Forwarded-Uri") == \
        ["/apis/g.example.com/v1/namespaces/x/things/echo"]
    assert _values(headers, "Audit-ID") == ["audit-1"]
    assert _values(headers, "Host") == [f"127.0.0.1:{backend.port}"]
    assert _values(headers, "Accept") == ["application/json"]
    assert _values(headers, "X-Custom") == ["kept"]
    assert record["path"] == "/apis/g.example.com/v1/namespaces/x/things/echo"
    assert record["query"] == "a=1&a=0&b=2&sp=a+b"  # Go's Query().Encode(): keys sorted


async def test_request_bodies_pass_through(front: Front, http: aiohttp.ClientSession) -> None:
    body = json.dumps({"kind": "Thing", "spec": {"n": 1}}).encode()
    async with http.post(f"{front.url}/apis/g.example.com/v1/things/echo", data=body,
                         headers={"Content-Type": "application/json"}) as response:
        record = await response.json()
    assert record["method"] == "POST"
    assert record["body"].encode() == body
    headers = [(k, v) for k, v in record["headers"]]
    assert _values(headers, "Content-Type") == ["application/json"]
    assert _values(headers, "Content-Length") == [str(len(body))]


async def test_a_streamed_upload_is_not_read_whole(front: Front,
                                                   http: aiohttp.ClientSession) -> None:
    size = 20 * 1024 * 1024

    async def chunks():
        piece = b"y" * 65536
        for _ in range(size // len(piece)):
            yield piece

    async with http.put(f"{front.url}/apis/g.example.com/v1/things/upload",
                        data=chunks()) as response:
        assert response.status == 200
        assert (await response.json())["read"] == size


async def test_a_watch_arrives_event_by_event(front: Front, backend: Backend,
                                              http: aiohttp.ClientSession) -> None:
    async with http.get(f"{front.url}/apis/g.example.com/v1/things/watch?watch=true") as r:
        assert r.status == 200
        first = await asyncio.wait_for(r.content.readline(), 10)
        assert json.loads(first)["object"] == {"n": 1}  # before the backend sent the second
        backend.release.set()
        second = await asyncio.wait_for(r.content.readline(), 10)
        assert json.loads(second)["object"] == {"n": 2}
        assert await r.content.read() == b""


async def test_a_large_list_passes_with_bounded_memory(front: Front,
                                                       http: aiohttp.ClientSession) -> None:
    size = 50 * 1024 * 1024
    received = 0
    tracemalloc.start()
    started = time.monotonic()
    try:
        async with http.get(f"{front.url}/apis/g.example.com/v1/things/big?size={size}") as r:
            assert r.status == 200
            assert r.headers["Content-Length"] == str(size)
            async for chunk in r.content.iter_any():
                received += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    assert received == size
    # backend, proxy and client all run in this process: all their buffers together
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes for a {size} byte body"
    print(f"50 MiB through the proxy in {elapsed:.2f}s, traced peak {peak / 2**20:.1f} MiB")


async def test_status_headers_and_body_pass_through(front: Front,
                                                    http: aiohttp.ClientSession) -> None:
    for code in (201, 404, 409, 500):
        async with http.get(f"{front.url}/apis/g.example.com/v1/code/{code}") as response:
            assert response.status == code
            assert await response.text() == f"code {code}"


async def test_cors_headers_of_the_backend_are_dropped(front: Front,
                                                       http: aiohttp.ClientSession) -> None:
    async with http.get(f"{front.url}/apis/g.example.com/v1/cors") as response:
        assert response.status == 200
        for gone in ("Origin", "Methods", "Headers", "Credentials"):
            assert f"Access-Control-Allow-{gone}" not in response.headers
        assert response.headers["Access-Control-Expose-Headers"] == "Date"


async def test_a_redirect_is_refused(front: Front, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{front.url}/apis/g.example.com/v1/redirect",
                        allow_redirects=False) as response:
        assert response.status == 502
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert "Location" not in response.headers
        # kube replaces the backend's answer whole, with this body and nothing more
        assert await response.text() == \
            "the backend attempted to redirect this request, which is not permitted"


async def test_a_service_that_does_not_resolve(front: Front,
                                               http: aiohttp.ClientSession) -> None:
    front.resolver.fail = True  # type: ignore[attr-defined]
    async with http.get(f"{front.url}/apis/g.example.com/v1/things") as response:
        assert response.status == 503
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert await response.text() == "service unavailable\n"


async def test_an_unreachable_backend(front: Front, backend: Backend,
                                      http: aiohttp.ClientSession) -> None:
    await backend.stop()
    async with http.get(f"{front.url}/apis/g.example.com/v1/things") as response:
        assert response.status == 503
        assert await response.text() == ("error trying to reach service: dial tcp "
                                         f"127.0.0.1:{backend.port}: connect: connection "
                                         "refused\n")
    samples = front.proxy.metrics.registry.get_sample_value(
        "aggregator_proxy_requests_total", {"name": "v1.g.example.com", "code": "503"})
    assert samples == 1


async def test_a_backend_not_signed_by_the_ca_bundle(front: Front, pki: PKI,
                                                     http: aiohttp.ClientSession) -> None:
    other = PKI.make(pki.dir / "other")
    front.route = route_for(pki, ca_bundle=other.ca_bundle)
    async with http.get(f"{front.url}/apis/g.example.com/v1/things") as response:
        assert response.status == 503
        assert await response.text() == ("error trying to reach service: tls: failed to "
                                         "verify certificate: x509: certificate signed by "
                                         "unknown authority\n")
    # insecureSkipTLSVerify reaches it anyway
    front.route = route_for(pki, ca_bundle=b"", insecure_skip_tls_verify=True)
    async with http.get(f"{front.url}/apis/g.example.com/v1/echo") as response:
        assert response.status == 200


async def test_discovery_has_a_deadline(front: Front, backend: Backend,
                                        http: aiohttp.ClientSession,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy_module, "DISCOVERY_TIMEOUT", 0.3)
    backend.slow_seconds = 0.8
    async with http.get(f"{front.url}/apis/g.example.com/v1/things/slow") as response:
        assert response.status == 200  # not discovery: no deadline of the proxy's
    backend.discovery_delay = 30
    async with http.get(f"{front.url}/apis/g.example.com/v1") as response:
        assert response.status == 503
        assert await response.text() == \
            "error trying to reach service: context deadline exceeded\n"


async def test_missing_user(front: Front, http: aiohttp.ClientSession) -> None:
    front.user = None
    async with http.get(f"{front.url}/apis/g.example.com/v1/things") as response:
        assert response.status == 500
        assert await response.text() == "missing user\n"


async def test_websocket_upgrade(front: Front, backend: Backend,
                                 http: aiohttp.ClientSession) -> None:
    async with http.ws_connect(f"{front.url}/apis/g.example.com/v1/things/ws",
                               headers={"Authorization": "Bearer secret"}) as ws:
        for text in ("one", "two"):
            await ws.send_str(text)
            message = await asyncio.wait_for(ws.receive(), 10)
            assert message.data == f"echo:{text}"
    headers = backend.headers_of()
    assert _values(headers, "X-Remote-User") == ["alice"]
    assert not _values(headers, "Authorization")
    assert _values(headers, "Upgrade") == ["websocket"]


async def _raw_upgrade(front: Front, path: str) -> tuple[asyncio.StreamReader,
                                                         asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\n"
                 "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
                 "Impersonate-User: root\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return reader, writer, head


async def test_raw_upgrade_relays_bytes_both_ways(pki: PKI, clients: ClientManager) -> None:
    backend = await RawUpgradeBackend(pki).start()
    front = await Front(Proxy(clients, StaticResolver(backend.port)), route_for(pki)).start()
    try:
        reader, writer, head = await _raw_upgrade(front, "/apis/g.example.com/v1/x/exec")
        assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
        assert b"Upgrade: SPDY/3.1" in head
        for data in (b"hello", b"world" * 10000):
            writer.write(data)
            assert await asyncio.wait_for(reader.readexactly(len(data)), 10) == data.upper()
        writer.close()
        sent = backend.heads[0].decode()
        assert "X-Remote-User: alice\r\n" in sent
        assert "Impersonate-User" not in sent
        assert "Connection: Upgrade\r\n" in sent and "Upgrade: SPDY/3.1\r\n" in sent
        assert "X-Forwarded-For: 127.0.0.1\r\n" in sent
    finally:
        await front.stop()
        await backend.stop()


@pytest.mark.parametrize(("answer", "code", "body"), [
    (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden", 403, b"forbidden"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 503,
     b"invalid upgrade response: status code 200\n"),
])
async def test_an_upgrade_the_backend_refuses(pki: PKI, clients: ClientManager, answer: bytes,
                                              code: int, body: bytes) -> None:
    backend = await RawUpgradeBackend(pki, answer).start()
    front = await Front(Proxy(clients, StaticResolver(backend.port)), route_for(pki)).start()
    try:
        reader, writer, head = await _raw_upgrade(front, "/apis/g.example.com/v1/x/exec")
        assert head.startswith(f"HTTP/1.1 {code} ".encode())
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        assert await asyncio.wait_for(reader.readexactly(length), 10) == body
        writer.close()
    finally:
        await front.stop()
        await backend.stop()


async def test_serving_reuses_one_tls_context(front: Front, clients: ClientManager,
                                              http: aiohttp.ClientSession) -> None:
    for _ in range(3):
        async with http.get(f"{front.url}/apis/g.example.com/v1/echo") as response:
            assert response.status == 200
    assert len(clients._contexts) == 1
    assert isinstance(next(iter(clients._contexts.values())), ssl.SSLContext)
    assert json_lines(b'{"a":1}\n') == [{"a": 1}]
    assert SERVER_NAME == "api.backends.svc"


# -- the lean keep-alive relay (bodiless GET/HEAD/DELETE/OPTIONS) ---------------------------------


class ScriptedBackend:
    """A raw HTTPS/1.1 keep-alive backend answering by path, counting its connections."""

    def __init__(self, pki: PKI) -> None:
        self.pki = pki
        self.connections = 0
        self.requests: list[bytes] = []
        self.drop_second = False  # a connection's 2nd request: closed unanswered (stale)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> ScriptedBackend:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0,
                                                  ssl=self.pki.server_context())
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                served += 1
                if self.drop_second and served == 2:
                    writer.close()
                    return
                method, path = head.split(b" ", 2)[:2]
                leaf = path.rsplit(b"/", 1)[-1]
                if leaf == b"chunked":
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                 b"X-Kind: chunked\r\n\r\n")
                    for piece in (b"hello ", b"chunked ", b"world" * 5000):
                        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        await writer.drain()
                    writer.write(b"0\r\nX-Trailer: t\r\n\r\n")
                elif leaf == b"large":
                    body = bytes(range(256)) * 1000
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                    writer.write(body)
                elif leaf in (b"204", b"304"):
                    writer.write(b"HTTP/1.1 " + leaf + b" X\r\nETag: \"e\"\r\n"
                                 b"Content-Length: 7\r\n\r\n" if leaf == b"304" else
                                 b"HTTP/1.1 204 No Content\r\nX-Empty: 1\r\n\r\n")
                elif leaf == b"die":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                    writer.write(b"y" * 1000)
                    await writer.drain()
                    writer.transport.abort()
                    return
                else:
                    body = b"ok:" + method + b":" + leaf
                    writer.write(b"HTTP/1.1 200 Fine\r\nContent-Length: %d\r\n"
                                 b"Keep-Alive: timeout=5\r\nAccess-Control-Allow-Origin: *\r\n"
                                 b"X-B: 1\r\n\r\n%s" % (len(body), body if method != b"HEAD"
                                                        else b""))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def scripted(pki: PKI, clients: ClientManager):
    backend = await ScriptedBackend(pki).start()
    front = await Front(Proxy(clients, StaticResolver(backend.port)), route_for(pki)).start()
    yield backend, front
    await front.stop()
    await backend.stop()


G = "/apis/g.example.com/v1/namespaces/x/things"


async def test_relay_reuses_one_connection(scripted, http: aiohttp.ClientSession) -> None:
    backend, front = scripted
    for method in ("GET", "GET", "DELETE", "OPTIONS", "GET"):
        async with http.request(method, f"{front.url}{G}/one") as response:
            assert response.status == 200
            assert response.reason == "Fine"
            assert await response.read() == f"ok:{method}:one".encode()
            assert response.headers["X-B"] == "1"
            assert response.headers["Audit-ID"] == "audit-1"
            assert "Keep-Alive" not in response.headers
            assert "Access-Control-Allow-Origin" not in response.headers
    assert backend.connections == 1
    assert front.proxy.clients.relay.opened == 1


async def test_relay_retries_a_stale_connection(scripted, http: aiohttp.ClientSession) -> None:
    backend, front = scripted
    backend.drop_second = True
    for _ in range(3):
        async with http.get(f"{front.url}{G}/one") as response:
            assert response.status == 200
            assert await response.read() == b"ok:GET:one"
    # each connection's second request is dropped and sent again on a fresh connection
    assert backend.connections == 3
    assert len(backend.requests) == 5


async def test_relay_chunked_and_large_bodies(scripted, http: aiohttp.ClientSession) -> None:
    backend, front = scripted
    for _ in range(2):
        async with http.get(f"{front.url}{G}/chunked") as response:
            assert response.status == 200
            assert response.headers["X-Kind"] == "chunked"
            assert await response.read() == b"hello chunked " + b"world" * 5000
        async with http.get(f"{front.url}{G}/large") as response:
            assert response.headers["Content-Length"] == "256000"
            assert await response.read() == bytes(range(256)) * 1000
    assert backend.connections == 1


async def test_relay_head_204_304_have_no_body(scripted, http: aiohttp.ClientSession) -> None:
    backend, front = scripted
    async with http.head(f"{front.url}{G}/one") as response:
        assert response.status == 200
        assert response.headers["Content-Length"] == "11"
    async with http.get(f"{front.url}{G}/204") as response:
        assert response.status == 204
        assert response.headers["X-Empty"] == "1"
        assert await response.read() == b""
    async with http.get(f"{front.url}{G}/304") as response:
        assert response.status == 304
        assert response.headers["ETag"] == '"e"'
        assert await response.read() == b""
    async with http.get(f"{front.url}{G}/one") as response:
        assert await response.read() == b"ok:GET:one"
    assert backend.connections == 1


async def test_relay_backend_dies_mid_body(scripted) -> None:
    backend, front = scripted
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    writer.write(f"GET {G}/die HTTP/1.1\r\nHost: gw\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Length: 100000" in head
    rest = await asyncio.wait_for(reader.read(), 10)  # until the connection is cut
    assert len(rest) < 100000 and b"HTTP/1.1" not in rest
    writer.close()
    assert backend.connections == 1
    assert front.proxy.clients.relay.idle_count() == 0


async def test_relay_sends_what_aiohttp_sends(front: Front, backend: Backend,
                                              http: aiohttp.ClientSession) -> None:
    sent = {"X-Forwarded-For": "10.0.0.1", "Accept": "application/json", "X-Custom": "1",
            "Connection": "keep-alive, X-Hop", "X-Hop": "1"}
    records = []
    for use_relay in (True, False):
        front.proxy.use_relay = use_relay
        for method in ("GET", "DELETE", "OPTIONS"):
            async with http.request(method, f"{front.url}{G}/echo?b=1&a=2",
                                    headers=sent) as response:
                assert response.status == 200
                headers = [(k, v) for k, v in response.headers.items()
                           if k not in ("Date", "Content-Length")]
                records.append((method, headers, (await response.json())["headers"]))
    assert records[:3] == records[3:]
