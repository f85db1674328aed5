"""Give every request an id (kube's Audit-ID) and bind it to every log line while it runs.

A client may send its own ``Audit-ID``; otherwise a UUID is made. The id goes back in the
``Audit-ID`` response header, as kube-apiserver does, so a user can quote it.
"""

from __future__ import annotations

import re
import uuid

import structlog
from aiohttp import web

from gateway.server.genericapiserver import Handler

REQUEST_ID = "gateway.request_id"
_ACCEPTABLE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def with_request_id(handler: Handler) -> Handler:
    async def request_id_filter(request: web.BaseRequest) -> web.StreamResponse:
        given = request.headers.get("Audit-ID", "")
        request_id = given if _ACCEPTABLE.match(given) else str(uuid.uuid4())
        request[REQUEST_ID] = request_id
        with structlog.contextvars.bound_contextvars(request_id=request_id):
            response = await handler(request)
        if not response.prepared:
            response.headers["Audit-ID"] = request_id
        return response

    return request_id_filter
