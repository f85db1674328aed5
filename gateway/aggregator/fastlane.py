"""The proxy's fast lane: plain requests for a remote APIService served below aiohttp.

Measured on the proxy benchmark (bench/proxy.py), aiohttp's server machinery and the filter
chain's per-request objects cost several times what relaying a small GET costs. So every
connection on the secure port starts here: each request head is parsed, and a request this
lane can serve exactly as the slow lane (aiohttp's server and the handler chain) would, is
served here; at the first request it does not take, the connection is handed to aiohttp for
good, with the bytes read so far. Nothing is answered differently: the lane runs the same
functions as the filters, in their order, and a test compares both lanes' answers.

The lane takes a request when all of these hold (anything else, or anything unusual, goes to
aiohttp, which answers it, errors included):

- a strictly well-formed HTTP/1.1 head of at most MAX_HEAD bytes, origin-form target without
  ``%``, ``#``, ``//`` or ``/.``; GET, HEAD, DELETE or OPTIONS without a body, ``Expect``,
  ``Upgrade`` or ``Transfer-Encoding``;
- under ``/apis/<g>/<v>`` of a remote APIService that is Available;
- not long-running (no watch);
- no Impersonate-* header, no front-proxy header (X-Remote-*) and at most one Authorization;
  no ``Origin`` when CORS is configured; auditing off.

Per request, as the filters do: the request id (Audit-ID), request info, the request metrics
and in-flight gauge, drain tracking, Cache-Control, the deadline (``?timeout=`` and
--request-timeout), authentication, the in-flight limits, authorization, and then the proxy's
own resolution, identity headers and keep-alive relay. Responses carry the headers aiohttp
would write (Date, Server, Content-Length or chunked framing, Connection: close).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE
from multidict import CIMultiDict, MultiDict
from yarl import URL

from gateway.aggregator.proxy import (
    SMALL_BODY,
    STREAM_ERRORS,
    Proxy,
    backend_response_headers,
    discovery_deadline,
    forwarded_headers,
    go_target,
    is_discovery,
)
from gateway.aggregator.routes import Route
from gateway.aggregator.server import AggregatorServer, service_unavailable
from gateway.apimachinery import status
from gateway.apimachinery.context import fill_missing_headers, merge_streamed_headers
from gateway.apimachinery.requestinfo import RequestInfo, parse_request_info
from gateway.apimachinery.user import UserInfo
from gateway.auth.authn import authenticate
from gateway.auth.authorizer import Attributes, Decision, forbidden
from gateway.auth.security import Security
from gateway.endpoints.negotiation import status_response
from gateway.server.filters.authentication import authentication_failed, credential_header_test
from gateway.server.filters.draining import InFlightRequests
from gateway.server.filters.limits import InFlightLimits, timed_out, timeout_from_query
from gateway.server.filters.recovery import log_request
from gateway.server.filters.requestid import request_id_for
from gateway.server.metrics import Metrics
from gateway.transport import relay

log = structlog.get_logger("gateway.http")

#: Longest request head the lane parses (aiohttp's own line limit): longer ones go to aiohttp.
MAX_HEAD = 8190
#: An idle keep-alive connection is closed after this long (aiohttp's keepalive_timeout).
KEEPALIVE_TIMEOUT = 75.0
#: How often deadlines and idle connections are checked.
_TICK = 0.1
_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
_REQUEST_LINE = re.compile(rb"([A-Z]+) (/[!-~]*) HTTP/1\.1")
_HEADER = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*")
#: Request headers that send a request to aiohttp whatever their value.
_DECLINED = frozenset({"transfer-encoding", "upgrade", "expect"})
_bind = structlog.contextvars.bind_contextvars
_reset = structlog.contextvars.reset_contextvars


def parse_head(raw: bytes) -> tuple[str, str, CIMultiDict[str]] | None:
    """(method, target, headers) of a request head without its final blank line, or None
    when it is not strictly well-formed HTTP/1.1."""
    lines = raw.split(b"\r\n")
    line = _REQUEST_LINE.fullmatch(lines[0])
    if line is None:
        return None
    headers: CIMultiDict[str] = CIMultiDict()
    for field in lines[1:]:
        match = _HEADER.fullmatch(field)
        if match is None:
            return None
        headers.add(match[1].decode("ascii"), match[2].decode("utf-8", "surrogateescape"))
    return line[1].decode("ascii"), line[2].decode("ascii"), headers


class LaneRequest:
    """What the lane knows of a request; authenticators read its headers and transport as
    they read an aiohttp request's, and may note things on it."""

    __slots__ = ("_notes", "headers", "info", "keep_alive", "method", "path", "query",
                 "remote", "route", "transport")

    def __init__(self, method: str, path: str, query: MultiDict[str], headers: CIMultiDict[str],
                 info: RequestInfo, route: Route, transport: asyncio.Transport,
                 remote: str | None) -> None:
        self.method, self.path, self.query, self.headers = method, path, query, headers
        self.info, self.route, self.transport, self.remote = info, route, transport, remote
        self.keep_alive = "close" not in headers.get("Connection", "").lower()
        self._notes: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._notes.get(key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        self._notes[key] = value

    @property
    def uri(self) -> str:
        return go_target(self.path, self.query) if self.query else self.path


class FastLane:
    """Decides which requests the lane takes, and serves them."""

    def __init__(self, server: AggregatorServer, proxy: Proxy, security: Security,
                 metrics: Metrics, in_flight: InFlightRequests, limits: InFlightLimits, *,
                 request_timeout: float, cors: bool) -> None:
        self.server, self.proxy, self.security, self.metrics = server, proxy, security, metrics
        self.in_flight, self.limits = in_flight, limits
        self.request_timeout = request_timeout
        self.cors = cors
        self._is_credential = credential_header_test(security.front_proxy)
        self.connections: set[LaneProtocol] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self._served = proxy.metrics.fast_lane

    def protocol_factory(self, fallback: Callable[[], asyncio.Protocol]
                         ) -> Callable[[], LaneProtocol]:
        """What the listening socket makes per connection; ``fallback`` makes aiohttp's."""
        return lambda: LaneProtocol(self, fallback)

    # -- which requests ---------------------------------------------------------------------

    def admit(self, method: str, target: str, headers: CIMultiDict[str],
              transport: asyncio.Transport, remote: str | None) -> LaneRequest | None:
        """The request, when the lane serves it exactly as aiohttp's side would."""
        if method not in _METHODS or "%" in target or "#" in target:
            return None
        path, _, raw_query = target.partition("?")
        if "//" in path or "/." in path:
            return None
        route = self.server.remote_route(path)
        if route is None or not route.available or not self._plain(headers):
            return None
        query: MultiDict[str] = URL.build(path=path, query_string=raw_query,
                                          encoded=True).query.copy() if raw_query \
            else MultiDict()
        if "watch" in query:
            return None
        info = parse_request_info(method, path, _decoded_query(raw_query))
        if info.is_long_running:
            return None
        return LaneRequest(method, path, query, headers, info, route, transport, remote)

    def _plain(self, headers: CIMultiDict[str]) -> bool:
        """No header that asks for something only aiohttp's side does."""
        authorizations = 0
        for name in headers:
            lower = name.lower()
            if lower in _DECLINED or lower.startswith("impersonate-") or \
                    (lower == "origin" and self.cors):
                return False
            if lower == "authorization":
                authorizations += 1
            elif self._is_credential(name):
                return False
        return authorizations <= 1 and headers.get("Content-Length", "0") == "0" and \
            len(headers.getall("Host", ())) <= 1

    # -- serving ------------------------------------------------------------------------------

    async def serve(self, request: LaneRequest, conn: LaneProtocol) -> bool:
        """Answer one request; whether the connection may serve another."""
        started = time.monotonic()
        self._served.inc()
        request_id = request_id_for(request.headers.get("Audit-ID", ""))
        tokens = _bind(request_id=request_id)
        info = request.info
        labels = self.metrics.labels_of(request.method, request.headers.get("Content-Type", ""),
                                        "dryRun" in request.query, info)
        gauge = self.metrics.inflight_gauge(labels, False, info.is_mutating)
        gauge.inc()
        self.in_flight.enter()
        writer = _Writer(conn, request, request_id, self.in_flight)
        code = 500
        try:
            code = await self._answer(request, writer, conn)
        except Exception:
            log.exception("panic while serving a request", method=request.method,
                          path=request.path)
            if writer.started:
                conn.abort()
            else:
                code = await writer.answer(status_response(request.headers, status.internal_error(
                    "an error on the server has prevented the request from succeeding")))
        finally:
            self.in_flight.leave()
            gauge.dec()
            self.metrics.observe(labels, code, started)
            log_request(request.method, request.uri, code, time.monotonic() - started,
                        request.headers.get("User-Agent", ""), request.remote)
            _reset(**tokens)
        return writer.keep_alive

    async def _answer(self, request: LaneRequest, writer: _Writer, conn: LaneProtocol) -> int:
        """The deadline around the rest (the timeout filter: a 504, or a cut connection when
        the answer had begun); Status errors as answers. The deadline is kept on the
        connection and enforced by the lane's ticker, not a timer per request."""
        try:
            timeout = timeout_from_query(request.query.get("timeout"), self.request_timeout)
            conn.deadline = time.monotonic() + timeout
            try:
                return await self._authorized(request, writer)
            except asyncio.CancelledError:
                if not conn.expired:
                    raise
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()
                if writer.started:
                    writer.abort()
                    return 504
                raise timed_out() from None
            finally:
                conn.deadline = None
        except status.StatusError as err:
            if writer.started:
                raise
            return await writer.answer(status_response(request.headers, err))

    async def _authorized(self, request: LaneRequest, writer: _Writer) -> int:
        security = self.security
        result = await authenticate(request, security.authenticators, security.anonymous)
        if result is None:
            return await writer.answer(authentication_failed(request.get("gateway.authn_errors"),
                                                             request.headers))
        user = result.user
        taken = self.limits.enter(request.info, user)
        try:
            attributes = Attributes.of_request(user, request.info)
            decision, reason = await security.authorize(attributes)
            if decision is not Decision.ALLOW:
                raise forbidden(attributes, reason)
            return await self._proxied(request, writer, user)
        finally:
            if taken is not None:
                taken.leave()

    async def _proxied(self, request: LaneRequest, writer: _Writer, user: UserInfo) -> int:
        """What the aggregator server and the proxy's relay do."""
        route = request.route
        if not route.available:
            return await writer.answer(service_unavailable())
        proxy = self.proxy
        address = await proxy.resolve(route)
        if isinstance(address, web.Response):
            return await writer.answer(address)
        gauge = proxy.metrics.opened(route.name)
        gauge.inc()
        try:
            headers = forwarded_headers(request.headers, user, address, raw_path=request.path,
                                        remote=request.remote, request_id=writer.request_id)
            discovery = is_discovery(request.info, request.path)
            exchanged = await proxy.exchange(route, address, request.method,
                                             go_target(request.path, request.query), headers,
                                             discovery)
            if isinstance(exchanged, web.Response):
                return await writer.answer(exchanged)
            backend, response = exchanged
            complete = False
            try:
                async with discovery_deadline(discovery):
                    await writer.relay(response)
                complete = True
            except STREAM_ERRORS as err:
                proxy.stream_failed(route.name, err)
                writer.abort()
            except asyncio.CancelledError:
                writer.abort()
                raise
            finally:
                proxy.finished(backend, response, complete)
            return response.status
        finally:
            gauge.dec()

    # -- connections --------------------------------------------------------------------------

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().call_later(_TICK, self._tick)

    def _tick(self) -> None:
        """Requests past their deadline are cancelled; idle connections past the keep-alive
        timeout closed."""
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.deadline is not None and now >= conn.deadline:
                conn.expire()
            elif conn.idle_since is not None and now - conn.idle_since > KEEPALIVE_TIMEOUT:
                conn.close()
        self._sweeper = asyncio.get_running_loop().call_later(_TICK, self._tick)

    def close_idle(self) -> None:
        """Shutting down: idle connections closed now, busy ones after their answer."""
        for conn in list(self.connections):
            if conn.idle_since is not None:
                conn.close()

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.connections):
            conn.close()


def _decoded_query(raw: str) -> str:
    """The query as aiohttp's request.query_string gives it (percent-decoded)."""
    return URL.build(query_string=raw, encoded=True).query_string if raw else ""


class _Writer:
    """Writes one response on a lane connection as aiohttp's response objects would."""

    __slots__ = ("conn", "in_flight", "keep_alive", "method", "request_id", "started")

    def __init__(self, conn: LaneProtocol, request: LaneRequest, request_id: str,
                 in_flight: InFlightRequests) -> None:
        self.conn, self.method, self.request_id = conn, request.method, request_id
        self.in_flight = in_flight
        self.keep_alive = request.keep_alive
        self.started = False

    def _wanted(self) -> CIMultiDict[str]:
        """The filters' headers: Audit-ID (request id) and Cache-Control."""
        return CIMultiDict((("Audit-ID", self.request_id),
                            ("Cache-Control", "no-cache, private")))

    def _head(self, code: int, reason: str, headers: CIMultiDict[str],
              length: int | None) -> tuple[bytes, bool]:
        """The response head as aiohttp prepares one, and whether the body is chunked."""
        if self.in_flight.draining:  # the drain tracking filter's force_close
            self.keep_alive = False
        chunked = False
        empty = self.method == "HEAD" or code in (204, 304) or 100 <= code < 200
        if length is None and "Content-Length" in headers:
            length = int(headers["Content-Length"])
        if empty:
            if code in (204, 304) or 100 <= code < 200:
                headers.popall("Content-Length", None)
            headers.popall("Transfer-Encoding", None)
        else:
            if length is None:
                chunked = True
                headers["Transfer-Encoding"] = "chunked"
            else:
                headers["Content-Length"] = str(length)
            if length != 0:
                headers.setdefault("Content-Type", "application/octet-stream")
        if "Date" not in headers:
            headers["Date"] = _http_date()
        headers.setdefault("Server", SERVER_SOFTWARE)
        if "Connection" not in headers and not self.keep_alive:
            headers["Connection"] = "close"
        lines = [f"HTTP/1.1 {code} {reason}\r\n"]
        lines += [f"{k}: {v}\r\n" for k, v in headers.items()]
        lines.append("\r\n")
        self.started = True
        return "".join(lines).encode("utf-8", "surrogateescape"), chunked

    async def answer(self, response: web.Response) -> int:
        """A response built whole (an error, a Status): the filters' headers it lacks."""
        own = CIMultiDict(response.headers)
        fill_missing_headers(own, self._wanted())
        body = response.body
        assert isinstance(body, bytes | bytearray)
        head, _ = self._head(response.status, response.reason, own, len(body))
        empty = self.method == "HEAD" or response.status in (204, 304)
        await self.conn.write(head if empty else head + body)
        return response.status

    async def relay(self, response: relay.Response) -> None:
        """A backend's response, its body as it arrives."""
        own = backend_response_headers(CIMultiDict(), response.headers, self.request_id)
        merge_streamed_headers(own, self._wanted())
        code, reason = response.status, response.reason
        length = response.length
        if response.no_body or (length is not None and length <= SMALL_BODY):
            body = await response.read()
            head, _ = self._head(code, reason, own, None if response.no_body else length)
            await self.conn.write(head + body if body else head)
            return
        head, chunked = self._head(code, reason, own, length)
        await self.conn.write(head)
        async for piece in response.iter():
            await self.conn.write(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked else piece)
        if chunked:
            await self.conn.write(b"0\r\n\r\n")

    def abort(self) -> None:
        self.keep_alive = False
        self.conn.abort()


_date: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The Date header value, formatted once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, usegmt=True))
    return _date[1]


class LaneProtocol(asyncio.Protocol):
    """One client connection while the lane serves it: one task reads request heads and
    serves them in turn, until the connection closes or goes to aiohttp."""

    def __init__(self, lane: FastLane, fallback: Callable[[], asyncio.Protocol]) -> None:
        self.lane = lane
        self.fallback = fallback
        self.loop = asyncio.get_running_loop()  # made by the loop, for the loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.task: asyncio.Task[None] | None = None
        self.idle_since: float | None = time.monotonic()
        #: When the request being served must be done (None between requests).
        self.deadline: float | None = None
        self.expired = False
        self.remote: str | None = None
        self._more: asyncio.Future[None] | None = None
        self._paused_reading = False
        self._paused_writing = False
        self._drained: asyncio.Future[None] | None = None
        self._closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is a Transport in all but its class
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.remote = peer[0] if isinstance(peer, tuple | list) and peer else None
        self.lane.connections.add(self)
        self.task = self.loop.create_task(self._run())

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        more = self._more
        if more is not None and not more.done():
            more.set_result(None)
        elif len(self.buffer) > MAX_HEAD and not self._paused_reading:
            assert self.transport is not None
            self.transport.pause_reading()  # pipelined requests wait their turn
            self._paused_reading = True

    async def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while (request := await self._next_request()) is not None:
                self.idle_since = None
                self.expired = False
                keep_alive = await self.lane.serve(request, self)
                if not keep_alive or self._closed:
                    self.close()
                    return
                self.idle_since = time.monotonic()
                if self._paused_reading and self.transport is not None:
                    self._paused_reading = False
                    self.transport.resume_reading()

    async def _next_request(self) -> LaneRequest | None:
        """The next request the lane takes; None when the connection closed or went to
        aiohttp (with the request the lane does not take)."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            if len(self.buffer) > MAX_HEAD:
                self._hand_over()
                return None
            if self._closed:
                return None
            self._more = self.loop.create_future()
            await self._more
            self._more = None
        if end > MAX_HEAD or self._closed:
            self._hand_over()
            return None
        parsed = parse_head(bytes(self.buffer[:end]))
        assert self.transport is not None
        request = parsed and self.lane.admit(*parsed, self.transport, self.remote)
        if not request:
            self._hand_over()
            return None
        del self.buffer[:end + 4]
        return request

    def _hand_over(self) -> None:
        """aiohttp's protocol takes the connection, with what was read of it."""
        transport = self.transport
        assert transport is not None
        self.lane.connections.discard(self)
        if self._closed:
            return
        protocol = self.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        data, self.buffer = bytes(self.buffer), bytearray()
        if data:
            protocol.data_received(data)
        if self._paused_reading:
            self._paused_reading = False
            transport.resume_reading()

    async def write(self, data: bytes) -> None:
        if self._closed or self.transport is None:
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(data)
        if self._paused_writing:
            self._drained = self.loop.create_future()
            await self._drained

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def expire(self) -> None:
        """The request's deadline passed: its task is cancelled, and answers 504."""
        self.deadline = None
        self.expired = True
        if self.task is not None:
            self.task.cancel()

    def close(self) -> None:
        if self.transport is not None and not self._closed:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.lane.connections.discard(self)
        if self._more is not None and not self._more.done():
            self._more.set_result(None)
        elif self.task is not None and self.idle_since is None:
            self.task.cancel()  # the client left mid-request: as aiohttp's handler_cancellation
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(ConnectionResetError("the client closed the connection"))
