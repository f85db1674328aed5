"""Following a resource's watch cache from a controller, as an informer does: every change is
handed to the controller, and a lost watch is started again, with the full current state, so
nothing is missed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from gateway.apimachinery import status
from gateway.registry.store import RESTStore
from gateway.storage.errors import StorageError
from gateway.storage.interface import EventType

log = structlog.get_logger(__name__)

_CHANGES = (EventType.ADDED, EventType.MODIFIED, EventType.DELETED)


async def follow(store: RESTStore, handle: Callable[[Any], Awaitable[None]], *,
                 initial: bool = False, who: str = "controller") -> None:
    """Call ``handle`` for every change of ``store``'s objects, forever: from the current
    state as ADDED events when ``initial``, and again in full after a lost watch."""
    delay = 0.5
    while True:
        try:
            watch = await store.cacher.watch_cached(store.resource.storage_prefix,
                                                    revision=0, send_initial=initial)
            async for event in watch:
                if event.type in _CHANGES:
                    await handle(event)
            delay = 0.5
        except (StorageError, status.StatusError) as err:
            log.warning(f"{who} lost its watch", resource=store.resource.plural,
                        error=str(err))
        await asyncio.sleep(delay)
        delay = min(delay * 2, 10)
        initial = True
