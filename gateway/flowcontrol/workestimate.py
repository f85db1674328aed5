"""How many seats a request occupies, and for how long (kube's
k8s.io/apiserver pkg/util/flowcontrol/request: the work estimator, the object count tracker and
the watch tracker).

- A list costs one seat per 100 objects it makes the server go through, from the number of
  objects stored for its resource: all of them when the watch cache serves it, those plus the
  limit when it goes to storage with a selector, twice the limit otherwise; a list of one
  named object costs one seat, and so does a list of a resource whose count is not known (an
  aggregated one: its backend does the work). A watch costs one seat unless it asks for its
  initial events (``sendInitialEvents=true``), which cost what the list would.
- A write (create, update, patch, delete) costs one seat while it executes and, when ten or
  more watches are interested in it, a seat per ten watchers held 5 ms more after it ends
  (the fan-out of its event).
- Every other request costs one seat. No request costs more than its level's maximum
  (15% of its nominal limit, or its limit over its hand size, between 1 and 10).

Object counts are polled from storage every ``--etcd-count-metric-poll-period`` (1m, as
kube's stores poll them) and go stale after three minutes without an answer.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import structlog

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.flowcontrol.observe import FlowSeries
from gateway.flowcontrol.queueset import WorkEstimate
from gateway.storage.errors import StorageError
from gateway.storage.factory import StorageFactory

log = structlog.get_logger(__name__)

MINIMUM_SEATS = 1
MAXIMUM_SEATS = 10
OBJECTS_PER_SEAT = 100
WATCHES_PER_SEAT = 10
EVENT_ADDITIONAL_DURATION = 0.005
STALE_AFTER = 180.0

_MUTATING = frozenset({"create", "update", "patch", "delete"})
_READ_ONLY = frozenset({"get", "list", "watch", "proxy"})
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def group_resource(group: str, resource: str) -> str:
    """kube's GroupResource.String(): ``resource`` for the core group, else
    ``resource.group``."""
    return f"{resource}.{group}" if group else resource


class ObjectCounts:
    """How many objects each resource has in storage, as last polled."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._counts: dict[str, tuple[int, float]] = {}
        #: Called with (resource, count) after each poll: apiserver_storage_objects.
        self.observers: list[Callable[[str, int], None]] = []

    def set(self, key: str, count: int) -> None:
        self._counts[key] = (count, self.clock())
        for observe in self.observers:
            observe(key, count)

    def get(self, key: str) -> tuple[int, str]:
        """(count, state): state is "" for a fresh count, "stale" or "unknown"."""
        known = self._counts.get(key)
        if known is None:
            return 0, "unknown"
        count, updated = known
        if self.clock() - updated > STALE_AFTER:
            return count, "stale"
        return count, ""

    async def poll(self, factory: StorageFactory, period: float) -> None:
        """Count every watch cache's resource in storage, every ``period`` seconds."""
        while True:
            for prefix, cacher in list(factory.cachers.items()):
                parts = prefix.strip("/").split("/")
                if len(parts) != 2:
                    continue
                group = "" if parts[0] == "core" else parts[0]
                try:
                    count = await cacher.count(prefix)
                except (StorageError, OSError) as err:
                    log.debug("counting objects failed", prefix=prefix, error=str(err))
                    continue
                self.set(group_resource(group, parts[1]), count)
            await asyncio.sleep(period)


class WatchTracker:
    """The watches open now, by what they watch (kube's watchTracker, without its index on
    pods' node names: the gateway serves no pods)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str, str], int] = {}

    def register(self, info: RequestInfo) -> Callable[[], None]:
        """Count a watch that started executing; call what this returns when it ends."""
        key = (info.api_group, info.resource, info.namespace, info.name)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1

        def forget() -> None:
            left = counts.get(key, 0) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)

        return forget

    def interested(self, info: RequestInfo) -> int:
        """The watches a change made by this request is sent to: those of its resource,
        of its namespace, and of its object."""
        if info.verb in _READ_ONLY:
            return 0
        counts = self._counts
        key = (info.api_group, info.resource, "", "")
        total = counts.get(key, 0)
        if info.namespace:
            total += counts.get((info.api_group, info.resource, info.namespace, ""), 0)
        if info.name:
            total += counts.get((info.api_group, info.resource, info.namespace, info.name), 0)
        return total


def _parse_bool(value: str) -> bool:
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(value)


class WorkEstimator:
    """kube's default work estimator."""

    def __init__(self, counts: ObjectCounts, watches: WatchTracker,
                 max_seats: Callable[[str], int]) -> None:
        self.counts = counts
        self.watches = watches
        self.max_seats = max_seats

    def _maximum(self, level: str) -> int:
        seats = self.max_seats(level)
        return MAXIMUM_SEATS if seats <= 0 or seats > MAXIMUM_SEATS else seats

    def estimate(self, info: RequestInfo, query: Any, level: str,
                 flow: FlowSeries) -> WorkEstimate:
        verb = info.verb
        if verb == "list" or verb == "watch":
            return WorkEstimate(self._list_seats(info, query, level))
        if verb in _MUTATING:
            return self._mutating(info, level, flow)
        return WorkEstimate(MINIMUM_SEATS)

    def _list_seats(self, info: RequestInfo, query: Any, level: str) -> int:
        maximum = self._maximum(level)
        if info.name:  # a list of one named object is a get
            return MINIMUM_SEATS
        if not query:  # the common case: a plain list, from the cache
            return self._cached_list_seats(info, maximum)
        try:
            limit = int(query.get("limit") or 0)
            initial = query.get("sendInitialEvents")
            send_initial = _parse_bool(initial) if initial else False
            for name in ("watch", "allowWatchBookmarks"):
                if query.get(name):
                    _parse_bool(query[name])
            if query.get("timeoutSeconds"):
                int(query["timeoutSeconds"])
        except ValueError:  # bound to fail validation: as much as it might cost
            return maximum
        if info.verb == "watch" and not send_initial:
            return MINIMUM_SEATS
        from_cache = info.verb == "watch" or not _lists_from_storage(query, limit)
        stored, state = self.counts.get(group_resource(info.api_group, info.resource))
        if state == "stale":
            return maximum
        if state == "unknown":  # typically an aggregated resource: its backend does the work
            return MINIMUM_SEATS
        limited = limit if 0 < limit < stored else stored
        if from_cache:
            objects = stored
        elif query.get("fieldSelector") or query.get("labelSelector"):
            objects = stored + limited
        else:
            objects = 2 * limited
        seats = math.ceil(objects / OBJECTS_PER_SEAT)
        return min(max(seats, MINIMUM_SEATS), maximum)

    def _cached_list_seats(self, info: RequestInfo, maximum: int) -> int:
        stored, state = self.counts.get(group_resource(info.api_group, info.resource))
        if state:
            return maximum if state == "stale" else MINIMUM_SEATS
        return min(max(math.ceil(stored / OBJECTS_PER_SEAT), MINIMUM_SEATS), maximum)

    def _mutating(self, info: RequestInfo, level: str, flow: FlowSeries) -> WorkEstimate:
        if info.resource == "serviceaccounts" and info.subresource == "token":
            return WorkEstimate(MINIMUM_SEATS)  # a token request sends no event
        watchers = self.watches.interested(info)
        flow.watch_count.observe(watchers)
        if watchers < WATCHES_PER_SEAT:
            return WorkEstimate(1)
        final = math.ceil(watchers / WATCHES_PER_SEAT)
        work = final * EVENT_ADDITIONAL_DURATION
        final = min(final, self._maximum(level))
        return WorkEstimate(1, final, work / final)


def _lists_from_storage(query: Any, limit: int) -> bool:
    """kube's shouldListFromStorage, with consistent lists served from the watch cache (on by
    default in kube 1.32): a continuation, or a resourceVersionMatch the cache does not
    serve."""
    version = query.get("resourceVersion") or ""
    match = query.get("resourceVersionMatch") or ""
    if query.get("continue"):
        return True
    legacy_exact = limit > 0 and not match and version not in ("", "0")
    return (bool(match) and match != "NotOlderThan") or legacy_exact
