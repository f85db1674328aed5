"""client-go's rate-limited work queue and its workers, for controllers keyed by name (kube's
per-namespace controllers: one sync per namespace, however many events asked for it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from gateway.apimachinery import status
from gateway.storage.errors import StorageError

log = structlog.get_logger(__name__)

#: client-go's default controller rate limiter: 5 ms doubling per failure, at most 1000 s.
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0


class WorkQueue:
    """A key waits once however often it is added, and is never handled by two workers at
    once (added while being handled: handled again after). A failed key comes back after a
    delay that doubles with each failure in a row."""

    def __init__(self, backoff_max: float = BACKOFF_MAX) -> None:
        self.backoff_max = backoff_max
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    async def get(self) -> str:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def add_rate_limited(self, key: str) -> None:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if key in self._timers:
            return
        delay = min(BACKOFF_BASE * 2 ** min(failures, 32), self.backoff_max)
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


async def run_workers(queue: WorkQueue, sync: Callable[[str], Awaitable[None]], *,
                      workers: int, who: str) -> None:
    """Handle the queue's keys with ``workers`` workers forever; a key whose sync fails is
    tried again later."""

    async def worker() -> None:
        while True:
            key = await queue.get()
            try:
                await sync(key)
                queue.forget(key)
            except (StorageError, status.StatusError) as err:
                log.warning(f"{who}: syncing failed; retrying", key=key, error=str(err))
                queue.add_rate_limited(key)
            except Exception:  # a bug must not stop the controller for every other key
                log.exception(f"{who}: syncing failed unexpectedly; retrying", key=key)
                queue.add_rate_limited(key)
            finally:
                queue.done(key)

    try:
        await asyncio.gather(*(worker() for _ in range(workers)))
    finally:
        queue.close()
