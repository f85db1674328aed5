"""The calibration point for bench/proxy.py: the naive aiohttp reverse proxy.

TLS in, the bearer token compared, X-Remote-User set, and the request sent on through aiohttp's
own client over mTLS (one pooled session, no connection cap), the body read whole and answered.
No authorization, audit, metrics or flow control: what "an aiohttp proxy" costs before any of
the gateway's work.

    python bench/naive_proxy.py PORT BACKEND_PORT CERT KEY BACKEND_CA CLIENT_CERT CLIENT_KEY TOKEN
"""

from __future__ import annotations

import asyncio
import ssl
import sys

from aiohttp import ClientSession, TCPConnector, web

SERVER_NAME = "api.wardle.svc"


async def serve(port: int, backend_port: int, cert: str, key: str, backend_ca: str,
                client_cert: str, client_key: str, token: str) -> None:
    outgoing = ssl.create_default_context(cafile=backend_ca)
    outgoing.load_cert_chain(client_cert, client_key)
    session = ClientSession(connector=TCPConnector(ssl=outgoing, limit=0),
                            auto_decompress=False)
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
    incoming = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    incoming.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=incoming).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    import uvloop

    port, backend_port, *rest = sys.argv[1:]
    uvloop.run(serve(int(port), int(backend_port), *rest))
