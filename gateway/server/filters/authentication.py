"""Authenticate every request, or answer 401; then hide its credentials from what follows.

The Authorization header and any front-proxy headers (X-Remote-User...) are removed from the
request before anything further sees it: a backend must never receive a client's token, and
a front-proxy header is never trusted past this point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog
from aiohttp import web
from multidict import CIMultiDict

from gateway.apimachinery import status
from gateway.apimachinery.context import USER
from gateway.auth.authn import Authenticator, authenticate
from gateway.auth.authn.requestheader import RequestHeaderConfig
from gateway.endpoints.negotiation import status_response
from gateway.server.request import ChainHandler, Request, Response

log = structlog.get_logger(__name__)


def unauthorized() -> status.StatusError:
    return status.StatusError(401, "Unauthorized", "Unauthorized")


def authentication_failed(errors: list[Exception] | None,
                          headers: Mapping[str, str] | None = None) -> web.Response:
    """The 401 for a request no authenticator vouched for, in the representation its headers
    negotiate (JSON without them); why goes to the log only."""
    log.info("unable to authenticate the request",
             reasons=[str(e) for e in errors or ()] or ["no credentials"])
    return status_response(headers or {}, unauthorized())


class CredentialHeaders:
    """Which header names are credentials to remove: Authorization, and the front proxy's
    user, group and uid headers and extra prefixes (front_proxy is frozen: its names are read
    once; the same test as ``front_proxy.is_front_proxy_header`` plus Authorization)."""

    def __init__(self, front_proxy: RequestHeaderConfig | None) -> None:
        exact = {"authorization"}
        prefixes: tuple[str, ...] = ()
        if front_proxy is not None:
            exact |= {h.lower() for h in (*front_proxy.username_headers,
                                          *front_proxy.group_headers,
                                          *front_proxy.uid_headers)}
            prefixes = tuple(p.lower() for p in front_proxy.extra_prefixes)
        self.exact = frozenset(exact)
        self.prefixes = prefixes

    def __call__(self, name: str) -> bool:
        lowered = name.lower()
        return lowered in self.exact or (bool(self.prefixes) and lowered.startswith(self.prefixes))

    def found(self, headers: Any) -> list[str]:
        """The credential header names ``headers`` has: the exact names looked up (a
        CIMultiDict's membership ignores case), the prefixes by a pass over the names only
        when there are any."""
        names = [name for name in self.exact if name in headers]
        if self.prefixes:
            names += [name for name in headers if name.lower().startswith(self.prefixes)]
        return names


def credential_header_test(front_proxy: RequestHeaderConfig | None) -> CredentialHeaders:
    return CredentialHeaders(front_proxy)


def _cleaned(request: Request, front_proxy: RequestHeaderConfig | None,
             is_credential: CredentialHeaders | None = None) -> Request:
    """The request without credential headers.

    kube deletes them in place: headers that can be changed (the fast lane's request owns its
    CIMultiDict) are changed in place; aiohttp's request headers cannot be, so such a request
    is cloned with the others (the original is left alone). A request that carries none is
    passed on as it is."""
    if is_credential is None:
        is_credential = CredentialHeaders(front_proxy)
    headers = request.headers
    found = is_credential.found(headers)
    if not found:
        return request
    if isinstance(headers, CIMultiDict):
        for name in found:
            headers.popall(name, None)
        return request
    kept = CIMultiDict((name, value) for name, value in headers.items()
                       if not is_credential(name))
    return request.clone(headers=kept)


def with_authentication(handler: ChainHandler, authenticators: list[Authenticator], *,
                        anonymous: bool, front_proxy: RequestHeaderConfig | None,
                        on_failure: Callable[[Request], None] | None = None) -> ChainHandler:
    is_credential = CredentialHeaders(front_proxy)

    async def authentication_filter(request: Request) -> Response:
        result = await authenticate(request, authenticators, anonymous)
        if result is None:
            if on_failure is not None:
                on_failure(request)
            return authentication_failed(request.get("gateway.authn_errors"), request.headers)
        clean = _cleaned(request, front_proxy, is_credential)
        clean[USER] = result.user
        return await handler(clean)

    return authentication_filter
