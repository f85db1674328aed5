"""CORS for browsers: origins matching --cors-allowed-origins get kube-apiserver's CORS
headers, and their preflight OPTIONS requests are answered 204 before authentication."""

from __future__ import annotations

import re

from aiohttp import web

from gateway.apimachinery.context import response_headers
from gateway.server.request import ChainHandler, Request, Response

ALLOW_METHODS = "POST, GET, OPTIONS, PUT, DELETE, PATCH"
ALLOW_HEADERS = ("Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, "
                 "X-Requested-With, If-Modified-Since")


def with_cors(handler: ChainHandler, allowed_origins: list[str]) -> ChainHandler:
    if not allowed_origins:
        return handler
    patterns = [re.compile(p) for p in allowed_origins]

    async def cors_filter(request: Request) -> Response:
        origin = request.headers.get("Origin", "")
        if not origin or not any(p.search(origin) for p in patterns):
            return await handler(request)
        headers = {"Access-Control-Allow-Origin": origin,
                   "Access-Control-Allow-Methods": ALLOW_METHODS,
                   "Access-Control-Allow-Headers": ALLOW_HEADERS,
                   "Access-Control-Expose-Headers": "Date",
                   "Access-Control-Allow-Credentials": "true"}
        if request.method == "OPTIONS":
            return web.Response(status=204, headers=headers)
        response_headers(request).update(headers)  # before the handler: a watch has them too
        return await handler(request)

    return cors_filter
