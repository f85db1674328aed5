"""Authentication: who sent a request, from its certificate, headers or token.

Authenticators run in kube-apiserver's order. Each returns a user, or None when the request
carries none of its credentials, or raises AuthenticationError when it carries them but they
are not good. The first user found wins; when none is found, any error means 401, and a
request with no credentials at all is anonymous (when --anonymous-auth allows it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.apimachinery.context import Request
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


#: Called with either transport's request (aiohttp's, or the proxy's fast lane's).
Authenticator = Callable[[Request], Awaitable[Authenticated | None]]


async def authenticate(request: Request, authenticators: list[Authenticator],
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
            return _with_authenticated_group(result)
    if errors or not anonymous:
        request["gateway.authn_errors"] = errors
        return None
    return Authenticated(ANONYMOUS_USER)


#: Answers with the group added, per answer object an authenticator gives again and again (a
#: token file's users, a client certificate's): (that object, the answer with the group).
_GROUPED: dict[int, tuple[Authenticated, Authenticated]] = {}


def _with_authenticated_group(result: Authenticated) -> Authenticated:
    """``result`` with system:authenticated among the user's groups (kube's group adder),
    made once per result object (answers are immutable)."""
    known = _GROUPED.get(id(result))
    if known is not None and known[0] is result:
        return known[1]
    grouped = Authenticated(result.user.with_authenticated_group(), result.audiences,
                            result.via_front_proxy)
    if len(_GROUPED) >= 4096:
        _GROUPED.clear()
    _GROUPED[id(result)] = (result, grouped)
    return grouped
