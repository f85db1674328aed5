"""Give every request an id (kube's Audit-ID) and bind it to every log line while it runs.

A client may send its own ``Audit-ID``; otherwise a UUID is made. The id goes back in the
``Audit-ID`` response header, as kube-apiserver does, so a user can quote it. Being the
outermost filter, it also gives an unprepared response the headers every filter asked for
(``gateway.apimachinery.context.RESPONSE_HEADERS``); a streamed one got them when prepared.
"""

from __future__ import annotations

import os
import re

import structlog
from aiohttp import web

from gateway.apimachinery.context import apply_response_headers, response_headers
from gateway.server.genericapiserver import Handler

REQUEST_ID = "gateway.request_id"
_ACCEPTABLE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
#: A version 4, RFC 4122 variant UUID from 128 random bits: these bits cleared, those set.
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UUID4_SET = (0x8000 << 48) | (0x4 << 76)
_bind = structlog.contextvars.bind_contextvars
_reset = structlog.contextvars.reset_contextvars


def new_request_id() -> str:
    """``str(uuid.uuid4())`` at half the cost (the same os.urandom bits, formatted directly)."""
    value = int.from_bytes(os.urandom(16), "big") & _UUID4_CLEAR | _UUID4_SET
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def request_id_for(given: str) -> str:
    """The client's Audit-ID when it is an acceptable one, else a new id."""
    return given if given and _ACCEPTABLE.match(given) else new_request_id()


def with_request_id(handler: Handler) -> Handler:
    async def request_id_filter(request: web.BaseRequest) -> web.StreamResponse:
        request_id = request_id_for(request.headers.get("Audit-ID", ""))
        request[REQUEST_ID] = request_id
        # bound_contextvars without its generator-based context manager: the same tokens reset
        response_headers(request)["Audit-ID"] = request_id
        tokens = _bind(request_id=request_id)
        try:
            response = await handler(request)
        finally:
            _reset(**tokens)
        # the outermost filter: every filter's headers, on a Status made from an error too
        apply_response_headers(request, response)
        return response

    return request_id_filter
