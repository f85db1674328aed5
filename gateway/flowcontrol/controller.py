"""API Priority and Fairness: the configuration digested into priority levels, and the
classification of each request (kube's k8s.io/apiserver pkg/util/flowcontrol apf_controller.go).

Whenever a FlowSchema or PriorityLevelConfiguration changes, every one is read again:

- each priority level gets a queue set; the server's concurrency limit (the sum of
  --max-requests-inflight and --max-mutating-requests-inflight) is shared among the levels by
  their ``nominalConcurrencyShares``: a level's nominal limit is
  ``ceil(limit * shares / sum of shares)``. ``lendablePercent`` of it may be lent to other
  levels, and it may borrow up to ``borrowingLimitPercent`` of it (unlimited when unset);
- FlowSchemas whose level does not exist are left out (their ``Dangling`` condition says so,
  see gateway/controllers/flowcontrol.py); the mandatory ``exempt`` and ``catch-all`` schemas
  and levels are imagined while their objects are missing;
- a level that is gone but still has requests keeps serving them until it is idle.

Every 10 seconds the levels' current limits are set again from their seat demand over the
last period (high watermark, and a smoothed mean plus deviation): levels that need more seats
borrow what others lend, each getting the same fraction of its target within its bounds
(gateway/flowcontrol/allocation.py), as kube's borrowing does.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.apis.flowcontrol.bootstrap import CATCH_ALL, EXEMPT, mandatory
from gateway.flowcontrol.allocation import AllocationError, AllocItem, allocate
from gateway.flowcontrol.observe import FlowControlMetrics, FlowSeries, LevelSeries, NoMetrics
from gateway.flowcontrol.queueset import Integrator, QueueSet, QueuingConfig
from gateway.flowcontrol.retryafter import DroppedRequests
from gateway.flowcontrol.rules import FlowSchema, flow_hash
from gateway.flowcontrol.workestimate import ObjectCounts, WatchTracker, WorkEstimator
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore

log = structlog.get_logger(__name__)

#: How often levels' current limits are set again from their demand.
BORROWING_PERIOD = 10.0
#: The smoothing of seat demand: a half-life of 5 minutes at one adjustment per 10 s.
SMOOTHING = 0.977
#: A level's widest request, as a fraction of its nominal limit.
MAX_SEATS_FRACTION = 0.15
#: Classifications remembered (by user and request attributes) until the next change.
CLASSIFICATION_CACHE = 4096


def _round(value: float) -> int:
    """Go's math.Round for the non-negative values here: halves away from zero."""
    return math.floor(value + 0.5)


class Level:
    """The state of one priority level."""

    def __init__(self, name: str, clock: Callable[[], float], metrics: FlowControlMetrics,
                 call_later: Callable[[float, Callable[[], None]], object] | None,
                 on_idle: Callable[[Level], None]) -> None:
        self.name = name
        self.uid = ""
        self.exempt = False
        self.shares = 0
        self.lendable_percent = 0
        self.borrowing_limit_percent: int | None = None
        self.queuing = QueuingConfig()
        self.demand = Integrator(clock)
        self.qs = QueueSet(name, clock, self.demand, call_later=call_later,
                           on_idle=lambda: on_idle(self))
        self.series: LevelSeries = metrics.level(name)
        self.dropped = DroppedRequests()
        self.nominal = self.min_cl = self.max_cl = 0
        self.current = -1  # not yet set
        self.max_seats = 0
        self.quiescing = False
        # seat demand statistics (kube's seatDemandStats)
        self.high_watermark = 0
        self.average = self.deviation = self.smoothed = 0.0

    def apply(self, obj: dict) -> None:
        """Take the level's spec; ValueError when it is one the gateway cannot use."""
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        kind = spec.get("type")
        limited, exempt = spec.get("limited"), spec.get("exempt")
        if (kind == "Limited") != isinstance(limited, dict):
            raise ValueError("broken union structure at the top, for Limited")
        if (kind == "Exempt") != isinstance(exempt, dict):
            raise ValueError("broken union structure at the top, for Exempt")
        if (kind == "Exempt") != (self.name == EXEMPT):
            raise ValueError("non-alignment between name and type")
        if kind == "Exempt":
            assert isinstance(exempt, dict)
            queuing = QueuingConfig(queues=-1)
            shares = exempt.get("nominalConcurrencyShares") or 0
            lendable, borrowing = exempt.get("lendablePercent") or 0, None
        else:
            assert isinstance(limited, dict)
            response = limited.get("limitResponse") or {}
            raw = response.get("queuing")
            if (response.get("type") == "Reject") != (raw is None):
                raise ValueError("broken union structure for limit response")
            queuing = QueuingConfig() if raw is None else QueuingConfig.of(
                int(raw.get("queues") or 0), int(raw.get("handSize") or 0),
                int(raw.get("queueLengthLimit") or 0))
            shares = limited.get("nominalConcurrencyShares")
            shares = 30 if shares is None else shares
            lendable = limited.get("lendablePercent") or 0
            borrowing = limited.get("borrowingLimitPercent")
        self.uid = meta.get("uid") or ""
        self.exempt = kind == "Exempt"
        self.queuing = queuing
        self.shares = int(shares)
        self.lendable_percent = int(lendable)
        self.borrowing_limit_percent = None if borrowing is None else int(borrowing)

    def note_demand(self) -> None:
        """Read the seat demand of the last period (and start the next)."""
        elapsed, average, deviation, maximum = self.demand.reset()
        self.high_watermark = _round(maximum)
        if elapsed <= 0:
            return
        self.average, self.deviation = average, deviation
        envelope = average + deviation
        self.smoothed = max(envelope, SMOOTHING * self.smoothed + (1 - SMOOTHING) * envelope)

    @property
    def min_current(self) -> int:
        """The least this level's current limit may be: its demand's high watermark, within
        its lower bound and (for a limited level) its nominal limit."""
        if self.exempt:
            return max(self.min_cl, self.high_watermark)
        return max(self.min_cl, min(self.nominal, self.high_watermark))


@dataclass(slots=True)
class Classification:
    """Where a request goes: its FlowSchema, priority level and flow."""

    schema: FlowSchema
    level: Level
    distinguisher: str
    hand: tuple[int, ...] | None
    flow: FlowSeries


def _mandatory_schema(name: str) -> FlowSchema:
    obj = mandatory("FlowSchema", name)
    assert obj is not None
    return FlowSchema.from_object(obj)


class FlowControl:
    """The priority levels and FlowSchemas in force, and the classification of requests."""

    def __init__(self, server_limit: int, metrics: FlowControlMetrics | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 call_later: Callable[[float, Callable[[], None]], object] | None = None
                 ) -> None:
        self.server_limit = server_limit
        self.metrics = metrics or NoMetrics()
        self.clock = clock
        self.call_later = call_later or _loop_call_later
        self.levels: dict[str, Level] = {}
        self.schemas: list[FlowSchema] = []
        self.nominal_sum = 0
        self._cache: dict[tuple, Classification] = {}
        self._flows: dict[tuple[str, str], FlowSeries] = {}
        self._dirty: asyncio.Event | None = None
        self.counts = ObjectCounts()
        self.watches = WatchTracker()
        self.estimator = WorkEstimator(self.counts, self.watches, self.max_seats)
        self.digest([], [])  # the mandatory configuration until the objects are read

    # -- configuration -------------------------------------------------------------------------

    def digest(self, level_objects: list[dict], schema_objects: list[dict]) -> None:
        """Put the given configuration objects in force."""
        levels: dict[str, Level] = {}
        share_sum = 0
        for obj in level_objects:
            name = (obj.get("metadata") or {}).get("name") or ""
            level = self.levels.get(name) or self._new_level(name)
            try:
                level.apply(obj)
            except ValueError as err:
                log.warning("ignoring a PriorityLevelConfiguration that cannot be used",
                            name=name, error=str(err))
                continue
            level.quiescing = False
            levels[name] = level
            share_sum += level.shares
        declared = set(levels)
        schemas = []
        for obj in schema_objects:
            schema = FlowSchema.from_object(obj)
            if schema.level in declared:  # else dangling: left out
                schemas.append(schema)
        schemas.sort(key=lambda s: s.order)
        names = {s.name for s in schemas}
        if EXEMPT not in names:
            schemas.insert(0, _mandatory_schema(EXEMPT))
        if CATCH_ALL not in names:
            schemas.append(_mandatory_schema(CATCH_ALL))
        for name, level in self.levels.items():
            if name in levels:
                continue
            if name not in (EXEMPT, CATCH_ALL) or name in declared:
                if level.qs.idle:
                    log.info("priority level removed", level=name)
                    continue
                level.quiescing = True  # serves what it has, then goes
            levels[name] = level
            share_sum += level.shares
        for name in (EXEMPT, CATCH_ALL):
            if name not in levels:  # imagined until its object exists
                level = self._new_level(name)
                proto = mandatory("PriorityLevelConfiguration", name)
                assert proto is not None
                level.apply(proto)
                levels[name] = level
                share_sum += level.shares
        self._finish(levels, share_sum)
        self.levels = levels
        self.schemas = schemas
        self._cache.clear()

    def _new_level(self, name: str) -> Level:
        return Level(name, self.clock, self.metrics, self.call_later, self._level_idle)

    def _level_idle(self, level: Level) -> None:
        if level.quiescing and self._dirty is not None:
            self._dirty.set()  # it can go now

    def _finish(self, levels: dict[str, Level], share_sum: int) -> None:
        """Nominal limits and bounds, then the current limits."""
        nominal_sum = 0
        for level in levels.values():
            nominal = math.ceil(self.server_limit * level.shares / share_sum) \
                if share_sum else 0
            lendable = _round(nominal * level.lendable_percent / 100)
            borrowing = self.server_limit if level.borrowing_limit_percent is None \
                else _round(nominal * level.borrowing_limit_percent / 100)
            level.nominal, level.min_cl, level.max_cl = \
                nominal, nominal - lendable, nominal + borrowing
            level.series.limits(nominal, nominal - lendable, nominal + borrowing)
            nominal_sum += nominal
            queuing = level.queuing
            level.max_seats = max(1, min(math.ceil(nominal * MAX_SEATS_FRACTION),
                                         nominal // queuing.hand_size)) \
                if queuing.queues > 0 and queuing.hand_size > 0 else 0
            if level.current < 0:
                level.current = nominal - lendable // 2
        self.nominal_sum = nominal_sum
        self.update_borrowing(levels)

    def update_borrowing(self, levels: dict[str, Level] | None = None) -> None:
        """Set every level's current limit from its recent seat demand (kube's
        updateBorrowingLocked)."""
        levels = self.levels if levels is None else levels
        remaining = self.nominal_sum
        items: list[AllocItem] = []
        index: dict[str, int] = {}
        min_sum = min_current_sum = 0
        for name, level in levels.items():
            level.note_demand()
            least = level.min_current
            if level.exempt:
                remaining -= least
                continue
            index[name] = len(items)
            items.append(AllocItem(target=max(float(least), level.smoothed), lower=least,
                                   upper=level.max_cl))
            min_sum += level.min_cl
            min_current_sum += least
        allocations: list[float] = []
        share = 0.0
        if remaining <= min_sum:
            self.metrics.fair_fraction(0)
        elif remaining <= min_current_sum:
            share = (remaining - min_sum) / (min_current_sum - min_sum)
            self.metrics.fair_fraction(0)
        else:
            try:
                allocations, fraction = allocate(self.nominal_sum, items)
                self.metrics.fair_fraction(fraction)
            except AllocationError as err:
                log.error("unable to derive new concurrency limits", error=str(err))
                allocations = [float(max(levels[n].current, 0)) for n in index]
        for name, level in levels.items():
            least = level.min_current
            if name not in index:
                current = least
            elif remaining <= min_sum:
                current = level.min_cl
            elif remaining <= min_current_sum:
                current = level.min_cl + _round((least - level.min_cl) * share)
            else:
                current = _round(allocations[index[name]])
            level.current = current
            level.series.current_limit(current)
            target = items[index[name]].target if name in index else float(least)
            level.series.demand(level.high_watermark, level.average, level.deviation,
                                level.smoothed, target)
            level.qs.configure(level.queuing, current)

    def max_seats(self, level: str) -> int:
        """The widest request of a level (0: not set)."""
        found = self.levels.get(level)
        return found.max_seats if found is not None else 0

    # -- following the configuration objects --------------------------------------------------

    async def run(self, read: Callable[[], tuple[list[dict], list[dict]]],
                  changes: Callable[[Callable[[Any], Any]], Any]) -> None:
        """Digest the configuration whenever it changes (``changes`` calls its argument for
        every change, forever), and adjust borrowing every BORROWING_PERIOD."""
        self._dirty = dirty = asyncio.Event()

        async def changed(_: Any) -> None:
            dirty.set()

        tasks = [asyncio.ensure_future(changes(changed)),
                 asyncio.ensure_future(self._borrowing())]
        try:
            while True:
                await dirty.wait()
                dirty.clear()
                levels, schemas = read()
                self.digest(levels, schemas)
                await asyncio.sleep(0.01)  # one digest for a burst of changes
        finally:
            for task in tasks:
                task.cancel()

    async def follow(self, schemas: RESTStore, levels: RESTStore) -> None:
        """``run`` over the stores' watch caches."""

        def read() -> tuple[list[dict], list[dict]]:
            return (levels.cacher.objects(levels.resource.storage_prefix),
                    schemas.cacher.objects(schemas.resource.storage_prefix))

        async def changes(handle: Callable[[Any], Any]) -> None:
            await asyncio.gather(follow(schemas, handle, initial=True, who="APF controller"),
                                 follow(levels, handle, initial=True, who="APF controller"))

        await self.run(read, changes)

    async def _borrowing(self) -> None:
        while True:
            await asyncio.sleep(BORROWING_PERIOD)
            self.update_borrowing()

    # -- classification ------------------------------------------------------------------------

    def classify(self, info: RequestInfo, user: UserInfo) -> Classification:
        """The FlowSchema, level and flow of a request (remembered until the configuration
        changes)."""
        if info.is_resource_request:
            key: tuple = (user.name, user.groups, info.verb, info.api_group, info.resource,
                          info.subresource, info.namespace)
        else:
            key = (user.name, user.groups, info.verb, info.path)
        found = self._cache.get(key)
        if found is not None:
            return found
        schema = next((s for s in self.schemas if s.matches(info, user)), None)
        if schema is None:  # cannot happen while catch-all covers everyone; still
            schema = next(s for s in self.schemas if s.name == CATCH_ALL)
        level = self.levels[schema.level]
        distinguisher, hand = "", None
        queuing = level.queuing
        if not level.exempt and queuing.queues > 1 and queuing.dealer is not None:
            distinguisher = schema.flow_distinguisher(info, user)
            hand = queuing.dealer.deal(flow_hash(schema.name, distinguisher))
        flow = self._flows.get((level.name, schema.name))
        if flow is None:
            flow = self._flows[(level.name, schema.name)] = self.metrics.flow(level.name,
                                                                               schema.name)
        found = Classification(schema, level, distinguisher, hand, flow)
        if len(self._cache) >= CLASSIFICATION_CACHE:
            self._cache.clear()
        self._cache[key] = found
        return found


def _loop_call_later(delay: float, callback: Callable[[], None]) -> object:
    return asyncio.get_running_loop().call_later(delay, callback)
