"""Streaming a watch over a chunked response: newline-terminated ``{"type","object"}`` JSON,
or kube's protobuf framing (``application/vnd.kubernetes.protobuf;stream=watch``: each event a
4-byte big-endian length and a meta/v1 WatchEvent holding the object's own protobuf encoding).

Headers go out at once. Each event's encoding is made once per form (format, served version,
PartialObjectMetadata or not) and shared by every watcher that sends the same event so; a JSON
event of the stored version splices the watch cache's encoding of the object, made once per
object version for every list and watch (gateway/storage/cachedobject.py). A
watch ends at its timeout (timeoutSeconds, or a random time between --min-request-timeout and
twice that, as kube-apiserver picks), when the client goes away, when the cache closes it (too
slow), or when the gateway stops.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import prepare_response
from gateway.auth.audit.events import record
from gateway.endpoints.negotiation import MediaType
from gateway.endpoints.protobuf import ProtobufError
from gateway.endpoints.protobuf_encode import encode_object, watch_frame
from gateway.storage.apierrors import from_storage_error
from gateway.storage.codec import dumps
from gateway.storage.interface import EventType, WatchEvent

Object = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def watch_timeout(timeout_seconds: int | None, min_request_timeout: int) -> float:
    if timeout_seconds is not None and timeout_seconds > 0:
        return float(timeout_seconds)
    return min_request_timeout * (1.0 + random.random())


class WatchEncoder:
    """Turns storage events into the wire form one client asked for: the object converted to
    the served version (``convert``, from the stored one; never changing the cache's shared
    object), then encoded once per event and version for every watcher that wants it so."""

    def __init__(self, kind: str, api_version: str, media: MediaType,
                 transform: Callable[[Object, bool], Object] | None = None, *,
                 convert: Callable[[Object], Object] | None = None) -> None:
        self.kind = kind
        self.api_version = api_version
        self.media = media
        self.transform = transform  # Table / PartialObjectMetadata conversion
        self.convert = convert
        self._protobuf = media.format == "protobuf"
        #: The object as the cache encoded it is the answer: JSON, stored version, as it is.
        self._splice = media.format == "json" and transform is None and convert is None
        #: A Table's first event differs from the others (its column headers); a plain
        #: object or its PartialObjectMetadata is the same for every watcher of this form.
        self.cacheable = transform is None or media.transform != "Table"
        self._key = (media.format, api_version, media.transform, media.transform_version)
        self.chunk_key = ("chunk", *self._key)
        self._first = True

    def bookmark(self, event: WatchEvent) -> Object:
        meta: Object = {"resourceVersion": str(event.revision), "creationTimestamp": None}
        if event.initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}

    def encode(self, event: WatchEvent) -> bytes:
        if event.type == EventType.ERROR:
            return self._event("ERROR", _error_status(event.error))
        if event.type == EventType.BOOKMARK:
            bookmark = self.bookmark(event)
            if self.transform is not None and self.cacheable:  # kube transforms it too
                bookmark = self.transform(bookmark, False)
            return self._event("BOOKMARK", bookmark)
        if self.cacheable:
            cached = event.cache.get(self._key)
            if cached is None:
                if self._splice and event.encoded is not None:
                    cached = _spliced_line(event.type.value, event.encoded.data)
                else:
                    cached = self._event(event.type.value, self._shaped(event.object))
                event.cache[self._key] = cached
            return cached
        first, self._first = self._first, False
        assert self.transform is not None
        return self._event(event.type.value,
                           self.transform(self._converted(event.object) or {}, first))

    def _event(self, event_type: str, obj: Any) -> bytes:
        if self._protobuf:
            return watch_frame(event_type, encode_object(obj))
        return _line(event_type, obj)

    def _shaped(self, obj: Object | None) -> Object | None:
        """The object in the served version, as PartialObjectMetadata when asked so."""
        converted = self._converted(obj)
        if self.transform is None:
            return converted
        return self.transform(converted or {}, False)

    def _converted(self, obj: Object | None) -> Object | None:
        if obj is None or self.convert is None:
            return obj
        return self.convert(obj)


class ConvertedEvents:
    """A watch whose objects are converted by a call out (a CRD's conversion webhook) before
    they are encoded: each event is copied with its object converted, the shared one left as
    it is. Pulled, never pushed (the conversion is awaited)."""

    def __init__(self, events: Any, convert: Callable[[list[Object]], Any]) -> None:
        self.events = events
        self.convert = convert

    def __aiter__(self) -> ConvertedEvents:
        return self

    async def __anext__(self) -> WatchEvent:
        event = await self.events.__anext__()
        if event.object is None or event.type in (EventType.BOOKMARK, EventType.ERROR):
            return event
        try:
            converted = (await self.convert([event.object]))[0]
        except status.StatusError as err:
            return WatchEvent(EventType.ERROR, event.key, None, event.revision,
                              error=_ConversionFailed(err))
        return WatchEvent(event.type, event.key, converted, event.revision)

    def stop(self) -> None:
        stop = getattr(self.events, "stop", None)
        if stop is not None:
            stop()


class _ConversionFailed(Exception):
    """A conversion that failed mid-watch: the watch ends with its Status."""

    def __init__(self, err: status.StatusError) -> None:
        super().__init__(err.message)
        self.status = err


def _line(event_type: str, obj: Any) -> bytes:
    return _spliced_line(event_type, dumps(obj))


def _spliced_line(event_type: str, encoded: bytes) -> bytes:
    """A JSON watch event line around an object already encoded."""
    return b"".join((b'{"type":"', event_type.encode(), b'","object":', encoded, b"}\n"))


def _error_status(error: Exception | None) -> Object:
    from gateway.storage.errors import StorageError

    if isinstance(error, StorageError):
        return from_storage_error(error).to_status()
    if isinstance(error, _ConversionFailed):
        return error.status.to_status()
    return status.internal_error(str(error)).to_status()


def error_event(error: Exception) -> WatchEvent:
    return WatchEvent(EventType.ERROR, "", None, 0, error=error)


#: A client whose socket buffer holds this much unsent data gets events queued, not pushed.
PUSH_HIGH_WATER = 256 * 1024


def _frame(line: bytes) -> bytes:
    """One HTTP/1.1 chunk, framed exactly as aiohttp frames its own."""
    return f"{len(line):x}\r\n".encode() + line + b"\r\n"


#: Under heavy fan-out, pushed events are written once per this many seconds per client.
COALESCE_WINDOW = 0.05
#: How many clients one flush must have written for the next one to wait for the window.
HEAVY_FLUSH = 100


class _Flusher:
    """Writes what the pushers gathered: right after the dispatcher's turn when few clients
    have data, once per window when many do, so each client gets one write for several
    events instead of one per event (the TLS write is the dominant cost per event)."""

    def __init__(self) -> None:
        self.dirty: list[_Pusher] = []
        self.scheduled = False
        self.heavy = False

    def mark(self, pusher: _Pusher) -> None:
        self.dirty.append(pusher)
        if not self.scheduled:
            self.scheduled = True
            loop = asyncio.get_running_loop()
            if self.heavy:
                loop.call_later(COALESCE_WINDOW, self.flush)
            else:
                loop.call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        dirty, self.dirty = self.dirty, []
        for pusher in dirty:
            pusher.flush()
        self.heavy = len(dirty) > HEAVY_FLUSH


_FLUSHER = _Flusher()


class _Pusher:
    """Takes events from the cache's dispatcher for one client; the flusher writes them."""

    def __init__(self, transport: Any, encoder: WatchEncoder) -> None:
        self.transport = transport
        self.encoder = encoder
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.error = False

    def __call__(self, event: WatchEvent) -> bool:
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        if transport.get_write_buffer_size() + self.pending_bytes > PUSH_HIGH_WATER:
            return False
        try:
            framed = self._framed(event)
        except ProtobufError:  # not in the dispatcher: the pull path ends this watch with it
            return False
        if event.type == EventType.ERROR:
            self.error = True
        if not self.pending:
            _FLUSHER.mark(self)
        self.pending.append(framed)
        self.pending_bytes += len(framed)
        return True

    def _framed(self, event: WatchEvent) -> bytes:
        if self.encoder.cacheable and event.type not in (EventType.ERROR, EventType.BOOKMARK):
            key = self.encoder.chunk_key  # per form: another version or format is another
            framed = event.cache.get(key)
            if framed is None:
                framed = event.cache[key] = _frame(self.encoder.encode(event))
            return framed
        return _frame(self.encoder.encode(event))

    def flush(self) -> None:
        """Write what is pending (before anything else is written to this client)."""
        if not self.pending:
            return
        data = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def stream(request: web.BaseRequest, events: Any, encoder: WatchEncoder,
                 timeout: float, stopping: asyncio.Event | None = None) -> web.StreamResponse:
    """Send ``events`` until the timeout, the end of the stream, or the client leaves."""
    response = web.StreamResponse(status=200,
                                  headers={"Content-Type": encoder.media.stream_content_type})
    response.enable_chunked_encoding()
    await prepare_response(request, response)  # with the filters' Cache-Control, CORS...
    request["gateway.response_started"] = True
    audit = record(request)
    if audit is not None:
        audit.emit("ResponseStarted", responseStatus={"metadata": {}, "code": 200})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    stop_task = asyncio.ensure_future(stopping.wait()) if stopping is not None else None
    try:
        if hasattr(events, "attach"):
            await _pull_and_push(response, request, events, encoder, deadline, stop_task)
        else:
            await _pull(response, events, encoder, deadline, stop_task)
    finally:
        if stop_task is not None:
            stop_task.cancel()
        stop = getattr(events, "stop", None)
        if stop is not None:
            stop()
    await response.write_eof()
    return response


async def _write(response: web.StreamResponse, encoder: WatchEncoder,
                 event: WatchEvent) -> bool:
    """Write one event; False when it ended the stream (an ERROR)."""
    await response.write(encoder.encode(event))
    return event.type != EventType.ERROR


async def _pull(response: web.StreamResponse, events: Any, encoder: WatchEncoder,
                deadline: float, stop_task: asyncio.Future | None) -> None:
    loop = asyncio.get_running_loop()
    while (remaining := deadline - loop.time()) > 0:
        event = await _next(events, remaining, stop_task)
        if event is None or not await _write(response, encoder, event):
            return


async def _pull_and_push(response: web.StreamResponse, request: web.BaseRequest, watcher: Any,
                         encoder: WatchEncoder, deadline: float,
                         stop_task: asyncio.Future | None) -> None:
    """Drain what waits with backpressure, then let the dispatcher push until the client
    falls behind (and so on), the watch ends, or time is up."""
    loop = asyncio.get_running_loop()
    pusher = _Pusher(request.transport, encoder)
    while loop.time() < deadline:
        pusher.flush()  # what was pushed goes out before anything pulled
        while (event := watcher.next_nowait()) is not None:
            if not await _write(response, encoder, event):
                return
        if watcher.closed or pusher.error:
            return
        if not watcher.attach(pusher):
            continue
        waiting = [asyncio.ensure_future(watcher.wake.wait())]
        if stop_task is not None:
            waiting.append(stop_task)
        done, _ = await asyncio.wait(waiting, timeout=deadline - loop.time(),
                                     return_when=asyncio.FIRST_COMPLETED)
        waiting[0].cancel()
        watcher.push = None
        pusher.flush()
        if not done or (stop_task is not None and stop_task in done):
            return
        if request.transport is None or request.transport.is_closing():
            return
    pusher.flush()


async def _next(events: Any, timeout: float,
                stop_task: asyncio.Future | None) -> WatchEvent | None:
    """The next event, or None at the timeout, the end of the stream, or a stop."""
    next_event = asyncio.ensure_future(events.__anext__())
    waiting = {next_event} if stop_task is None else {next_event, stop_task}
    try:
        done, _ = await asyncio.wait(waiting, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the client went away: the pull goes with it (left
        next_event.cancel()  # pending, it would end when the stream stops, and be unread)
        raise
    if next_event not in done:
        next_event.cancel()
        return None
    try:
        return next_event.result()
    except StopAsyncIteration:
        return None
