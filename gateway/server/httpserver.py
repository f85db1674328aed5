"""aiohttp's HTTP/1.1 server, behaving as kube-apiserver's Go server does at the connection level.

kube-apiserver serves with Go's net/http and these settings (k8s.io/apiserver's secure
serving): ``MaxHeaderBytes: 1 << 20``, ``ReadHeaderTimeout: 32s``, ``IdleTimeout: 90s``; the
TLS handshake gets the header timeout too. So:

- a request head (request line and headers) must arrive within ``READ_HEADER_TIMEOUT`` of its
  first byte (of the connection, for its first request): a client that trickles its head
  (slowloris) is cut off, without an answer, as Go closes it;
- a head longer than Go's limit (``MAX_HEADER_BYTES`` and Go's 4096 bytes of slack) is answered
  ``431 Request Header Fields Too Large`` in Go's plain text, and the connection closed;
- a keep-alive connection with no request for ``IDLE_TIMEOUT`` is closed;
- no ``Server`` header of aiohttp's own (Go's server sends none; a proxied backend's passes).

The proxy's fast lane (gateway/aggregator/fastlane.py) reads heads before aiohttp does and
keeps the same limits with these constants; a head it does not take goes on to this server.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import hdrs, web
from aiohttp.http import SERVER_SOFTWARE
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler

#: Go's http.Server.ReadHeaderTimeout as kube sets it ("just shy of requestTimeoutUpperBound").
READ_HEADER_TIMEOUT = 32.0
#: Go's http.Server.IdleTimeout as kube sets it (http.DefaultTransport's keep-alive timeout).
IDLE_TIMEOUT = 90.0
#: Go's TLS handshake timeout: the least of its read timeouts, the header timeout here.
TLS_HANDSHAKE_TIMEOUT = READ_HEADER_TIMEOUT
#: Go's http.Server.MaxHeaderBytes as kube sets it.
MAX_HEADER_BYTES = 1 << 20
#: The longest head accepted: Go reads MaxHeaderBytes plus 4096 bytes of slack.
HEAD_LIMIT = MAX_HEADER_BYTES + 4096
#: Go's answer to a head past the limit, written as Go writes it (no Date, no length).
TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
             b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
             b"431 Request Header Fields Too Large")
_END = b"\r\n\r\n"


class GoRequest(web.BaseRequest):
    """aiohttp's request, whose responses go out without aiohttp's own Server header."""

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        # aiohttp sets Server with setdefault just before this hook: its own value is that
        # very string object; a handler's (a proxied backend's) is another and stays
        if response.headers.get(hdrs.SERVER) is SERVER_SOFTWARE:
            del response.headers[hdrs.SERVER]


class GoRequestHandler(RequestHandler):
    """aiohttp's connection protocol with Go's header timeout and head size limit.

    A head is awaited from the connection's start and after each response whose request
    body was read to its end (a request with a body left unread is not followed by another
    here: aiohttp drains or closes it). While one is awaited its bytes are counted up to the
    end of the head, and a timer runs from its first byte (from the start, for the first)."""

    def __init__(self, manager: Any, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._awaiting_head = True
        self._head_bytes = 0
        #: The last three bytes seen while a head is awaited (its end may straddle chunks).
        self._head_tail = b""
        self._head_timer: asyncio.TimerHandle | None = None

    # -- Go's header timeout ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._start_head_timer(READ_HEADER_TIMEOUT)

    def continue_head(self, elapsed: float) -> None:
        """The head now awaited began ``elapsed`` seconds ago, read by the fast lane."""
        self._start_head_timer(max(0.0, READ_HEADER_TIMEOUT - elapsed))

    def _start_head_timer(self, delay: float) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self._loop.call_later(delay, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._awaiting_head and self.transport is not None:
            self.force_close()  # as Go: no answer, the connection closed

    # -- reading heads ------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if not self._awaiting_head or not data:
            super().data_received(data)
            return
        if self._head_timer is None:
            self._start_head_timer(READ_HEADER_TIMEOUT)
        seen = self._head_tail + data
        end = seen.find(_END)
        head_bytes = self._head_bytes + (len(data) if end < 0 else end - len(self._head_tail))
        if head_bytes > HEAD_LIMIT:
            self._too_large()
            return
        if end >= 0:  # the head is complete: its request is aiohttp's from here
            self._awaiting_head = False
            self._head_bytes, self._head_tail = 0, b""
            self._stop_head_timer()
        else:
            self._head_bytes, self._head_tail = head_bytes, seen[-3:]
        super().data_received(data)

    def _too_large(self) -> None:
        self._stop_head_timer()
        self._awaiting_head = False
        transport = self.transport
        if transport is not None:
            transport.write(TOO_LARGE)
        self.force_close()

    async def finish_response(self, request: web.BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        result = await super().finish_response(request, resp, start_time)
        if request.content.is_eof() and not self._awaiting_head:
            # the next head, if any; one already parsed (pipelined) is not counted
            self._awaiting_head = True
            self._head_bytes, self._head_tail = 0, b""
        return result

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """A line or a header count past aiohttp's parser limits (set to Go's, so reached
        only when the head is too large) is Go's 431."""
        if isinstance(exc, LineTooLong) or (
                isinstance(exc, BadHttpMessage) and "Too many headers" in str(exc)):
            response = web.Response(status=431, text="431 Request Header Fields Too Large")
            response.force_close()
            return response
        return super().handle_error(request, status, exc, message)


class GoServer(web.Server):
    """aiohttp's low-level server making ``GoRequestHandler`` connections and ``GoRequest``
    requests, its parser's limits Go's."""

    def __init__(self, handler: Any, **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", IDLE_TIMEOUT)
        kwargs.setdefault("max_line_size", HEAD_LIMIT)
        kwargs.setdefault("max_field_size", HEAD_LIMIT)
        kwargs.setdefault("max_headers", HEAD_LIMIT // 4)  # bounded by bytes, as Go's
        super().__init__(handler, request_factory=self._go_request, **kwargs)

    def _go_request(self, message: Any, payload: Any, protocol: Any, writer: Any,
                    task: Any) -> GoRequest:
        return GoRequest(message, payload, protocol, writer, task, self._loop)

    def __call__(self) -> GoRequestHandler:
        return GoRequestHandler(self, loop=self._loop, **self._kwargs)
