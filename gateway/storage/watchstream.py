"""A Watch fed by a producer through a bounded queue.

Backends and the watch cache hand events to their consumers through this one class, so every
watch ends the same way: the consumer calls ``stop()``, or the producer calls ``finish()``
(optionally with an error, delivered as a final ERROR event).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gateway.storage.interface import EventType, WatchEvent

_END = object()


class QueueWatch:
    """An async iterator of WatchEvents with a bounded buffer."""

    def __init__(
        self,
        maxsize: int = 1024,
        on_stop: Callable[[], None] | None = None,
        on_progress: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        # unbounded underneath, bounded by full(): finish() must always find room for its end
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._maxsize = maxsize
        self._room = asyncio.Event()
        self._on_stop = on_stop
        self._on_progress = on_progress
        self._finished = False  # the producer will send nothing more
        self._stopped = False  # the consumer wants nothing more

    @property
    def done(self) -> bool:
        return self._finished or self._stopped

    def full(self) -> bool:
        return self._queue.qsize() >= self._maxsize

    def put_nowait(self, event: WatchEvent) -> bool:
        """Queue ``event``; False (and nothing queued) when the buffer is full or closed."""
        if self.done or self.full():
            return False
        self._queue.put_nowait(event)
        return True

    async def put(self, event: WatchEvent) -> bool:
        """Queue ``event``, waiting for room (backpressure); False once the watch is done."""
        while not self.done and self.full():
            self._room.clear()
            await self._room.wait()
        if self.done:
            return False
        self._queue.put_nowait(event)
        return True

    def finish(self, error: Exception | None = None) -> None:
        """End the stream after what is queued; ``error`` becomes a final ERROR event."""
        if self.done:
            return
        self._finished = True
        if error is not None:
            self._queue.put_nowait(
                WatchEvent(type=EventType.ERROR, key="", object=None, revision=0, error=error)
            )
        self._queue.put_nowait(_END)

    def stop(self) -> None:
        """The consumer is done: drop what is queued and tell the producer once."""
        if self._stopped:
            return
        self._stopped = True
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_END)
        self._room.set()
        if self._on_stop is not None:
            callback, self._on_stop = self._on_stop, None
            callback()

    async def request_progress(self) -> None:
        """Ask the producer for a BOOKMARK at its current revision (see interface.Watch)."""
        if self._on_progress is not None and not self.done:
            await self._on_progress()

    def __aiter__(self) -> QueueWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        item = await self._queue.get()
        self._room.set()
        if item is _END:
            self._queue.put_nowait(_END)  # later calls end too
            raise StopAsyncIteration
        return item  # type: ignore[return-value]

    def qsize(self) -> int:
        """Events waiting (the end marker not counted)."""
        size = self._queue.qsize()
        return size - 1 if self.done and size else size

    def get_nowait(self) -> WatchEvent | None:
        """A waiting event, or None (also at the end, which stays in place)."""
        if self._queue.empty():
            return None
        item = self._queue.get_nowait()
        self._room.set()
        if item is _END:
            self._queue.put_nowait(_END)
            return None
        return item  # type: ignore[return-value]
