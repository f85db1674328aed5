"""Calibration points for bench/proxy.py: two Python reverse proxies that do the least a
proxy does, so that the gateway's figure can be read against what Python itself costs here.

- ``naive``: aiohttp's server and aiohttp's client. TLS in, the bearer token compared,
  X-Remote-User set, the request sent on over mTLS (one pooled session, no connection cap),
  the body read whole and answered.
- ``bare``: asyncio streams on both sides (uvloop), one coroutine per client connection,
  pooled backend connections; the request head is checked for the token and rewritten, the
  response head read for its Content-Length and passed back as it came. The floor of a Python
  proxy: no HTTP framework, no header objects.

Neither authorizes, audits, counts or limits anything.

    python bench/reference_proxies.py naive|bare PORT BACKEND_PORT CERT KEY BACKEND_CA \
        CLIENT_CERT CLIENT_KEY TOKEN
"""

from __future__ import annotations

import asyncio
import ssl
import sys

from aiohttp import ClientSession, TCPConnector, web

SERVER_NAME = "api.wardle.svc"


def _outgoing(backend_ca: str, client_cert: str, client_key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=backend_ca)
    context.load_cert_chain(client_cert, client_key)
    return context


def _incoming(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


async def naive(port: int, backend_port: int, cert: str, key: str, backend_ca: str,
                client_cert: str, client_key: str, token: str) -> None:
    session = ClientSession(connector=TCPConnector(
        ssl=_outgoing(backend_ca, client_cert, client_key), limit=0), auto_decompress=False)
    expected = f"Bearer {token}"
    backend = f"https://127.0.0.1:{backend_port}"

    async def forward(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401)
        async with session.request(request.method, backend + str(request.rel_url),
                                   headers={"Host": SERVER_NAME, "X-Remote-User": "bench"},
                                   server_hostname=SERVER_NAME) as answer:
            return web.Response(body=await answer.read(), status=answer.status,
                                content_type=answer.content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=_incoming(cert, key)).start()
    await asyncio.Event().wait()


async def bare(port: int, backend_port: int, cert: str, key: str, backend_ca: str,
               client_cert: str, client_key: str, token: str) -> None:
    outgoing = _outgoing(backend_ca, client_cert, client_key)
    credential = f"authorization: bearer {token}".encode()
    identity = f"\r\nHost: {SERVER_NAME}\r\nX-Remote-User: bench\r\n\r\n".encode()
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if credential not in head.lower():
                    writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
                    continue
                backend = idle.pop() if idle else await asyncio.open_connection(
                    "127.0.0.1", backend_port, ssl=outgoing, server_hostname=SERVER_NAME)
                backend[1].write(head.split(b"\r\n", 1)[0] + identity)
                answer = await backend[0].readuntil(b"\r\n\r\n")
                at = answer.lower().index(b"content-length:") + 15
                body = await backend[0].readexactly(int(answer[at:answer.index(b"\r\n", at)]))
                idle.append(backend)
                writer.write(answer + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    await asyncio.start_server(serve, "127.0.0.1", port, ssl=_incoming(cert, key))
    await asyncio.Event().wait()


if __name__ == "__main__":
    import uvloop

    mode, port, backend_port, *rest = sys.argv[1:]
    uvloop.run({"naive": naive, "bare": bare}[mode](int(port), int(backend_port), *rest))
