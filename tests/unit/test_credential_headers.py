"""Credentials stop at authentication: what the handlers behind it receive.

kube-apiserver's authentication filter deletes the ``Authorization`` header once a request is
authenticated, and the front-proxy authenticator clears the ``X-Remote-*`` headers it reads;
the gateway goes further and removes the front-proxy headers from every request. A backend
(an aggregated API server, a webhook...) must never see a client's token, and a front-proxy
header must never be trusted past authentication.

The handler chain here is the gateway's own, built by ``build_handler_chain`` from options
parsed by the real flag parser, with the security a real ``Gateway`` assembles over the
development PKI, served over TLS with the real serving context (client certificates asked
for). Only the innermost handler is the test's: it records the headers and the user that reach
it, where the server chain (aggregator, kube core, proxies to backends) would be.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDictProxy

from gateway.apimachinery.context import USER
from gateway.apimachinery.user import UserInfo
from gateway.app.gateway import Gateway
from gateway.app.run import complete_with_dev_pki
from gateway.cli import build_parser
from gateway.options import ServeOptions
from gateway.server.handler_chain import build_handler_chain
from gateway.server.tls import server_ssl_context

TOKENS = 'alice-token,alice,uid-alice,"devs,qa"\n'
PATH = "/api/v1/namespaces/default/configmaps"
SPOOF = {"X-Remote-User": "mallory", "X-Remote-Group": "system:masters",
         "X-Remote-Extra-Scopes": "everything"}
#: A header that must cross the chain untouched (shows the recorder sees the request's headers).
MARKER = {"X-Test-Marker": "kept"}


@dataclass
class Seen:
    headers: CIMultiDictProxy[str]
    raw_names: list[str]
    user: UserInfo


@dataclass
class Recorder:
    """The innermost handler: remembers what reached it, answers 200."""

    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        self.seen.append(Seen(request.headers,
                              [name.decode().lower() for name, _ in request.raw_headers],
                              request[USER]))
        return web.json_response({"kind": "Status", "status": "Success"})

    def last(self) -> Seen:
        assert len(self.seen) == 1, self.seen
        return self.seen.pop()


@dataclass
class Chain:
    client: Any
    recorder: Recorder
    cert_dir: Path

    def context(self, stem: str | None = None) -> ssl.SSLContext:
        """Trusting the dev CA; presenting the dev PKI's ``stem`` certificate, if given."""
        ctx = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
        if stem is not None:
            ctx.load_cert_chain(self.cert_dir / f"{stem}.crt", self.cert_dir / f"{stem}.key")
        return ctx

    async def get(self, headers: dict[str, str], cert: str | None = None) -> Seen:
        response = await self.client.get(PATH, headers=MARKER | headers, ssl=self.context(cert))
        assert response.status == 200, await response.text()
        return self.recorder.last()


@pytest.fixture
async def chain(tmp_path: Path, aiohttp_raw_server, aiohttp_client) -> AsyncIterator[Chain]:
    (tmp_path / "tokens.csv").write_text(TOKENS)
    args = build_parser().parse_args([
        "serve", "--bind-address", "127.0.0.1", "--cert-dir", str(tmp_path / "certs"),
        "--data-dir", str(tmp_path / "data"), "--token-auth-file", str(tmp_path / "tokens.csv"),
        # no store runs here: RBAC's caches would be empty; who may do what is not the subject
        "--authorization-mode", "AlwaysAllow"])
    options = complete_with_dev_pki(ServeOptions.from_args(args))
    gateway = Gateway(options)
    recorder = Recorder()
    handler = build_handler_chain(recorder, options, gateway.in_flight, gateway.limits,
                                  gateway.metrics,
                                  gateway.security, gateway.audit)
    assert options.tls_cert_file and options.tls_private_key_file
    assert options.client_ca_file and options.requestheader_client_ca_file
    tls = server_ssl_context(options.tls_cert_file, options.tls_private_key_file,
                             [options.client_ca_file, options.requestheader_client_ca_file])
    client = await aiohttp_client(await aiohttp_raw_server(handler, ssl=tls))
    try:
        yield Chain(client, recorder, options.cert_dir)
    finally:
        await gateway.stop()


def assert_no_credentials(seen: Seen) -> None:
    assert seen.headers["X-Test-Marker"] == "kept", dict(seen.headers)
    assert "Authorization" not in seen.headers, dict(seen.headers)
    leaked = [name for name in seen.headers if name.lower().startswith("x-remote-")]
    assert not leaked, dict(seen.headers)
    assert "authorization" not in seen.raw_names, seen.raw_names
    assert not [n for n in seen.raw_names if n.startswith("x-remote-")], seen.raw_names


async def test_a_bearer_token_authenticates_and_goes_no_further(chain: Chain) -> None:
    seen = await chain.get({"Authorization": "Bearer alice-token"})
    assert seen.user == UserInfo("alice", "uid-alice",
                                 ("devs", "qa", "system:authenticated"))
    assert_no_credentials(seen)


@pytest.mark.parametrize("authorization", ["Basic YWxpY2U6c2VjcmV0", "Negotiate abc", "Bearer"])
async def test_a_scheme_nobody_reads_is_anonymous_and_removed(chain: Chain,
                                                              authorization: str) -> None:
    seen = await chain.get({"Authorization": authorization})
    assert seen.user == UserInfo("system:anonymous", "",
                                 ("system:unauthenticated",))
    assert_no_credentials(seen)


async def test_front_proxy_headers_of_an_untrusted_client_are_dropped(chain: Chain) -> None:
    seen = await chain.get({"Authorization": "Bearer alice-token"} | SPOOF)
    assert seen.user.name == "alice"
    assert "system:masters" not in seen.user.groups
    assert_no_credentials(seen)
    # a client certificate from the client CA is a user, not a front proxy
    seen = await chain.get(SPOOF, cert="admin")
    assert seen.user == UserInfo("admin", "", ("system:masters", "system:authenticated"))
    assert_no_credentials(seen)
    # and anonymous clients get no further with them
    seen = await chain.get(SPOOF)
    assert seen.user.name == "system:anonymous"
    assert_no_credentials(seen)


async def test_front_proxy_headers_are_consumed_by_the_front_proxy_authenticator(
        chain: Chain) -> None:
    seen = await chain.get({"X-Remote-User": "carol", "X-Remote-Group": "devs",
                            "X-Remote-Extra-Scopes": "read"}, cert="front-proxy-client")
    assert seen.user == UserInfo("carol", "", ("devs", "system:authenticated"),
                                 {"scopes": ("read",)})
    assert_no_credentials(seen)
