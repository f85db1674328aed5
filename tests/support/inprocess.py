"""In-process TLS servers for the unit tests of the outgoing client, the proxy and the
availability controller: a real aiohttp HTTPS backend (mTLS, its certificate naming only the
Service ``api.backends.svc``, never 127.0.0.1, so a test passes only when the server name is
checked as the Service's), the PKI around it, and a raw TLS upgrade server."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, Pair, issue_pair, pem

SERVICE_NAMESPACE = "backends"
SERVICE_NAME = "api"
SERVER_NAME = f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc"
PROXY_CLIENT_CN = "front-proxy-client"


@dataclass
class PKI:
    """A backend CA and serving pair, and a front-proxy CA and client pair, as files."""

    backend_ca: Issuer
    serving: Pair
    proxy_ca: Issuer
    proxy_client: Pair
    dir: Path

    @classmethod
    def make(cls, workdir: Path) -> PKI:
        backend_ca = Issuer.new("backend-ca")
        serving = issue_pair(workdir, "serving", SERVER_NAME, backend_ca,
                             usages=(SERVER_AUTH,), sans=(SERVER_NAME,))
        proxy_ca = Issuer.new("front-proxy-ca")
        client = issue_pair(workdir, "proxy-client", PROXY_CLIENT_CN, proxy_ca,
                            usages=(CLIENT_AUTH,))
        return cls(backend_ca, serving, proxy_ca, client, workdir)

    @property
    def ca_bundle(self) -> bytes:
        return pem(self.backend_ca.cert)

    @property
    def ca_bundle_b64(self) -> str:
        return base64.b64encode(self.ca_bundle).decode()

    def server_context(self, *, require_client: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.serving.cert, self.serving.key)
        if require_client:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=pem(self.proxy_ca.cert).decode())
        return context


def peer_cn(request: web.BaseRequest) -> str:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport else None
    cert = ssl_object.getpeercert() if ssl_object else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return ""


@dataclass
class Backend:
    """An extension apiserver stand-in: HTTPS with required client certificates.

    Paths (under any prefix): ``/apis/<g>/<v>`` discovery; ``.../echo`` what it received;
    ``.../watch`` one event, then one more per ``release`` set; ``.../big?size=N`` N bytes;
    ``.../upload`` the size of what it read; ``.../redirect``; ``.../cors``; ``.../code/<n>``;
    ``.../ws`` a WebSocket echo; ``.../slow`` answers after ``slow_seconds``. Discovery answers
    ``discovery_code`` after ``discovery_delay``."""

    pki: PKI
    port: int = 0
    require_client: bool = True
    received: list[dict[str, Any]] = field(default_factory=list)
    discovery_code: int = 200
    discovery_delay: float = 0.0
    slow_seconds: float = 10.0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    async def start(self) -> Backend:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port,
                           ssl_context=self.pki.server_context(
                               require_client=self.require_client))
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        record = {"method": request.method, "path": path,
                  "query": request.rel_url.raw_query_string,
                  "headers": [[k, v] for k, v in request.headers.items()],
                  "client_cn": peer_cn(request)}
        self.received.append(record)
        leaf = path.rstrip("/").rsplit("/", 1)[-1]
        if (path.count("/") == 3 and path.startswith("/apis/")) or path == "/api/v1":
            if self.discovery_delay:
                await asyncio.sleep(self.discovery_delay)
            if self.discovery_code != 200:
                return web.Response(status=self.discovery_code, text="no")
            return web.json_response({"kind": "APIResourceList", "groupVersion": path[6:],
                                      "resources": []})
        if leaf == "echo":
            body = await request.read()
            record["body"] = body.decode("latin-1")
            return web.json_response(record, headers={"X-Backend": "yes",
                                                      "Set-Cookie": "a=1"})
        if leaf == "watch":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(b'{"type":"ADDED","object":{"n":1}}\n')
            await self.release.wait()
            await response.write(b'{"type":"ADDED","object":{"n":2}}\n')
            await response.write_eof()
            return response
        if leaf == "big":
            size = int(request.query.get("size", "0"))
            response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            response.content_length = size
            await response.prepare(request)
            chunk = b"x" * 65536
            sent = 0
            while sent < size:
                piece = chunk[:min(len(chunk), size - sent)]
                await response.write(piece)
                sent += len(piece)
            await response.write_eof()
            return response
        if leaf == "upload":
            total = 0
            async for data in request.content.iter_any():
                total += len(data)
            return web.json_response({"read": total})
        if leaf == "redirect":
            raise web.HTTPFound("https://elsewhere.example/")
        if leaf == "cors":
            return web.Response(text="cors", headers={
                "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET",
                "Access-Control-Allow-Headers": "X", "Access-Control-Allow-Credentials": "true",
                "Access-Control-Expose-Headers": "Date"})
        if path.rsplit("/", 2)[-2] == "code":
            return web.Response(status=int(leaf), text=f"code {leaf}")
        if leaf == "ws":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for message in ws:
                await ws.send_str("echo:" + message.data)
            return ws
        if leaf == "slow":
            await asyncio.sleep(self.slow_seconds)
            return web.Response(text="slow")
        return web.Response(status=404, text="404 page not found\n")

    def headers_of(self, index: int = -1) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.received[index]["headers"]]


class RawUpgradeBackend:
    """A TLS server answering every request head with ``answer`` (a 101 by default, then an
    echo of every byte received, upper-cased), as an SPDY or other raw upgrade would."""

    def __init__(self, pki: PKI, answer: bytes = b"") -> None:
        self.pki = pki
        self.answer = answer or (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                                 b"Upgrade: SPDY/3.1\r\n\r\n")
        self.heads: list[bytes] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> RawUpgradeBackend:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0,
                                                  ssl=self.pki.server_context())
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.heads.append(head)
            writer.write(self.answer)
            await writer.drain()
            if not self.answer.startswith(b"HTTP/1.1 101"):
                writer.close()
                return
            while data := await reader.read(65536):
                writer.write(data.upper())
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def json_lines(data: bytes) -> list[Any]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]
