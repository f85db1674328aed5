"""Authentication: who sent a request, from its certificate, headers or token.

Authenticators run in kube-apiserver's order. Each returns a user, or None when the request
carries none of its credentials, or raises AuthenticationError when it carries them but they
are not good. The first user found wins; when none is found, any error means 401, and a
request with no credentials at all is anonymous (when --anonymous-auth allows it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from gateway.apimachinery.user import ANONYMOUS_USER, UserInfo


class AuthenticationError(Exception):
    """Credentials were presented but are not valid (logged, never shown to the client)."""


@dataclass(frozen=True)
class Authenticated:
    user: UserInfo
    #: The audiences a token was accepted for (TokenReview reports them).
    audiences: tuple[str, ...] = ()
    #: A front proxy vouched for this user (its headers were honoured).
    via_front_proxy: bool = False


Authenticator = Callable[[web.BaseRequest], Awaitable[Authenticated | None]]


async def authenticate(request: web.BaseRequest, authenticators: list[Authenticator],
                       anonymous: bool) -> Authenticated | None:
    """The request's identity, or None when it must be refused with 401."""
    errors: list[Exception] = []
    for authenticator in authenticators:
        try:
            result = await authenticator(request)
        except AuthenticationError as err:
            errors.append(err)
            continue
        if result is not None:
            return Authenticated(result.user.with_authenticated_group(), result.audiences,
                                 result.via_front_proxy)
    if errors or not anonymous:
        request["gateway.authn_errors"] = errors
        return None
    return Authenticated(ANONYMOUS_USER)
