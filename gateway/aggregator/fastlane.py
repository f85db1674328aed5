"""The proxy's fast lane: plain requests for a remote APIService read and answered below
aiohttp, through the same handler chain.

Measured on the proxy benchmark (bench/proxy.py), aiohttp's server machinery (its request and
response objects, parser, payload writer) cost several times what relaying a small GET costs.
So every connection on the secure port starts here: each request head is parsed, and a request
this lane can carry is given to the one handler chain (gateway/server/handler_chain.py: the
same filters, the aggregator's router and the proxy) as a ``LaneRequest``, which offers the
members of aiohttp's request the chain reads (gateway/server/request.py). The chain answers
through the lane's ``LaneStream``: the proxy streams a backend's answer into it while the
chain (and so the request's deadline) runs, and a whole response it returns (a Status, an
error) is written by it afterwards. At the first request the lane does not take, the
connection is handed to aiohttp for good, with the bytes read so far.

Nothing is decided here that the chain decides: the lane only chooses which requests it can
carry. It takes a request when all of these hold (anything else, or anything unusual, goes to
aiohttp, which answers it, errors included):

- a strictly well-formed HTTP/1.1 head of at most MAX_HEAD bytes, origin-form target without
  ``%``, ``#``, ``//`` or ``/.``; GET, HEAD, DELETE or OPTIONS without a body, ``Expect``,
  ``Upgrade`` or ``Transfer-Encoding`` (the lane has no body reader and no upgrade);
- under ``/apis/<g>/<v>`` of a remote APIService that is Available;
- not long-running (no watch: the lane's connections are for short exchanges);
- no Impersonate-* header, no front-proxy header (X-Remote-*) and at most one Authorization;
  no ``Origin`` when CORS is configured; auditing off (the gateway makes no lane then).

Responses carry the headers aiohttp would write (Date, Content-Length or chunked framing,
Connection: close; no Server header, as neither writes one: gateway/server/httpserver.py);
``tests/e2e/test_fast_lane.py`` and ``tests/e2e/test_proxy_verbs.py`` compare both lanes'
answers. The lane keeps Go's connection limits as aiohttp's side does (httpserver.py): a head
must arrive within the header timeout of its first byte (of the connection, for the first),
a connection idle past the idle timeout is closed, and a head longer than the lane reads goes
to aiohttp, which answers 431 past Go's limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import structlog
from aiohttp import web
from multidict import CIMultiDict, MultiDict, MultiDictProxy
from yarl import URL

from gateway.aggregator.server import ROUTE, AggregatorServer
from gateway.apimachinery.context import REQUEST_INFO, RESPONSE_HEADERS
from gateway.apimachinery.requestinfo import parse_request_info
from gateway.auth.authn.requestheader import RequestHeaderConfig
from gateway.server.filters.authentication import CredentialHeaders
from gateway.server.httpserver import IDLE_TIMEOUT, READ_HEADER_TIMEOUT, GoRequestHandler
from gateway.server.request import RESPONSE_STREAM, ChainHandler
from gateway.transport import wire

log = structlog.get_logger("gateway.http")

#: Longest request head the lane parses (aiohttp's own line limit): longer ones go to aiohttp.
MAX_HEAD = 8190
#: How often idle connections and heads being read are looked at.
_TICK = 1.0
_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
_NO_QUERY: MultiDictProxy[str] = MultiDictProxy(MultiDict())


def parse_head(raw: bytes) -> tuple[str, str, CIMultiDict[str]] | None:
    """(method, target, headers) of a request head without its final blank line, or None
    when it is not strictly well-formed HTTP/1.1 (gateway/transport/wire.py)."""
    parsed = wire.parse_request_head(raw)
    if parsed is None:
        return None
    return parsed[0], parsed[1], CIMultiDict(parsed[2])


class LaneRequest(dict[str, Any]):
    """A request the lane carries, as the chain sees it (gateway.server.request.Request): the
    members of aiohttp's request the filters read, its notes kept in the dict it is."""

    __slots__ = ("_url", "headers", "keep_alive", "method", "path", "raw_path", "raw_query",
                 "remote", "transport")

    body_exists = False

    def __init__(self, method: str, target: str, path: str, raw_query: str,
                 headers: CIMultiDict[str], transport: asyncio.Transport,
                 remote: str | None) -> None:
        super().__init__()
        self.method, self.raw_path, self.path, self.raw_query = method, target, path, raw_query
        self.headers, self.transport, self.remote = headers, transport, remote
        self.keep_alive = "close" not in headers.get("Connection", "").lower()
        self._url: URL | None = None

    def _parsed(self) -> URL:
        url = self._url
        if url is None:
            url = self._url = URL.build(query_string=self.raw_query, encoded=True)
        return url

    @property
    def query(self) -> MultiDictProxy[str]:
        """Decoded as aiohttp's request.query (yarl's parsing), when first asked for."""
        return self._parsed().query if self.raw_query else _NO_QUERY

    @property
    def query_string(self) -> str:
        return self._parsed().query_string if self.raw_query else ""

    def clone(self, *, headers: Any) -> LaneRequest:
        """The lane's request is its own: changed in place, not copied."""
        self.headers = headers
        return self


class FastLane:
    """Decides which requests the lane takes, and carries them through the chain."""

    def __init__(self, server: AggregatorServer, handler: ChainHandler, served: Any, *,
                 front_proxy: RequestHeaderConfig | None, cors: bool) -> None:
        self.server = server
        #: The handler chain, the very one aiohttp's server calls.
        self.handler = handler
        self._served = served  # aggregator_proxy_fast_lane_requests_total
        self.cors = cors
        # what sends a request to aiohttp, as it appears in a lowered head: a header line
        # starting with one of these
        credentials = CredentialHeaders(front_proxy)
        names = {"transfer-encoding", "upgrade", "expect",
                 *(credentials.exact - {"authorization"}),
                 *(("origin",) if cors else ())}
        self._markers = tuple(
            [b"\r\n" + name.encode() + b":" for name in sorted(names)] +
            [b"\r\n" + prefix.encode() for prefix in ("impersonate-", *credentials.prefixes)])
        self.connections: set[LaneProtocol] = set()
        self._sweeper: asyncio.TimerHandle | None = None

    def protocol_factory(self, fallback: Callable[[], asyncio.Protocol]
                         ) -> Callable[[], LaneProtocol]:
        """What the listening socket makes per connection; ``fallback`` makes aiohttp's."""
        return lambda: LaneProtocol(self, fallback)

    # -- which requests ---------------------------------------------------------------------

    def admit(self, raw: bytes, transport: asyncio.Transport,
              remote: str | None) -> LaneRequest | None:
        """The request whose head (without its final blank line) is ``raw``, when the lane
        can carry it. Headers that send a request to aiohttp are looked for in the head's
        bytes (each header line follows a CRLF) before it is parsed."""
        lowered = raw.lower()
        for marker in self._markers:
            if marker in lowered:
                return None
        if lowered.count(b"\r\nauthorization:") > 1:
            return None
        parsed = parse_head(raw)
        if parsed is None:
            return None
        method, target, headers = parsed
        if method not in _METHODS or "%" in target or "#" in target:
            return None
        path, _, raw_query = target.partition("?")
        if "//" in path or "/." in path:
            return None
        if headers.get("Content-Length", "0") != "0" or len(headers.getall("Host", ())) > 1:
            return None
        route = self.server.remote_route(path)
        if route is None or not route.available:
            return None
        request = LaneRequest(method, target, path, raw_query, headers, transport, remote)
        if raw_query and "watch" in request.query:
            return None
        # classified here to know it is not long-running; the request info filter keeps it
        info = parse_request_info(method, path, request.query_string)
        if info.is_long_running:
            return None
        request[REQUEST_INFO] = info
        request[ROUTE] = route
        return request

    # -- serving ------------------------------------------------------------------------------

    async def serve(self, request: LaneRequest, conn: LaneProtocol) -> bool:
        """Answer one request through the handler chain; whether the connection may serve
        another."""
        self._served.inc()
        stream = LaneStream(conn, request)
        request[RESPONSE_STREAM] = stream
        try:
            response = await self.handler(request)
        except Exception:  # what the chain lets through: a failure after the head went out
            stream.abort()
            return False
        if not stream.started:
            if not isinstance(response, web.Response) or \
                    not isinstance(response.body, bytes | bytearray | None):
                log.error("the fast lane cannot write this response",  # a streamed one
                          response=type(response).__name__)
                stream.abort()
                return False
            await stream.answer(response, response.body or b"")
        return stream.keep_alive

    # -- connections --------------------------------------------------------------------------

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().call_later(_TICK, self._tick)

    def _tick(self) -> None:
        """Connections idle past the idle timeout, or reading a head past the header
        timeout, are closed (as Go closes them: without an answer)."""
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.head_since is not None:
                if now - conn.head_since > READ_HEADER_TIMEOUT:
                    conn.close()
            elif conn.idle_since is not None and now - conn.idle_since > IDLE_TIMEOUT:
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


class LaneStream:
    """Writes one response on a lane connection as aiohttp's response objects would: the
    request's ResponseStream (gateway.server.request), and the response the chain returns
    for what it streamed (its status, ``force_close``)."""

    __slots__ = ("chunked", "conn", "keep_alive", "method", "request", "started", "status")

    #: Once returned, its head is out (or the connection cut): the filters add nothing to it.
    prepared = True

    def __init__(self, conn: LaneProtocol, request: LaneRequest) -> None:
        self.conn, self.request, self.method = conn, request, request.method
        self.keep_alive = request.keep_alive
        self.started = False
        self.chunked = False
        self.status = 500

    def force_close(self) -> None:
        self.keep_alive = False

    async def start(self, code: int, reason: str, headers: list[tuple[str, str]],
                    body: bytes | None = None) -> None:
        self.status = code
        head = self._head(code, reason, headers, len(body) if body else None,
                          self.request.get(RESPONSE_HEADERS))
        await self.conn.write(head + body if body else head)

    async def write(self, data: bytes) -> None:
        await self.conn.write(b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data)

    async def finish(self) -> LaneStream:
        if self.chunked:
            await self.conn.write(b"0\r\n\r\n")
        return self

    def abort(self) -> LaneStream:
        self.keep_alive = False
        self.conn.abort()
        return self

    async def answer(self, response: web.Response, body: bytes | bytearray) -> None:
        """A response the chain returned whole (an error, a Status), with its ``body``: it
        has the filters' headers already (the request id filter gave them)."""
        if response.keep_alive is False:  # force_close()d (the drain tracking filter)
            self.keep_alive = False
        self.status = response.status
        head = self._head(response.status, response.reason, response.headers.items(),
                          len(body), None)
        empty = self.method == "HEAD" or response.status in (204, 304)
        await self.conn.write(head if empty else head + body)

    def _head(self, code: int, reason: str, headers: Any, length: int | None,
              wanted: CIMultiDict[str] | None) -> bytes:
        """The response head as aiohttp prepares one (gateway/transport/wire.py), the
        filters' headers (``wanted``) merged in as aiohttp's side merges them; notes whether
        the body is chunked."""
        head, self.chunked = wire.response_head(
            code, reason, headers, list(wanted.items()) if wanted else None, length,
            self.method == "HEAD", self.keep_alive, _http_date())
        self.started = True
        return head


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
        #: When the head being read began (the connection's start, for its first): None
        #: while a request is served or the connection waits, idle, for the next.
        self.head_since: float | None = self.idle_since
        self.remote: str | None = None
        self._more: asyncio.Future[None] | None = None
        self._paused_reading = False
        self._paused_writing = False
        self._drained: asyncio.Future[None] | None = None
        self._closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is a Transport in all but its class
        self.transport = transport  # type: ignore[assignment]
        self.idle_since = self.head_since = time.monotonic()  # the header timeout from here
        peer = transport.get_extra_info("peername")
        self.remote = peer[0] if isinstance(peer, tuple | list) and peer else None
        self.lane.connections.add(self)
        self.task = self.loop.create_task(self._run())

    def data_received(self, data: bytes) -> None:
        if self.head_since is None and self.idle_since is not None and not self.buffer:
            self.head_since = time.monotonic()  # the first byte of the next head
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
        if self.head_since is None and self.buffer:  # pipelined: read while serving
            self.head_since = time.monotonic()
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
        assert self.transport is not None
        request = self.lane.admit(bytes(self.buffer[:end]), self.transport, self.remote)
        if request is None:
            self._hand_over()
            return None
        del self.buffer[:end + 4]
        self.head_since = None
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
        if self.head_since is not None and isinstance(protocol, GoRequestHandler):
            protocol.continue_head(time.monotonic() - self.head_since)  # one timeout a head
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
