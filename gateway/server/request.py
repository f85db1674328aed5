"""What the handler chain needs of a request and of the connection its answer goes on.

Two transports carry requests into the one handler chain (gateway/server/handler_chain.py):
aiohttp's server, and the proxy's fast lane (gateway/aggregator/fastlane.py), which serves
plain requests for remote APIServices below aiohttp. The filters and the proxy are written
against ``Request``, the part of aiohttp's ``web.BaseRequest`` they use, which the lane's own
request object provides too; so a filter written once runs on both. (``Request`` is defined
with the request context, gateway/apimachinery/context.py, so that the layers below the
server, authentication for one, take it too.)

A handler answers in one of two ways:

- it returns a whole response (``web.Response``: a Status, an error), which the transport
  writes after the chain returns (aiohttp itself, or the lane's writer);
- it streams (the proxy relaying a backend's answer): it asks ``stream_for(request)`` for the
  request's ``ResponseStream``, writes the head and the body through it while the chain, and so
  the request's deadline, is still running, and returns what the stream's ``finish`` or
  ``abort`` gives back. On aiohttp's side that is a ``web.StreamResponse``; the lane puts a
  stream of its own on the request (``RESPONSE_STREAM``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from gateway.apimachinery.context import Request, prepare_response

#: The request's ResponseStream when its transport is not aiohttp's (the fast lane).
RESPONSE_STREAM = "gateway.response_stream"
#: Set once a response's head may have gone out: an error can no longer become a Status.
RESPONSE_STARTED = "gateway.response_started"

__all__ = ["RESPONSE_STARTED", "RESPONSE_STREAM", "AiohttpStream", "ChainHandler", "Request",
           "Response", "ResponseStream", "stream_for"]


class Response(Protocol):
    """What the filters read of the response a handler returns."""

    @property
    def status(self) -> int: ...

    @property
    def prepared(self) -> bool:
        """Its head went out already (nothing can be added to it)."""
        ...

    def force_close(self) -> None:
        """The connection is closed after this response."""
        ...


#: A handler of the chain, which both transports call: it answers either transport's request.
ChainHandler = Callable[[Request], Awaitable[Response]]


class ResponseStream(Protocol):
    """A response written as it goes, on the connection the request came by."""

    async def start(self, code: int, reason: str, headers: list[tuple[str, str]],
                    body: bytes | None = None) -> None:
        """The head: ``headers`` are the handler's, the filters' (RESPONSE_HEADERS) go first.
        With ``body``, the whole body goes with it (one write; nothing may follow); without,
        ``write`` sends it piece by piece (framed by Content-Length when the headers give
        one, chunked otherwise)."""
        ...

    async def write(self, data: bytes) -> None: ...

    async def finish(self) -> Any:
        """The body is complete; what the handler returns."""
        ...

    def abort(self) -> Any:
        """Cut the connection (a body that broke off must not look complete); what the
        handler returns."""
        ...


def stream_for(request: Request) -> ResponseStream:
    """The request's ResponseStream: the lane's own, or one over aiohttp's response."""
    stream = request.get(RESPONSE_STREAM)
    return stream if stream is not None else AiohttpStream(request)


class AiohttpStream:
    """A ResponseStream over aiohttp's StreamResponse."""

    __slots__ = ("request", "response")

    def __init__(self, request: Any) -> None:
        self.request: web.BaseRequest = request
        self.response: web.StreamResponse | None = None

    async def start(self, code: int, reason: str, headers: list[tuple[str, str]],
                    body: bytes | None = None) -> None:
        out = (_HeadWithBody if body is not None else web.StreamResponse)(
            status=code, reason=reason, headers=headers)
        self.response = out
        await prepare_response(self.request, out)
        if body:
            await out.write(body)

    async def write(self, data: bytes) -> None:
        assert self.response is not None
        await self.response.write(data)

    async def finish(self) -> web.StreamResponse:
        assert self.response is not None
        await self.response.write_eof()
        return self.response

    def abort(self) -> web.StreamResponse:
        transport = self.request.transport
        if transport is not None:
            transport.abort()
        out = self.response
        if out is None:  # nothing was sent: a response that sends nothing either
            out = self.response = _Aborted()
        out.force_close()
        return out


class _HeadWithBody(web.StreamResponse):
    """A response whose head waits for its body (which follows at once), so that both leave
    in one write: one TLS record instead of two."""

    _send_headers_immediately = False


class _Aborted(web.StreamResponse):
    """The answer for a connection cut before any head went out: nothing to send."""

    def __init__(self) -> None:
        super().__init__(status=500)

    @property
    def prepared(self) -> bool:
        return True

    async def prepare(self, request: web.BaseRequest) -> Any:
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None

