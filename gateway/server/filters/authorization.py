"""Authorize every request against the configured modes, or answer 403 with kube's words.

``decide`` answers for the request's user and request info: the authorizer itself, or the
decision cache in front of it (gateway/auth/decisions.py), which remembers answers until RBAC
changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.apimachinery.context import REQUEST_INFO, request_user
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.auth.audit.events import record
from gateway.auth.authorizer import Attributes, Decision, forbidden
from gateway.server.request import ChainHandler, Request, Response

Decide = Callable[[UserInfo, RequestInfo], Awaitable[tuple[Decision, str]]]


def with_authorization(handler: ChainHandler, decide: Decide) -> ChainHandler:
    async def authorization_filter(request: Request) -> Response:
        user, info = request_user(request), request[REQUEST_INFO]
        decision, reason = await decide(user, info)
        audit = record(request)
        if audit is not None:
            audit.authorized(decision is Decision.ALLOW, reason)
        if decision is not Decision.ALLOW:
            raise forbidden(Attributes.of_request(user, info), reason)
        return await handler(request)

    return authorization_filter
