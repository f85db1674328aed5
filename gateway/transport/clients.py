"""The outgoing HTTPS client: one connection pool and cached TLS contexts for every call the
gateway makes to a backend or webhook (kube's util/webhook ClientManager and the aggregator's
proxy transport).

The gateway makes one (gateway/app/gateway.py) and hands it to every caller: the proxy (its
aiohttp path, its fast lane's relay pools, and the TLS context of an upgrade's own
connection), the aggregated discovery and OpenAPI downloads, the availability checks, the
namespace controller's look at remote APIServices' resources, and admission and CRD
conversion webhooks (gateway/transport/webhook.py). None of them makes a session or a TLS
context of its own.

- One aiohttp session over one connector for the whole process: keep-alive connections are
  pooled per (host, port, TLS context, server name), with no cap on their number (aiohttp's
  default of 100 would queue the 101st open watch). No cookie jar, and bodies are never
  decompressed, so a proxied body passes through byte for byte; nothing is added to a request
  that its caller did not set (no User-Agent, Accept or Accept-Encoding of aiohttp's own).
- Beside it, the proxy's lean keep-alive relay pools (``relay``, gateway/transport/relay.py),
  keyed by (host, port, server name, TLS context), closed with the session.
- A TLS context per (CA bundle, insecure, with or without the proxy client certificate), made
  once and cached. A CA bundle with no certificate to trust is refused with client-go's words
  (``TLSConfigError``: kube cannot build the transport), remembered as well. The server
  name a certificate must carry is not part of a Python context: it is given per connection
  (``server_hostname``), and the pool keys connections by it, so a connection verified for
  one Service is never reused for another.
- The proxy client certificate (``--proxy-client-cert-file``/``--proxy-client-key-file``) is
  read again when either file changes (gateway.apimachinery.dynamicfile; looked at as a
  context is asked for, no more than once a second, and by the gateway's file watcher);
  contexts made with the old certificate are dropped, so new connections present the new
  one, and idle connections of the old age out. A pair that does not load (a half-written
  rotation) is logged and the last good one kept.
- Timeouts are the caller's: each call passes its own (none for watches and upgrades).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
import time
from pathlib import Path

import aiohttp
import structlog

from gateway.apimachinery.dynamicfile import FileContent, FileContentError
from gateway.transport import goerrors, relay

log = structlog.get_logger(__name__)

#: How often, at most, the proxy client certificate files are looked at for changes.
RELOAD_INTERVAL = 1.0
#: Idle keep-alive connections are closed after this long (Go's transport: 90 s).
IDLE_TIMEOUT = 90.0
#: A connection attempt (TCP and TLS handshake) gives up after this long (kube's dialer: 30 s).
CONNECT_TIMEOUT = 30.0
#: Contexts kept at most; more distinct CA bundles than this start the cache afresh.
MAX_CONTEXTS = 512
#: What aiohttp would add to every request on its own; a proxy must not.
_SKIPPED_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")


class ClientCertError(Exception):
    """The proxy client certificate or key does not load; the message names the flags."""


class TLSConfigError(ValueError):
    """A TLS configuration client-go would not build a transport from (a CA bundle with
    nothing to trust); the message is client-go's, e.g. ``unable to load root certificates:
    unable to parse bytes as PEM block``."""


class ClientManager:
    """TLS contexts and pooled connections for every outgoing call."""

    def __init__(self, proxy_client_cert_file: Path | None = None,
                 proxy_client_key_file: Path | None = None, *,
                 reload_interval: float = RELOAD_INTERVAL) -> None:
        self.cert_file = proxy_client_cert_file
        self.key_file = proxy_client_key_file
        self.reload_interval = reload_interval
        self._contexts: dict[tuple[bytes, bool, bool], ssl.SSLContext] = {}
        self._refused: dict[bytes, TLSConfigError] = {}
        self._session: aiohttp.ClientSession | None = None
        self.relay = relay.Pools()  # the proxy's lean keep-alive path
        #: the certificate chain and key as one PEM, read again when the files change
        self.pair: FileContent[bytes] | None = None
        self._checked = float("-inf")
        if proxy_client_cert_file is not None and proxy_client_key_file is not None:
            try:  # a bad pair at start is an error the caller sees
                self.pair = FileContent(
                    f"--proxy-client-cert-file {proxy_client_cert_file} "
                    f"--proxy-client-key-file {proxy_client_key_file}",
                    [proxy_client_cert_file, proxy_client_key_file], _client_pair,
                    errors=(ssl.SSLError,))
            except FileContentError as err:
                raise ClientCertError(f"cannot load {err}") from None
            self.pair.on_change(self._drop_client_contexts)

    @property
    def has_client_cert(self) -> bool:
        return self.cert_file is not None and self.key_file is not None

    # -- TLS ----------------------------------------------------------------------------------

    def context(self, ca_bundle: bytes = b"", *, insecure: bool = False,
                client_cert: bool = False) -> ssl.SSLContext:
        """The TLS context trusting ``ca_bundle`` (PEM; the system's roots when empty), or
        verifying nothing when ``insecure``; presenting the proxy client certificate when
        ``client_cert`` and one is configured. Cheap: a clock read and a dictionary look-up.
        TLSConfigError when the bundle holds nothing to trust."""
        client_cert = client_cert and self.pair is not None
        if client_cert:
            now = time.monotonic()
            if now - self._checked >= self.reload_interval:
                self._checked = now
                self.pair.check()  # type: ignore[union-attr]
        key = (ca_bundle, insecure, client_cert)
        context = self._contexts.get(key)
        if context is None:
            refused = self._refused.get(ca_bundle)
            if refused is not None and not insecure:
                raise refused
            if len(self._contexts) >= MAX_CONTEXTS:
                self._contexts.clear()
            try:
                context = self._new_context(ca_bundle, insecure, client_cert)
            except TLSConfigError as err:
                if len(self._refused) >= MAX_CONTEXTS:
                    self._refused.clear()
                self._refused[ca_bundle] = err
                raise
            self._contexts[key] = context
        return context

    def _new_context(self, ca_bundle: bytes, insecure: bool, client_cert: bool) -> ssl.SSLContext:
        if insecure:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            try:
                context = ssl.create_default_context(
                    cadata=ca_bundle.decode("ascii", "replace") if ca_bundle else None)
            except (ssl.SSLError, ValueError, TypeError):
                raise TLSConfigError(goerrors.root_certificates_error(ca_bundle)) from None
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        if client_cert and self.pair is not None:
            load_cert_chain_pem(context, self.pair.value)
        return context

    def _drop_client_contexts(self, _: bytes) -> None:
        """A new client certificate: contexts (and so connections) made with the old one are
        no longer handed out."""
        self._contexts = {k: c for k, c in self._contexts.items() if not k[2]}

    # -- connections --------------------------------------------------------------------------

    def session(self) -> aiohttp.ClientSession:
        """The shared session (made on first use, inside the running event loop)."""
        session = self._session
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0,
                                             keepalive_timeout=IDLE_TIMEOUT,
                                             enable_cleanup_closed=False)
            session = self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False, skip_auto_headers=_SKIPPED_AUTO_HEADERS,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
                raise_for_status=False, trust_env=False)
        return session

    async def close(self) -> None:
        await self.relay.close()
        if self._session is not None:
            await self._session.close()
            self._session = None


def cert_key_pem(cert: bytes, key: bytes, protocol: ssl._SSLMethod) -> bytes:
    """A certificate chain and its key as one PEM, once OpenSSL has taken them together (a
    key that is not the certificate's is refused here: ssl.SSLError)."""
    pem = cert.rstrip(b"\n") + b"\n" + key
    load_cert_chain_pem(ssl.SSLContext(protocol), pem)
    return pem


def _client_pair(raw: list[bytes]) -> bytes:
    return cert_key_pem(raw[0], raw[1], ssl.PROTOCOL_TLS_CLIENT)


def load_cert_chain_pem(context: ssl.SSLContext, pem: bytes) -> None:
    """Load a certificate chain and key held in memory (Python's ssl reads only files: a
    private temporary file, removed at once)."""
    fd, name = tempfile.mkstemp(prefix="gateway-client-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        context.load_cert_chain(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


_TIMEOUTS: dict[float | None, aiohttp.ClientTimeout] = {}


def timeout(seconds: float | None) -> aiohttp.ClientTimeout:
    """A per-call timeout: the whole call within ``seconds`` (None: no limit, for watches and
    upgrades), the connection within CONNECT_TIMEOUT either way. (ClientTimeout is frozen: the
    few distinct ones are made once.)"""
    made = _TIMEOUTS.get(seconds)
    if made is None:
        made = aiohttp.ClientTimeout(total=seconds, sock_connect=CONNECT_TIMEOUT)
        if len(_TIMEOUTS) < 64:
            _TIMEOUTS[seconds] = made
    return made
