"""Delegated authentication, as k8s.io/apiserver's DelegatingAuthenticationOptions do it.

Who sent a request is decided from what the core server publishes and answers:

- front-proxy requests (the aggregator's, with X-Remote-User...): a client certificate signed
  by the request-header CA, with an allowed common name, from the ConfigMap
  ``kube-system/extension-apiserver-authentication`` (``requestheader-client-ca-file``,
  ``requestheader-allowed-names`` and the header names);
- client certificates of the core server's client CA (the ConfigMap's ``client-ca-file``);
- bearer tokens, by a TokenReview to the core server, answers kept 10 s (kube's
  ``--authentication-token-webhook-cache-ttl``), failures included;
- anything else is anonymous (kube's default for delegated authentication).

The ConfigMap is read at start (a failure stops the server, unless
``--authentication-tolerate-lookup-failure``) and then watched: a new CA or new allowed names
count from the next request (and the next TLS handshake) on. The header names are those
read at start: the chain strips them from every request it passes on, and is built once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog

from gateway.apimachinery.context import Request
from gateway.apimachinery.dynamicfile import FileContent
from gateway.apimachinery.user import UserInfo
from gateway.auth.authn import Authenticated, AuthenticationError, Authenticator
from gateway.auth.authn.requestheader import RequestHeaderConfig, request_header_authenticator
from gateway.auth.authn.tokens import bearer_token
from gateway.auth.authn.x509 import (
    CABundle,
    CertificateVerifier,
    parse_ca_bundle,
    x509_authenticator,
)
from gateway.extension.kubeclient import APIError, KubeClient

log = structlog.get_logger(__name__)

NAMESPACE = "kube-system"
CONFIGMAP = "extension-apiserver-authentication"
CONFIGMAP_PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"
#: kube's DelegatingAuthenticationOptions.CacheTTL.
TOKEN_CACHE_TTL = 10.0


class AuthenticationStartError(Exception):
    """The ConfigMap could not be read at start (and failures are not tolerated)."""


class ConfigMapCA(FileContent[CABundle]):
    """A CA bundle held in a ConfigMap key rather than a file: FileContent's interface (the
    ``value``, its ``generation``, ``on_change``), which the certificate verifier and the
    serving TLS context follow. Never given to a FileWatcher (it has no files)."""

    def __init__(self, name: str, bundle: CABundle) -> None:  # no files to read first
        self.name = name
        self.paths = ()
        self._listeners = []
        self.generation = 0
        self.value = bundle

    def set(self, bundle: CABundle) -> None:
        """Take a new bundle (when its bytes differ) and tell the listeners."""
        if bundle.pem == self.value.pem:
            return
        self.value = bundle
        self.generation += 1
        for listener in self._listeners:
            listener(bundle)


@dataclass(frozen=True)
class AuthenticationInfo:
    """What the ConfigMap says (kube's keys; lists are JSON arrays of strings)."""

    client_ca: bytes = b""
    requestheader_ca: bytes = b""
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()

    @classmethod
    def from_configmap(cls, configmap: dict[str, Any]) -> AuthenticationInfo:
        data = configmap.get("data") or {}

        def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(json.loads(data[key])) if data.get(key) else default

        return cls(
            client_ca=data.get("client-ca-file", "").encode(),
            requestheader_ca=data.get("requestheader-client-ca-file", "").encode(),
            allowed_names=strings("requestheader-allowed-names", ()),
            username_headers=strings("requestheader-username-headers", ("X-Remote-User",)),
            group_headers=strings("requestheader-group-headers", ("X-Remote-Group",)),
            extra_prefixes=strings("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
            uid_headers=strings("requestheader-uid-headers", ()))

    def front_proxy(self) -> RequestHeaderConfig:
        return RequestHeaderConfig(self.username_headers, self.group_headers,
                                   self.extra_prefixes, self.uid_headers, self.allowed_names)


def _bundle(pem: bytes) -> CABundle | None:
    try:
        return parse_ca_bundle(pem) if pem.strip() else None
    except ValueError as err:
        log.warning("a CA bundle of the authentication ConfigMap does not parse; ignored",
                    error=str(err))
        return None


class DelegatedAuthentication:
    """The authenticators of an extension apiserver, kept current from the ConfigMap."""

    def __init__(self, client: KubeClient | None, *, token_cache_ttl: float = TOKEN_CACHE_TTL,
                 tolerate_lookup_failure: bool = False,
                 placeholder_ca: CABundle | None = None) -> None:
        self.client = client
        self.tolerate_lookup_failure = tolerate_lookup_failure
        self.info = AuthenticationInfo()
        self._front_proxy = self.info.front_proxy()
        self._placeholder = placeholder_ca
        #: Set once the ConfigMap was read (or its lookup failed and is tolerated).
        self.synced = asyncio.Event()
        self.requestheader_ca: ConfigMapCA | None = None
        self.client_ca: ConfigMapCA | None = None
        #: Every client CA, for the TLS handshake's list of acceptable issuers.
        self.handshake_cas: ConfigMapCA | None = None
        self.tokens = CachedTokenReview(client, token_cache_ttl) if client else None
        self._resource_version = ""
        #: Per CA content (which follows its key's changes itself) and front-proxy names.
        self._authenticators: dict[tuple[int, RequestHeaderConfig | None], Authenticator] = {}

    @property
    def front_proxy(self) -> RequestHeaderConfig:
        """The header names to strip and trust (as read at start)."""
        return self._front_proxy

    async def start(self) -> None:
        """Read the ConfigMap once; raises what failed unless failures are tolerated."""
        if self.client is None:
            self.synced.set()
            return
        try:
            configmap = await self.client.request("GET", CONFIGMAP_PATH)
        except (APIError, aiohttp.ClientError, TimeoutError) as err:
            if isinstance(err, APIError) and err.code == 404:
                # kube: no ConfigMap, no front proxy and no client CA
                log.warning("no kube-system/extension-apiserver-authentication: front-proxy "
                            "and client certificate authentication are off until it appears")
            elif self.tolerate_lookup_failure:
                log.warning("cannot read the authentication ConfigMap; tolerated",
                            error=str(err))
            else:  # kube's words
                raise AuthenticationStartError(
                    "unable to load configmap based request-header-client-ca-file: "
                    f"{err}") from None
            configmap = {}
        self._apply(configmap)
        self.synced.set()

    def _apply(self, configmap: dict[str, Any]) -> None:
        info = AuthenticationInfo.from_configmap(configmap)
        self._resource_version = (configmap.get("metadata") or {}).get("resourceVersion", "")
        if info == self.info and self.handshake_cas is not None:
            return
        # allowed names may change while serving; header names are the start's
        self.info = info
        self._front_proxy = RequestHeaderConfig(
            self._front_proxy.username_headers, self._front_proxy.group_headers,
            self._front_proxy.extra_prefixes, self._front_proxy.uid_headers,
            info.allowed_names) if self.synced.is_set() else info.front_proxy()
        self.requestheader_ca = _follow(self.requestheader_ca, "requestheader-client-ca-file",
                                        _bundle(info.requestheader_ca))
        self.client_ca = _follow(self.client_ca, "client-ca-file", _bundle(info.client_ca))
        both = info.requestheader_ca + b"\n" + info.client_ca
        handshake = _bundle(both) or self._placeholder
        if handshake is not None:
            self.handshake_cas = _follow(self.handshake_cas, "client CAs", handshake)
        log.info("authentication configuration loaded",
                 front_proxy=bool(info.requestheader_ca), client_ca=bool(info.client_ca),
                 allowed_names=list(info.allowed_names))

    async def watch(self) -> None:
        """Follow the ConfigMap until cancelled (kube's DynamicRequestHeaderController and
        ClientCA controller: a change counts at once)."""
        if self.client is None:
            return
        delay = 1.0
        while True:
            try:
                async for event in self.client.watch(
                        f"/api/v1/namespaces/{NAMESPACE}/configmaps"
                        f"?fieldSelector=metadata.name%3D{CONFIGMAP}", self._resource_version):
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind in ("ADDED", "MODIFIED"):
                        self._apply(obj)
                    elif kind == "DELETED":
                        self._apply({})
                    elif kind == "BOOKMARK":
                        self._resource_version = obj["metadata"]["resourceVersion"]
                    elif kind == "ERROR":
                        self._resource_version = ""  # too old: list again
                        break
                delay = 1.0
            except (aiohttp.ClientError, TimeoutError, APIError, ValueError) as err:
                log.warning("watching the authentication ConfigMap failed; again soon",
                            error=str(err))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            if not self._resource_version:
                await self._relist()

    async def _relist(self) -> None:
        assert self.client is not None
        try:
            self._apply(await self.client.request("GET", CONFIGMAP_PATH))
        except APIError as err:
            if err.code == 404:
                self._apply({})
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("reading the authentication ConfigMap failed", error=str(err))

    def authenticators(self) -> list[Authenticator]:
        """kube's order: front proxy, client certificate, bearer token."""
        return [self._request_header, self._client_certificate, self._token]

    async def _request_header(self, request: Request) -> Authenticated | None:
        ca = self.requestheader_ca
        if ca is None or not self.info.requestheader_ca:
            return None
        key = (id(ca), self._front_proxy)  # new allowed names: a new authenticator
        authenticator = self._authenticators.get(key)
        if authenticator is None:
            authenticator = self._authenticators[key] = request_header_authenticator(
                CertificateVerifier(ca), self._front_proxy)
        return await authenticator(request)

    async def _client_certificate(self, request: Request) -> Authenticated | None:
        ca = self.client_ca
        if ca is None or not self.info.client_ca:
            return None
        key = (id(ca), None)
        authenticator = self._authenticators.get(key)
        if authenticator is None:
            authenticator = self._authenticators[key] = x509_authenticator(
                CertificateVerifier(ca))
        return await authenticator(request)

    async def _token(self, request: Request) -> Authenticated | None:
        token = bearer_token(request)
        if token is None or self.tokens is None:
            return None
        return await self.tokens.authenticate(token)


def _follow(current: ConfigMapCA | None, name: str, bundle: CABundle | None
            ) -> ConfigMapCA | None:
    """The content holding ``bundle``: the same object, changed, so that whoever follows it
    sees the change."""
    if bundle is None:
        return current
    if current is None:
        return ConfigMapCA(f"{CONFIGMAP}::{name}", bundle)
    current.set(bundle)
    return current


class CachedTokenReview:
    """Bearer tokens checked by TokenReview, answers (and refusals) kept ``ttl`` seconds by
    the token's hash (kube's cached token authenticator)."""

    def __init__(self, client: KubeClient, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[bytes, tuple[float, Authenticated | None, str]] = {}

    async def authenticate(self, token: str) -> Authenticated:
        key = hashlib.sha256(token.encode()).digest()
        now = self.clock()
        cached = self._cache.get(key)
        if cached is None or cached[0] <= now:
            result, error = await self._review(token)
            if len(self._cache) > 4096:
                self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
            cached = self._cache[key] = (now + self.ttl, result, error)
        if cached[1] is None:
            raise AuthenticationError(cached[2])
        return cached[1]

    async def _review(self, token: str) -> tuple[Authenticated | None, str]:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                  "spec": {"token": token}}
        try:
            answer = await self.client.request(
                "POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
        except (APIError, aiohttp.ClientError, TimeoutError) as err:
            raise AuthenticationError(f"TokenReview failed: {err}") from None
        status = answer.get("status") or {}
        if not status.get("authenticated"):
            return None, status.get("error") or "token not authenticated"
        user = status.get("user") or {}
        info = UserInfo(user.get("username", ""), user.get("uid", ""),
                        tuple(user.get("groups") or ()),
                        {k: tuple(v) for k, v in (user.get("extra") or {}).items()})
        return Authenticated(info, tuple(status.get("audiences") or ())), ""
