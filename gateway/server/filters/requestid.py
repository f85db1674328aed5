"""Give every request an id (kube's Audit-ID) and bind it to every log line while it runs.

A client may send its own ``Audit-ID``; otherwise a UUID is made. The id goes back in the
``Audit-ID`` response header, as kube-apiserver does, so a user can quote it. Being the
outermost filter, it also gives an unprepared response the headers every filter asked for
(``gateway.apimachinery.context.RESPONSE_HEADERS``); a streamed one got them when prepared.
"""

from __future__ import annotations

import re

import structlog
from aiohttp import web

from gateway.apimachinery.context import apply_response_headers, response_headers
from gateway.apimachinery.uuids import new_uuid
from gateway.server.request import ChainHandler, Request, Response

REQUEST_ID = "gateway.request_id"
_ACCEPTABLE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
#: structlog's context variable for ``request_id`` (what bind_contextvars(request_id=...)
#: sets; merge_contextvars puts it on every log line), set and reset directly per request.
_token = structlog.contextvars.bind_contextvars(request_id="")["request_id"]
_REQUEST_ID_VAR = _token.var
_REQUEST_ID_VAR.reset(_token)
def request_id_for(given: str) -> str:
    """The client's Audit-ID when it is an acceptable one, else a new id."""
    return given if given and _ACCEPTABLE.match(given) else new_uuid()


def with_request_id(handler: ChainHandler) -> ChainHandler:
    async def request_id_filter(request: Request) -> Response:
        request_id = request_id_for(request.headers.get("Audit-ID", ""))
        request[REQUEST_ID] = request_id
        response_headers(request)["Audit-ID"] = request_id
        token = _REQUEST_ID_VAR.set(request_id)
        try:
            response = await handler(request)
        finally:
            _REQUEST_ID_VAR.reset(token)
        # the outermost filter: every filter's headers, on a Status made from an error too
        # (only aiohttp's responses can still take them: the lane's own is always prepared)
        if isinstance(response, web.StreamResponse):
            apply_response_headers(request, response)
        return response

    return request_id_filter
