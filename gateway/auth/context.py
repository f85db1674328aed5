"""Where a request's identity is kept while it is served."""

from __future__ import annotations

from aiohttp import web

from gateway.auth.user import ANONYMOUS_USER, UserInfo

USER = "gateway.user"
#: The authenticated user when an impersonated one replaced it.
REQUESTER = "gateway.requester"


def request_user(request: web.BaseRequest) -> UserInfo:
    """The user the request acts as (anonymous when authentication was not run)."""
    return request.get(USER) or ANONYMOUS_USER
