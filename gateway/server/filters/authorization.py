"""Authorize every request against the configured modes, or answer 403 with kube's words."""

from __future__ import annotations

from aiohttp import web

from gateway.apimachinery.context import REQUEST_INFO, request_user
from gateway.auth.audit.events import record
from gateway.auth.authorizer import Attributes, Authorizer, Decision, forbidden
from gateway.server.genericapiserver import Handler


def with_authorization(handler: Handler, authorize: Authorizer) -> Handler:
    async def authorization_filter(request: web.BaseRequest) -> web.StreamResponse:
        attributes = Attributes.of_request(request_user(request), request[REQUEST_INFO])
        decision, reason = await authorize(attributes)
        audit = record(request)
        if audit is not None:
            audit.authorized(decision is Decision.ALLOW, reason)
        if decision is not Decision.ALLOW:
            raise forbidden(attributes, reason)
        return await handler(request)

    return authorization_filter
