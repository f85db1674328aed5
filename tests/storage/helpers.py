"""What the storage tests share: the key layout, reading watches, and waiting for etcd.

Objects come from tests.support.api (``configmap``, ``sized_configmap``), resource versions
from its ``rv``, and polling from tests.support.wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gateway.storage.errors import StorageUnavailableError
from gateway.storage.interface import EventType, WatchEvent
from tests.support.api import configmap
from tests.support.wait import eventually_async

T = TypeVar("T")

#: The resource prefix every storage test writes under.
P = "/core/configmaps/"


def key(name: str, ns: str = "default") -> str:
    """The storage key of ConfigMap ``ns/name``."""
    return f"{P}{ns}/{name}"


async def next_change(watch: Any, timeout: float = 30.0) -> WatchEvent:
    """The next event that is not a bookmark; an ERROR event raises its error.

    ``timeout`` only bounds how long to wait before the test fails."""
    while True:
        event = await asyncio.wait_for(anext(watch), timeout)
        if event.type == EventType.ERROR:
            assert event.error is not None
            raise event.error
        if event.type != EventType.BOOKMARK:
            return event


async def changes(watch: Any, count: int, timeout: float = 30.0) -> list[WatchEvent]:
    return [await next_change(watch, timeout) for _ in range(count)]


async def drain(watch: Any, timeout: float = 30.0) -> list[WatchEvent]:
    """Every event up to the end of the stream (which must come within ``timeout``)."""
    async def read() -> list[WatchEvent]:
        return [event async for event in watch]

    return await asyncio.wait_for(read(), timeout)


async def expect_next_is_only(store: Any, watch: Any, name: str = "marker") -> None:
    """Nothing more is on ``watch``: a marker written now is the very next change.

    Proves a watch quiet without waiting out a period of silence: anything the watch still
    had to deliver would come before the marker."""
    marker = await store.create(key(name), configmap(name))
    event = await next_change(watch)
    assert (event.type, event.key) == (EventType.ADDED, key(name)), event
    assert event.revision == int(marker["metadata"]["resourceVersion"])


async def retry_while_unavailable(make: Callable[[], Awaitable[T]]) -> T:
    """Await ``make()`` until etcd is back (the store reconnects on its own); ``make`` must
    return something truthy (an object)."""

    async def attempt() -> T | None:
        try:
            return await make()
        except StorageUnavailableError:
            return None

    return await eventually_async(attempt, interval=0.1, what="etcd to answer again")
