"""Streaming a watch: newline-terminated ``{"type","object"}`` JSON over a chunked response.

Headers go out at once. Each event's encoding is made once and shared by every watcher that
sends the same event in the same form. A watch ends at its timeout (timeoutSeconds, or a random
time between --min-request-timeout and twice that, as kube-apiserver picks), when the client
goes away, when the cache closes it (too slow), or when the gateway stops.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from gateway.endpoints import status
from gateway.endpoints.negotiation import MediaType
from gateway.storage.codec import dumps
from gateway.storage.interface import EventType, WatchEvent

Object = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def watch_timeout(timeout_seconds: int | None, min_request_timeout: int) -> float:
    if timeout_seconds is not None and timeout_seconds > 0:
        return float(timeout_seconds)
    return min_request_timeout * (1.0 + random.random())


class WatchEncoder:
    """Turns storage events into the wire form one client asked for."""

    def __init__(self, kind: str, api_version: str, media: MediaType,
                 transform: Callable[[Object, bool], Object] | None = None) -> None:
        self.kind = kind
        self.api_version = api_version
        self.media = media
        self.transform = transform  # Table / PartialObjectMetadata conversion
        self._first = True

    def bookmark(self, event: WatchEvent) -> Object:
        meta: Object = {"resourceVersion": str(event.revision), "creationTimestamp": None}
        if event.initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}

    def encode(self, event: WatchEvent) -> bytes:
        if event.type == EventType.ERROR:
            return _line("ERROR", _error_status(event.error))
        if event.type == EventType.BOOKMARK:
            return _line("BOOKMARK", self.bookmark(event))
        if self.transform is None:
            cached = event.cache.get("json")
            if cached is None:
                cached = event.cache["json"] = _line(event.type.value, event.object)
            return cached
        first, self._first = self._first, False
        return _line(event.type.value, self.transform(event.object or {}, first))


def _line(event_type: str, obj: Any) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + dumps(obj) + b"}\n"


def _error_status(error: Exception | None) -> Object:
    from gateway.storage.errors import StorageError, TooOldResourceVersionError

    if isinstance(error, TooOldResourceVersionError):
        return status.gone(
            f"too old resource version: {error.requested} ({error.current})"
        ).to_status()
    if isinstance(error, StorageError):
        return status.from_storage_error(error).to_status()
    return status.internal_error(str(error)).to_status()


def error_event(error: Exception) -> WatchEvent:
    return WatchEvent(EventType.ERROR, "", None, 0, error=error)


async def stream(request: web.BaseRequest, events: Any, encoder: WatchEncoder,
                 timeout: float, stopping: asyncio.Event | None = None) -> web.StreamResponse:
    """Send ``events`` until the timeout, the end of the stream, or the client leaves."""
    response = web.StreamResponse(status=200, headers={
        "Content-Type": encoder.media.content_type, "Cache-Control": "no-cache, private",
    })
    response.enable_chunked_encoding()
    await response.prepare(request)
    request["gateway.response_started"] = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    stop_task = asyncio.ensure_future(stopping.wait()) if stopping is not None else None
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            event = await _next(events, remaining, stop_task)
            if event is None:
                break
            await response.write(encoder.encode(event))
            if event.type == EventType.ERROR:
                break
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    finally:
        if stop_task is not None:
            stop_task.cancel()
        stop = getattr(events, "stop", None)
        if stop is not None:
            stop()
    await response.write_eof()
    return response


async def _next(events: Any, timeout: float,
                stop_task: asyncio.Future | None) -> WatchEvent | None:
    """The next event, or None at the timeout, the end of the stream, or a stop."""
    next_event = asyncio.ensure_future(events.__anext__())
    waiting = {next_event} if stop_task is None else {next_event, stop_task}
    done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if next_event not in done:
        next_event.cancel()
        return None
    try:
        return next_event.result()
    except StopAsyncIteration:
        return None
