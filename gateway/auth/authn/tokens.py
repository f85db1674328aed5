"""Bearer tokens: the static token file (--token-auth-file) and service-account JWTs.

A request that presents a bearer token nobody recognizes is refused (401), never anonymous.
"""

from __future__ import annotations

import csv
from collections.abc import Awaitable, Callable
from pathlib import Path

from gateway.apimachinery.context import Request
from gateway.apimachinery.user import UserInfo
from gateway.auth.authn import Authenticated, AuthenticationError, Authenticator

#: Checks one token; None when the token is not of its kind.
TokenAuthenticator = Callable[[str, tuple[str, ...]], Awaitable[Authenticated | None]]


class TokenFileError(ValueError):
    pass


def load_token_file(path: Path) -> dict[str, UserInfo]:
    """kube's CSV: ``token,user,uid[,"group1,group2"]``, one line per token."""
    tokens: dict[str, UserInfo] = {}
    with open(path, newline="") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 3:
                raise TokenFileError(f"{path}:{number}: needs at least token,user,uid")
            token, user, uid = (field.strip() for field in row[:3])
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) \
                if len(row) > 3 else ()
            if not token or not user:
                raise TokenFileError(f"{path}:{number}: empty token or user name")
            tokens[token] = UserInfo(user, uid, groups)
    return tokens


def token_file_authenticator(tokens: dict[str, UserInfo]) -> TokenAuthenticator:
    answers = {token: Authenticated(user) for token, user in tokens.items()}

    async def authenticate(token: str, audiences: tuple[str, ...]) -> Authenticated | None:
        return answers.get(token)

    return authenticate


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


def bearer_authenticator(token_authenticators: list[TokenAuthenticator],
                         audiences: tuple[str, ...]) -> Authenticator:
    """The request's bearer token, checked by each token authenticator in turn."""

    async def authenticate(request: Request) -> Authenticated | None:
        token = bearer_token(request)
        if token is None:
            return None
        return await authenticate_token(token_authenticators, token, audiences)

    return authenticate


async def authenticate_token(token_authenticators: list[TokenAuthenticator], token: str,
                             audiences: tuple[str, ...]) -> Authenticated:
    """A token's identity (also what TokenReview answers); AuthenticationError otherwise."""
    for check in token_authenticators:
        result = await check(token, audiences)
        if result is not None:
            return result
    raise AuthenticationError("invalid bearer token")
