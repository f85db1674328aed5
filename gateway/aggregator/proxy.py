"""The proxy to a remote APIService's backend (kube-aggregator's proxy handler).

The aggregator's router calls ``Proxy.serve`` for a request under ``/apis/<g>/<v>`` (``/api``
for ``v1.``) whose APIService names a Service and is available. The request goes, with its
path and query, to ``https://<resolved host>:<port>`` over the shared client pool, presenting
the proxy client certificate and checking the backend's certificate against the APIService's
caBundle for the name ``<service>.<namespace>.svc``:

- the caller's identity travels as ``X-Remote-User``, one ``X-Remote-Group`` per group and
  ``X-Remote-Extra-<key>`` per extra value (the key percent-escaped); whatever ``X-Remote-*``
  the client sent is dropped first, and so are ``Authorization`` and ``Impersonate-*`` (the
  filters removed them already: this is the second lock). No ``X-Remote-Uid``: kube sends it
  only behind the RemoteRequestHeaderUID gate, off in 1.32;
- ``X-Forwarded-For`` gets the client's address appended, ``X-Forwarded-Proto``,
  ``-Host`` and ``-Uri`` are set as kube's proxy transport sets them, ``Audit-ID`` is the
  request's id; hop-by-hop headers are not forwarded;
- a bodiless GET, HEAD, DELETE or OPTIONS that is not a watch or other long-running request
  goes by the lean keep-alive relay (gateway/transport/relay.py: the request head aiohttp
  would write, on a pooled TLS stream; the response head parsed, the body read by its length
  or chunk by chunk), with the same headers, answers and errors as the aiohttp path; a pooled
  connection that turns out closed before any byte of the response is retried once, fresh;
- bodies are streamed both ways, chunk by chunk as they arrive: a watch reaches the client
  event by event, and a large list passes through with bounded memory;
- the backend's status, headers (less hop-by-hop ones and the CORS headers kube strips) and
  body come back unchanged, except a redirect (3xx with a Location), which becomes a 502: a
  backend may not send the client elsewhere with the client's credentials;
- the answer goes out through the request's ResponseStream (gateway/server/request.py):
  aiohttp's response, or the fast lane's writer for a request the lane serves; either way
  while the handler chain, and so the request's deadline, is still running;
- a CA bundle client-go would refuse (nothing in it to trust) is a plain-text 500 with
  client-go's words (``unable to load root certificates: ...``), as kube answers when it
  cannot build the transport; no connection is attempted;
- a backend that cannot be reached is a plain-text 503 ``error trying to reach service: ...``,
  a Service that does not resolve a plain-text 503 ``service unavailable``, as kube answers
  (not Status objects). A failure after the response started cuts the connection, so the client
  sees a truncated response, never a second one; except that a watch whose backend's stream
  breaks off between two events ends as a watch ends (gateway/aggregator/watchframes.py);
- discovery of the group version (``/apis/<g>/<v>`` itself) must answer within 5 s; other
  requests have no time limit here beyond the request's own;
- an upgrade (``Connection: upgrade`` with ``Upgrade``: WebSocket, SPDY) gets a TLS connection
  of its own: the request head is written to it, a 101 is relayed to the client and then bytes
  both ways until either side closes; a backend error (>= 400) is relayed as it is; anything
  else is a 503 ``invalid upgrade response: status code N``.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import ssl
import time
from typing import Any
from urllib.parse import quote_plus

import aiohttp
import structlog
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from gateway.aggregator.metrics import AggregatorMetrics
from gateway.aggregator.routes import Route
from gateway.aggregator.watchframes import WatchFrames, watch_frames
from gateway.apimachinery.context import REQUEST_INFO, USER
from gateway.apimachinery.user import UserInfo
from gateway.server.filters.requestid import REQUEST_ID
from gateway.server.request import RESPONSE_STARTED, Request, Response, stream_for
from gateway.transport import clients, goerrors, relay, wire
from gateway.transport.clients import ClientManager, TLSConfigError
from gateway.transport.resolver import ResolveError, ServiceAddress, ServiceResolver

log = structlog.get_logger(__name__)

#: Discovery of one group version must answer within this (kube's aggregatedDiscoveryTimeout).
DISCOVERY_TIMEOUT = 5.0
#: A backend's answer to an upgrade that is not one is read for at most this long.
UPGRADE_ERROR_DEADLINE = 10.0
#: Largest response head accepted from a backend on an upgrade.
MAX_HEAD = 64 * 1024
#: Bytes queued towards one side of an upgraded connection before the other side is paused.
RELAY_HIGH_WATER = 256 * 1024
_RELAY_READ = 64 * 1024
#: A response body of a known length up to this is read whole and sent with the head.
SMALL_BODY = 64 * 1024

#: Headers that describe one connection, not the message (RFC 7230 6.1; Go's list).
HOP_BY_HOP = frozenset({
    "connection", "proxy-connection", "keep-alive", "proxy-authenticate",
    "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
})
#: Request headers never passed on: hop-by-hop ones, credentials, identity the client claims,
#: and those the proxy sets itself.
_DROPPED_REQUEST = HOP_BY_HOP | {
    "host", "authorization", "impersonate-user", "impersonate-group", "impersonate-uid",
    "x-remote-user", "x-remote-group", "x-remote-uid", "x-forwarded-proto",
    "x-forwarded-host", "x-forwarded-uri", "audit-id", "expect",
}
_DROPPED_REQUEST_PREFIXES = ("x-remote-extra-", "impersonate-extra-")
#: For an upgrade the connection headers are the point: only credentials and identity go.
_DROPPED_UPGRADE = _DROPPED_REQUEST - {"connection", "upgrade"}
#: Response headers kube's proxy strips (its CORS filter has the last word on these).
_DROPPED_RESPONSE = HOP_BY_HOP | {
    "access-control-allow-credentials", "access-control-allow-headers",
    "access-control-allow-methods", "access-control-allow-origin",
}
_REDIRECT_MESSAGE = "the backend attempted to redirect this request, which is not permitted"

# An HTTP token character is kept in an X-Remote-Extra- key; every other byte, and "%", is
# written %XX (uppercase), so any key survives the trip through a header name.
_TOKEN = frozenset(b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_ESCAPED = tuple(chr(b) if b in _TOKEN else f"%{b:02X}" for b in range(256))


def escape_extra_key(key: str) -> str:
    """An extra's key as kube writes it into an ``X-Remote-Extra-`` header name."""
    return "".join(_ESCAPED[b] for b in key.encode())


#: Header names of extra keys seen so far (few distinct keys, seen on every request).
_EXTRA_NAMES: dict[str, str] = {}


def identity_headers(user: UserInfo) -> list[tuple[str, str]]:
    """The headers that tell a backend who is asking (kube's auth-proxy headers); made once
    per user object (users are immutable, and an authenticator hands out the same one for
    the same credentials)."""
    known = _IDENTITIES.get(id(user))
    if known is not None and known[0] is user:
        return known[1]
    headers = [("X-Remote-User", user.name)]
    headers += [("X-Remote-Group", group) for group in user.groups]
    for key, values in user.extra.items():
        name = _EXTRA_NAMES.get(key)
        if name is None:
            name = "X-Remote-Extra-" + escape_extra_key(key)
            if len(_EXTRA_NAMES) < 4096:
                _EXTRA_NAMES[key] = name
        headers += [(name, value) for value in values]
    if len(_IDENTITIES) >= 4096:
        _IDENTITIES.clear()
    _IDENTITIES[id(user)] = (user, headers)
    return headers


#: identity_headers per user object: (the user, its headers).
_IDENTITIES: dict[int, tuple[UserInfo, list[tuple[str, str]]]] = {}


def plain_error(code: int, message: str) -> web.Response:
    """Go's http.Error: the message and a newline, as plain text."""
    return web.Response(status=code, text=message + "\n", charset="utf-8",
                        content_type="text/plain",
                        headers={"X-Content-Type-Options": "nosniff"})


def redirect_refused() -> web.Response:
    """A backend's redirect, replaced whole by kube's 502: this body, nothing more."""
    return web.Response(status=502, body=_REDIRECT_MESSAGE.encode(), content_type="text/plain",
                        charset="utf-8")


#: What breaks off a proxied body once its head went out.
STREAM_ERRORS = (aiohttp.ClientError, OSError, TimeoutError, ValueError,
                 asyncio.IncompleteReadError, asyncio.LimitOverrunError)


def is_discovery(info: Any, path: str) -> bool:
    """A request for a group version's discovery document (``/apis/<g>/<v>`` itself), which
    must answer within DISCOVERY_TIMEOUT."""
    return not info.is_resource_request and path.strip("/").count("/") == 2


class Proxy:
    """Forwards requests to the backends of remote APIServices."""

    def __init__(self, clients: ClientManager, resolver: ServiceResolver,
                 metrics: AggregatorMetrics | None = None) -> None:
        self.clients = clients
        self.resolver = resolver
        self.metrics = metrics if metrics is not None else AggregatorMetrics()
        #: Bodiless GET/HEAD/DELETE/OPTIONS go by the lean keep-alive relay, not aiohttp.
        self.use_relay = True

    def _context(self, route: Route) -> ssl.SSLContext:
        return self.clients.context(route.ca_bundle, insecure=route.insecure_skip_tls_verify,
                                    client_cert=True)

    # -- serving ------------------------------------------------------------------------------

    async def serve(self, request: Request, route: Route) -> Response:
        """Answer ``request`` from the route's backend, in kube's order of checks: the
        transport (a CA bundle client-go refuses is a plain-text 500 with its words), the
        user, the Service's address (503), then the exchange."""
        try:
            context = self._context(route)
        except TLSConfigError as err:
            self.metrics.error(route.name, "transport")
            self.metrics.request(route.name, 500)
            return plain_error(500, str(err))
        user = request.get(USER)
        if user is None:
            return plain_error(500, "missing user")
        address = await self.resolve(route)
        if not isinstance(address, ServiceAddress):
            return address
        gauge = self.metrics.opened(route.name)
        gauge.inc()
        try:
            if _is_upgrade(request):
                return await self._upgrade(request, route, context, address, user)
            return await self._forward(request, route, context, address, user)
        finally:
            gauge.dec()

    async def resolve(self, route: Route) -> ServiceAddress | web.Response:
        """Where the route's Service is, or kube's 503 when it does not resolve."""
        service = route.service
        assert service is not None
        try:
            return await self.resolver.resolve(service.namespace, service.name, service.port)
        except ResolveError as err:
            log.warning(f"error resolving {service.namespace}/{service.name}", error=str(err))
            self.metrics.error(route.name, "resolve")
            self.metrics.request(route.name, 503)
            return plain_error(503, "service unavailable")

    async def _forward(self, request: Request, route: Route, context: ssl.SSLContext,
                       address: ServiceAddress, user: UserInfo) -> Response:
        name = route.name
        raw_path = _raw_path(request)
        pairs = forwarded_pairs(request.headers, user, address, raw_path=raw_path,
                                remote=request.remote, request_id=request.get(REQUEST_ID))
        info = request.get(REQUEST_INFO)
        discovery = info is not None and is_discovery(info, request.path)
        target = go_target(raw_path, request.query)
        if self.use_relay and _relayable(request, info):
            exchanged = await self.exchange(route, context, address, request.method, target,
                                            pairs, discovery)
            if not isinstance(exchanged, tuple):
                return exchanged
            conn, relayed = exchanged
            try:
                return await self._deliver(request, name, relayed.status, relayed.reason,
                                           relayed.headers, relayed, discovery)
            finally:
                self.finished(conn, relayed)
        url = URL(f"https://{_hostport(address)}{target}", encoded=True)
        headers = CIMultiDict(pairs)
        headers["Host"] = _hostport(address)
        started = time.monotonic()
        try:
            response = await self.clients.session().request(
                request.method, url, headers=headers,
                data=request.content if request.body_exists else None,  # type: ignore[attr-defined]
                ssl=context, server_hostname=address.server_name,
                timeout=clients.timeout(DISCOVERY_TIMEOUT if discovery else None),
                allow_redirects=False)
        except (aiohttp.ClientError, OSError, ssl.SSLError, TimeoutError, ValueError) as err:
            return self._unreachable(name, err, address)
        self.metrics.observe(name, time.monotonic() - started)
        try:
            code = response.status
            if 300 <= code < 400 and response.headers.get("Location"):
                self.metrics.error(name, "redirect")
                self.metrics.request(name, 502)
                return redirect_refused()
            self.metrics.request(name, code)
            return await self._deliver(request, name, code, response.reason or "",
                                       response.headers.items(), _ClientBody(response),
                                       discovery)
        finally:
            response.release()

    async def _deliver(self, request: Request, name: str, code: int, reason: str,
                       headers: Any, body: Any, discovery: bool) -> Response:
        """The backend's status, headers (less hop-by-hop and CORS ones) and body to the
        client, through the request's ResponseStream (aiohttp's response, or the fast lane's
        writer), within the request's deadline. A body of a known, small length is read
        whole and leaves with the head in one write; a larger or unknown one is passed on as
        it arrives. A failure on either side after the head went out cuts the client's
        connection: a truncated body must not look complete (as Go's proxy panics with
        ErrAbortHandler)."""
        out = backend_response_headers(headers, request.get(REQUEST_ID))
        stream = stream_for(request)
        request[RESPONSE_STARTED] = True
        length = body.length
        whole = body.no_body or (length is not None and length <= SMALL_BODY)
        info = request.get(REQUEST_INFO)
        frames = None if whole or info is None else watch_frames(info.verb, out)
        try:
            if discovery:
                async with asyncio.timeout(DISCOVERY_TIMEOUT):
                    return await _send(stream, code, reason, out, body, whole)
            if frames is not None:
                return await self._send_watch(stream, name, code, reason, out, body, frames)
            return await _send(stream, code, reason, out, body, whole)
        except STREAM_ERRORS as err:
            self.stream_failed(name, err)
            return stream.abort()
        except asyncio.CancelledError:  # the client left, or the request's deadline
            stream.abort()
            raise

    async def _send_watch(self, stream: Any, name: str, code: int, reason: str,
                          headers: list[tuple[str, str]], body: Any,
                          frames: WatchFrames) -> Response:
        """A watch passed on event by event; when the backend's body breaks off between two
        events, the client's stream ends as a watch ends (gateway/aggregator/watchframes.py).
        A cut inside an event, or on the client's side, raises (and aborts) as elsewhere."""
        await stream.start(code, reason, headers)
        chunks = body.iter().__aiter__()
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            except STREAM_ERRORS as err:
                if not frames.between_events:
                    raise
                self.stream_failed(name, err)
                log.info("proxied watch ended with its backend's stream", apiservice=name)
                break
            frames.feed(chunk)
            await stream.write(chunk)
        return await stream.finish()

    def _unreachable(self, name: str, err: BaseException, address: ServiceAddress
                     ) -> web.Response:
        """kube's 503 for a backend that could not be reached (its dial or TLS error)."""
        self.metrics.error(name, "connect")
        self.metrics.request(name, 503)
        message = describe_error(err, address)
        log.info("error trying to reach service", apiservice=name, error=message)
        return plain_error(503, f"error trying to reach service: {message}")

    # -- the lean path ------------------------------------------------------------------------

    async def exchange(self, route: Route, context: ssl.SSLContext, address: ServiceAddress,
                       method: str, target: str, headers: list[tuple[str, str]],
                       discovery: bool
                       ) -> tuple[relay.Connection, relay.Response] | web.Response:
        """A bodiless request sent by the lean relay: the connection and the backend's response
        head (its body still to read), or the answer to give instead (503 when the backend
        cannot be reached, 502 for a redirect). ``headers`` are ``forwarded_pairs``; the
        request head is the one aiohttp would write (Host first)."""
        name = route.name
        head = wire.request_head(method, target, _hostport(address), headers)
        pools = self.clients.relay
        key = (address.host, address.port, address.server_name, context)
        started = time.monotonic()
        try:
            if discovery:
                async with asyncio.timeout(DISCOVERY_TIMEOUT):
                    conn, response = await _round_trip(pools, key, head, method)
            else:
                conn, response = await _round_trip(pools, key, head, method)
        except (aiohttp.ClientError, OSError, ssl.SSLError, TimeoutError, ValueError,
                asyncio.IncompleteReadError) as err:
            return self._unreachable(name, err, address)
        self.metrics.observe(name, time.monotonic() - started)
        code = response.status
        if code == 101 or (300 <= code < 400 and any(k.lower() == "location" and v
                                                     for k, v in response.headers)):
            conn.close()
            if code == 101:  # not asked for: nothing sensible to relay
                self.metrics.error(name, "connect")
                self.metrics.request(name, 503)
                return plain_error(503, "error trying to reach service: unexpected 101")
            self.metrics.error(name, "redirect")
            self.metrics.request(name, 502)
            return redirect_refused()
        self.metrics.request(name, code)
        return conn, response

    def finished(self, conn: relay.Connection, response: relay.Response) -> None:
        """A relayed exchange is over: its connection back to the pool when its body was read
        whole and it can serve again, closed otherwise."""
        if response.done and response.keep_alive:
            self.clients.relay.release(conn)
        else:
            conn.close()

    def stream_failed(self, name: str, err: BaseException) -> None:
        """A proxied body broke off after its head went out (a reset by the client is not
        the backend's fault)."""
        if not isinstance(err, ConnectionResetError | aiohttp.ClientConnectionResetError):
            self.metrics.error(name, "stream")
            log.info("proxied response ended early", apiservice=name, error=str(err))

    # -- upgrades -----------------------------------------------------------------------------

    async def _upgrade(self, request: Any, route: Route, context: ssl.SSLContext,
                       address: ServiceAddress, user: UserInfo) -> web.StreamResponse:
        """An upgrade (aiohttp's side only: the fast lane declines them)."""
        name = route.name
        raw_path = _raw_path(request)
        headers = forwarded_headers(request.headers, user, address, _DROPPED_UPGRADE,
                                    raw_path=raw_path, remote=request.remote,
                                    request_id=request.get(REQUEST_ID))
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                address.host, address.port, ssl=context,
                server_hostname=address.server_name, limit=MAX_HEAD), clients.CONNECT_TIMEOUT)
        except (OSError, ssl.SSLError, TimeoutError, ValueError) as err:
            self.metrics.error(name, "connect")
            self.metrics.request(name, 503)
            return plain_error(503, f"error trying to reach service: "
                                    f"{describe_error(err, address)}")
        try:
            head = [f"{request.method} {go_target(raw_path, request.query)} HTTP/1.1",
                    f"Host: {_hostport(address)}"]
            head += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            try:
                raw = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as err:
                raise ConnectionError("the backend closed the connection without a "
                                      "response") from err
            code = _status_code(raw)
        except (OSError, ssl.SSLError, ValueError) as err:
            writer.close()
            self.metrics.error(name, "upgrade")
            self.metrics.request(name, 503)
            return plain_error(503, f"error trying to reach service: {err}")
        self.metrics.request(name, code)
        if code != 101 and code < 400:
            writer.close()
            self.metrics.error(name, "upgrade")
            return plain_error(503, f"invalid upgrade response: status code {code}")
        transport = request.transport
        if transport is None or transport.is_closing():
            writer.close()
            return _Hijacked(code)
        request[RESPONSE_STARTED] = True
        transport.write(raw)
        try:
            if code == 101:
                await _relay(request, transport, reader, writer)
            else:
                await _copy_error_body(raw, reader, transport)
        finally:
            writer.close()
            transport.close()
        return _Hijacked(code)


async def _round_trip(pools: relay.Pools, key: relay.Key, head: bytes, method: str
                      ) -> tuple[relay.Connection, relay.Response]:
    """The request head sent on a pooled connection (a fresh one when a reused one turns out
    closed before answering), and the response head read; the connection closed on any
    failure."""
    conn = await pools.acquire(key, clients.CONNECT_TIMEOUT)
    try:
        try:
            return conn, await relay.send(conn, head, method)
        except relay.StaleConnection:
            conn.close()
            conn = await pools.connect(key, clients.CONNECT_TIMEOUT)
            return conn, await relay.send(conn, head, method)
    except BaseException:
        conn.close()
        raise


async def _send(stream: Any, code: int, reason: str, headers: list[tuple[str, str]],
                body: Any, whole: bool) -> Response:
    """A response through ``stream``: a body read ``whole`` with its head, else piece by
    piece."""
    if whole:
        await stream.start(code, reason, headers, await body.read())
    else:
        await stream.start(code, reason, headers)
        async for chunk in body.iter():
            await stream.write(chunk)
    return await stream.finish()


# -- request and response pieces ------------------------------------------------------------------


_RELAYED_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def _relayable(request: Request, info: Any) -> bool:
    """A request the lean relay takes: bodiless, idempotent, not a watch or other long one."""
    if request.method not in _RELAYED_METHODS or request.body_exists:
        return False
    headers = request.headers
    if "Transfer-Encoding" in headers or headers.get("Content-Length", "0") != "0":
        return False
    return not (info is None or info.is_long_running or "watch" in request.query)


class _ClientBody:
    """An aiohttp client response's body, read as the relay's responses are."""

    __slots__ = ("length", "no_body", "response")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.length = response.content_length
        self.no_body = False

    async def read(self) -> bytes:
        return await self.response.read()

    def iter(self) -> Any:
        return self.response.content.iter_any()


def backend_response_headers(headers: Any, request_id: str | None) -> list[tuple[str, str]]:
    """The backend's headers the client gets: less hop-by-hop and CORS ones, with the
    request's Audit-ID unless the backend set one."""
    out = []
    has_id = False
    for key, value in headers:
        lower = key.lower()
        if lower not in _DROPPED_RESPONSE:
            out.append((key, value))
            has_id = has_id or lower == "audit-id"
    if request_id and not has_id:
        out.append(("Audit-ID", request_id))
    return out


def _is_upgrade(request: Request) -> bool:
    headers = request.headers
    if not headers.get("Upgrade"):
        return False
    return any("upgrade" in value.lower() for value in headers.getall("Connection", ()))


def _hostport(address: ServiceAddress) -> str:
    host = f"[{address.host}]" if ":" in address.host else address.host
    return f"{host}:{address.port}"


def _raw_path(request: Request) -> str:
    """The path as the client sent it (not decoded), without the query."""
    raw = request.raw_path
    if raw.startswith("/"):
        return raw.partition("?")[0]
    return request.rel_url.raw_path  # type: ignore[attr-defined]  # absolute-form (aiohttp)


def go_target(path: str, query: Any) -> str:
    """``path`` and the decoded ``query`` pairs encoded as Go's Query().Encode() does."""
    if not query:
        return path
    pairs = sorted(query.items(), key=lambda kv: kv[0])
    query = "&".join(f"{quote_plus(k, safe='')}={quote_plus(v, safe='')}" for k, v in pairs)
    return f"{path}?{query}"


def _forwarded_uri(raw_path: str) -> str:
    """kube's X-Forwarded-Uri: the escaped path, cleaned, its trailing slash kept."""
    if "//" not in raw_path and "/." not in raw_path:
        return raw_path
    cleaned = posixpath.normpath(raw_path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    if raw_path.endswith("/") and not cleaned.endswith("/"):
        cleaned += "/"
    return cleaned


def forwarded_headers(headers: Any, user: UserInfo, address: ServiceAddress,
                      dropped: frozenset[str] = _DROPPED_REQUEST, *, raw_path: str,
                      remote: str | None, request_id: str | None) -> CIMultiDict[str]:
    """``forwarded_pairs`` as aiohttp's client takes them, with Host."""
    out = CIMultiDict(forwarded_pairs(headers, user, address, dropped, raw_path=raw_path,
                                      remote=remote, request_id=request_id))
    out["Host"] = _hostport(address)
    return out


def forwarded_pairs(headers: Any, user: UserInfo, address: ServiceAddress,
                    dropped: frozenset[str] = _DROPPED_REQUEST, *, raw_path: str,
                    remote: str | None, request_id: str | None) -> list[tuple[str, str]]:
    """The headers a request goes to the backend with, Host aside: the client's, less
    credentials, claimed identity and hop-by-hop ones; the user's identity; X-Forwarded-*;
    Audit-ID."""
    connection_tokens: set[str] | frozenset[str] = frozenset()
    if dropped is _DROPPED_REQUEST and "Connection" in headers:
        connection_tokens = {t.strip().lower() for v in headers.getall("Connection")
                             for t in v.split(",")}
    out = []
    forwarded_for = []
    for key, value in headers.items():
        lower = key.lower()
        if lower in dropped or lower.startswith(_DROPPED_REQUEST_PREFIXES) or \
                lower in connection_tokens:
            continue
        if lower == "x-forwarded-for":
            forwarded_for.append(value)
            continue
        out.append((key, value))
    out += identity_headers(user)
    if remote:
        forwarded_for.append(remote)
    if forwarded_for:
        out.append(("X-Forwarded-For", ", ".join(forwarded_for)))
    out.append(("X-Forwarded-Uri", _forwarded_uri(raw_path)))
    out.append(("X-Forwarded-Host", _hostport(address)))
    out.append(("X-Forwarded-Proto", "https"))
    if request_id:
        out.append(("Audit-ID", request_id))
    return out


def describe_error(err: BaseException, address: ServiceAddress) -> str:
    """A failed connection to ``address`` in Go's words (dial, lookup, TLS, deadline)."""
    return goerrors.describe_error(err, address.host, address.port, address.server_name)


def _status_code(head: bytes) -> int:
    line = head.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(line) < 2 or not line[0].startswith(b"HTTP/") or not line[1].isdigit():
        raise ValueError(f"malformed HTTP response {head[:64]!r}")
    return int(line[1])


class _Hijacked(web.StreamResponse):
    """The answer for a connection the proxy took over: its bytes are written already, so
    there is nothing for aiohttp to send, and the connection is not reused."""

    def __init__(self, code: int) -> None:
        super().__init__(status=code)
        self.force_close()

    @property
    def prepared(self) -> bool:
        return True

    async def prepare(self, request: web.BaseRequest) -> Any:
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None


class _ClientSide:
    """Fed by aiohttp with what the client sends after the upgrade (in place of the HTTP
    parser, as aiohttp's WebSocket reader is): written straight to the backend; the client is
    paused while the backend's side is full."""

    def __init__(self, writer: asyncio.StreamWriter, client: asyncio.Transport) -> None:
        self.writer = writer
        self.client = client
        self.closed = asyncio.Event()
        self._draining: asyncio.Task[None] | None = None

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self.writer.is_closing():
            return False, b""
        self.writer.write(data)
        backend = self.writer.transport
        if self._draining is None and backend.get_write_buffer_size() > RELAY_HIGH_WATER:
            self.client.pause_reading()
            self._draining = asyncio.ensure_future(self._drain())
        return False, b""

    async def _drain(self) -> None:
        try:
            await self.writer.drain()
        except (OSError, ConnectionError):
            self.closed.set()
        finally:
            self._draining = None
            if not self.client.is_closing():
                self.client.resume_reading()

    def feed_eof(self) -> None:
        self.closed.set()


async def _relay(request: web.BaseRequest, client: asyncio.Transport,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes both ways until either side is done."""
    side = _ClientSide(writer, client)
    protocol = request.protocol
    protocol.set_parser(side)  # type: ignore[arg-type]
    drain = getattr(protocol, "_drain_helper", None)

    async def backend_to_client() -> None:
        while True:
            data = await reader.read(_RELAY_READ)
            if not data or client.is_closing():
                return
            client.write(data)
            if client.get_write_buffer_size() > RELAY_HIGH_WATER:
                if drain is not None:
                    await drain()
                else:
                    while client.get_write_buffer_size() > RELAY_HIGH_WATER and \
                            not client.is_closing():
                        await asyncio.sleep(0.01)

    down = asyncio.ensure_future(backend_to_client())
    up = asyncio.ensure_future(side.closed.wait())
    try:
        await asyncio.wait((down, up), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (down, up):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
            await down


async def _copy_error_body(head: bytes, reader: asyncio.StreamReader,
                           client: asyncio.Transport) -> None:
    """A backend's refusal of the upgrade, relayed to the client as it is."""
    length = None
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    with contextlib.suppress(OSError, ConnectionError, TimeoutError,
                             asyncio.IncompleteReadError):
        async with asyncio.timeout(UPGRADE_ERROR_DEADLINE):
            if length is not None:
                if length:
                    client.write(await reader.readexactly(length))
                return
            while data := await reader.read(_RELAY_READ):
                client.write(data)
