"""Removes events older than --event-ttl (kube keeps them in etcd with a lease of that TTL).

An event's age counts from its last write: the newest of its series' last observation, its
lastTimestamp, its eventTime and its creation.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.listoptions import ListOptions
from gateway.apis.core.events import last_seen
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.registry.tables import parse_time
from gateway.storage.errors import StorageError

log = structlog.get_logger(__name__)


class EventReaper:
    def __init__(self, events: RESTStore, ttl: float) -> None:
        self.events = events
        self.ttl = ttl
        self.interval = max(1.0, min(60.0, ttl / 2))

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                removed = await self.reap()
                if removed:
                    log.info("expired events removed", count=removed)
            except (StorageError, status.StatusError) as err:
                log.warning("removing expired events failed", error=str(err))

    async def reap(self) -> int:
        now = datetime.now(UTC)
        listed = await self.events.list("", ListOptions(resource_version="0"))
        removed = 0
        for event in listed.items:
            moment = parse_time(last_seen(event))
            if moment is None or (now - moment).total_seconds() < self.ttl:
                continue
            meta = event["metadata"]
            try:
                await self.events.delete(meta.get("namespace", ""), meta["name"],
                                         DeleteOptions(), WriteOptions())
                removed += 1
            except status.StatusError as err:
                if err.code != 404:
                    raise
        return removed
