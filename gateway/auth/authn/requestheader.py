"""Front-proxy authentication: a trusted proxy names the user in request headers.

The headers count only on a request whose client certificate verifies against
--requestheader-client-ca-file and, when --requestheader-allowed-names is set, carries one of
those common names. On every request they are removed before anything else sees it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from gateway.apimachinery.context import Request
from gateway.apimachinery.user import UserInfo
from gateway.auth.authn import Authenticated, AuthenticationError, Authenticator
from gateway.auth.authn.x509 import CertificateVerifier, common_name, peer_certificate


@dataclass(frozen=True)
class RequestHeaderConfig:
    username_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_prefixes: tuple[str, ...]
    uid_headers: tuple[str, ...] = ()
    allowed_names: tuple[str, ...] = ()

    def is_front_proxy_header(self, name: str) -> bool:
        lowered = name.lower()
        exact = {h.lower() for h in (*self.username_headers, *self.group_headers,
                                     *self.uid_headers)}
        return lowered in exact or any(lowered.startswith(p.lower())
                                       for p in self.extra_prefixes)


def _first(request: Request, names: Iterable[str]) -> str:
    for name in names:
        value = request.headers.get(name, "").strip()
        if value:
            return value
    return ""


def _all(request: Request, names: Iterable[str]) -> tuple[str, ...]:
    values: list[str] = []
    for name in names:
        values += [v.strip() for v in request.headers.getall(name, []) if v.strip()]
    return tuple(values)


def _extra(request: Request, prefixes: Iterable[str]) -> dict[str, tuple[str, ...]]:
    extra: dict[str, list[str]] = {}
    for header, value in request.headers.items():
        for prefix in prefixes:
            if header.lower().startswith(prefix.lower()) and len(header) > len(prefix):
                key = unquote(header[len(prefix):]).lower()
                extra.setdefault(key, []).append(value)
    return {k: tuple(v) for k, v in extra.items()}


def request_header_authenticator(verifier: CertificateVerifier,
                                 config: RequestHeaderConfig) -> Authenticator:
    async def authenticate(request: Request) -> Authenticated | None:
        der = peer_certificate(request)
        if not der:
            return None
        cert = verifier.verify(der)  # AuthenticationError: not the front proxy
        if config.allowed_names and common_name(cert) not in config.allowed_names:
            raise AuthenticationError(f"front-proxy client certificate CN "
                                      f"{common_name(cert)!r} is not allowed")
        name = _first(request, config.username_headers)
        if not name:
            return None
        user = UserInfo(name, _first(request, config.uid_headers),
                        _all(request, config.group_headers),
                        _extra(request, config.extra_prefixes))
        return Authenticated(user, via_front_proxy=True)

    return authenticate
