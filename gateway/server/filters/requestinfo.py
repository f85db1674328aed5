"""Classify each request once (verb, group, version, resource...) for everything after it."""

from __future__ import annotations

from aiohttp import web

from gateway.apimachinery.context import REQUEST_INFO
from gateway.apimachinery.requestinfo import parse_request_info
from gateway.server.genericapiserver import Handler


def with_request_info(handler: Handler) -> Handler:
    async def request_info_filter(request: web.BaseRequest) -> web.StreamResponse:
        request[REQUEST_INFO] = parse_request_info(
            request.method, request.path, request.query_string
        )
        return await handler(request)

    return request_info_filter
