"""Authenticate every request, or answer 401; then hide its credentials from what follows.

The Authorization header and any front-proxy headers (X-Remote-User...) are removed from the
request before anything further sees it: a backend must never receive a client's token, and
a front-proxy header is never trusted past this point.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web
from multidict import CIMultiDict

from gateway.apimachinery import status
from gateway.apimachinery.context import USER
from gateway.auth.authn import Authenticator, authenticate
from gateway.auth.authn.requestheader import RequestHeaderConfig
from gateway.server.genericapiserver import Handler

log = structlog.get_logger(__name__)


def unauthorized() -> status.StatusError:
    return status.StatusError(401, "Unauthorized", "Unauthorized")


def _cleaned(request: web.BaseRequest, front_proxy: RequestHeaderConfig | None) -> \
        web.BaseRequest:
    """The request without credential headers (a copy; the original is left alone)."""
    names = [name for name in request.headers if name.lower() == "authorization" or (
        front_proxy is not None and front_proxy.is_front_proxy_header(name))]
    if not names:
        return request
    headers = CIMultiDict(request.headers)
    for name in names:
        headers.popall(name, None)
    return request.clone(headers=headers)


def with_authentication(handler: Handler, authenticators: list[Authenticator], *,
                        anonymous: bool, front_proxy: RequestHeaderConfig | None,
                        on_failure: Callable[[web.BaseRequest], None] | None = None) -> Handler:
    async def authentication_filter(request: web.BaseRequest) -> web.StreamResponse:
        result = await authenticate(request, authenticators, anonymous)
        if result is None:
            errors = request.get("gateway.authn_errors") or []
            log.info("unable to authenticate the request",
                     reasons=[str(e) for e in errors] or ["no credentials"])
            if on_failure is not None:
                on_failure(request)
            return unauthorized().response()
        clean = _cleaned(request, front_proxy)
        clean[USER] = result.user
        return await handler(clean)

    return authentication_filter
