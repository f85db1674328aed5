"""Making the store the flags ask for, and a watch cache per resource on top of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from gateway.storage.errors import StorageError
from gateway.storage.interface import Storage
from gateway.storage.watchcache import Cacher

log = structlog.get_logger(__name__)


async def wait_until_reachable(storage: Storage, *, describe: str,
                               log_window: float = 10.0) -> None:
    """Retry the store's health check with back-off until it answers.

    One log line per ``log_window`` seconds says what is failing and how often it was tried,
    so an unreachable etcd is visible without flooding the log.
    """
    delay, attempts, window_start = 0.2, 0, time.monotonic()
    while True:
        try:
            await storage.check_health()
        except StorageError as err:
            attempts += 1
            now = time.monotonic()
            if attempts == 1 or now - window_start >= log_window:
                log.warning("storage not reachable; retrying", storage=describe,
                            attempts=attempts, error=str(err))
                window_start = now
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if attempts:
            log.info("storage reachable", storage=describe, attempts=attempts + 1)
        return


class StorageFactory:
    """Hands out one watch cache per resource prefix over the shared store."""

    def __init__(self, storage: Storage, *,
                 on_terminated: Callable[[str], None] | None = None) -> None:
        self.storage = storage
        #: Told each cache's prefix whenever it closes a watcher that cannot keep up.
        self.on_terminated = on_terminated
        self.cachers: dict[str, Cacher] = {}
        self._started = False
        #: The caches made before the start: readiness waits for these only, so a cache
        #: added while serving (a new CRD) warming up does not make /readyz fail.
        self._initial: list[Cacher] = []

    def cacher(self, prefix: str, *, read_your_writes: bool = False) -> Cacher:
        """The watch cache of ``prefix``, made on first use. ``read_your_writes``: the caller
        decides from this cache (an authorizer, admission, routing), so every write to the
        resource returns only once the cache has it; asked once, it stays on for every user
        of the cache, and is asked for when the caller is built, before any write."""
        cacher = self.cachers.get(prefix)
        if cacher is None:
            cacher = self.cachers[prefix] = Cacher(self.storage, prefix,
                                                   on_terminated=self.on_terminated)
            if self._started:
                asyncio.get_running_loop().create_task(cacher.start())
        if read_your_writes:
            cacher.read_your_writes = True
        return cacher

    async def release(self, prefix: str) -> None:
        """Stop and forget the cache of ``prefix`` (a CRD went away)."""
        cacher = self.cachers.pop(prefix, None)
        if cacher is not None:
            await cacher.close()

    async def start_caches(self) -> None:
        self._started = True
        self._initial = list(self.cachers.values())
        for cacher in self._initial:
            await cacher.start()

    @property
    def caches_ready(self) -> bool:
        return self._started and all(c.ready for c in self._initial)

    async def close(self) -> None:
        for cacher in self.cachers.values():
            await cacher.close()
