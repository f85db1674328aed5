"""Classify each request once (verb, group, version, resource...) for everything after it.

The proxy's fast lane classifies a request before taking it (it takes no long-running ones);
it hands its classification along, and it is not made twice."""

from __future__ import annotations

from gateway.apimachinery.context import REQUEST_INFO
from gateway.apimachinery.requestinfo import parse_request_info
from gateway.server.request import ChainHandler, Request, Response


def with_request_info(handler: ChainHandler) -> ChainHandler:
    async def request_info_filter(request: Request) -> Response:
        if REQUEST_INFO not in request:
            request[REQUEST_INFO] = parse_request_info(
                request.method, request.path, request.query_string
            )
        return await handler(request)

    return request_info_filter
