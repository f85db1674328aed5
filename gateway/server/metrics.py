"""Prometheus metrics with kube-apiserver's names, served at /metrics.

Each gateway process has its own registry, so tests that start several gateways in one process
keep their numbers apart.

Counters, gauges and histograms counted on every request are counted in a ``Tally`` or
``HistogramTally`` (plain attributes, no lock, no call chain), folded into their Prometheus
children whenever the registry is read: what a scrape reads is exact, and a request pays a
few nanoseconds per count instead of a microsecond.
"""

from __future__ import annotations

import time
import weakref
from bisect import bisect_left
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.apimachinery.requestinfo import RequestInfo

REQUEST_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope",
                  "component")
LATENCY_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6,
                   8, 10, 15, 20, 30, 45, 60)
STORAGE_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5,
                   6, 8, 10, 15, 20, 30, 45, 60)
_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
          "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETECOLLECTION",
          "proxy": "CONNECT"}


class Tally:
    """Counts of one counter or gauge child, kept here until ``fold`` adds them to it."""

    __slots__ = ("child", "pending")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.pending = 0

    def inc(self, amount: int = 1) -> None:
        self.pending += amount

    def dec(self, amount: int = 1) -> None:
        self.pending -= amount

    def fold(self) -> None:
        pending, self.pending = self.pending, 0
        if pending:
            self.child.inc(pending)


class HistogramTally:
    """Observations of one histogram child, counted per bucket here until ``fold`` adds them
    to the child's buckets and sum (prometheus_client's own values, private: a child without
    them is observed directly instead, see ``histogram_tally``)."""

    __slots__ = ("bounds", "child", "counts", "total")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.bounds = child._upper_bounds
        self.counts = [0] * len(self.bounds)
        self.total = 0.0

    def observe(self, amount: float) -> None:
        """As the child's observe: the first bucket whose bound is at least ``amount``."""
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.total += amount

    def fold(self) -> None:
        counts = self.counts
        if not any(counts):
            return
        buckets = self.child._buckets
        for i, count in enumerate(counts):
            if count:
                buckets[i].inc(count)
                counts[i] = 0
        total, self.total = self.total, 0.0
        self.child._sum.inc(total)


class _Folding:
    """Registered first in a registry, so that every read of it (the exposition, a test's
    get_sample_value) folds its tallies in before any metric is collected."""

    def __init__(self) -> None:
        self.tallies: list[Tally | HistogramTally] = []

    def describe(self) -> list:
        return []

    def collect(self) -> list:
        for made in self.tallies:
            made.fold()
        return []


#: Each registry's folding collector.
_FOLDING: weakref.WeakKeyDictionary[CollectorRegistry, _Folding] = weakref.WeakKeyDictionary()


def new_registry() -> CollectorRegistry:
    """A registry whose tallies are folded in whenever it is read."""
    registry = CollectorRegistry()
    registry.register(_FOLDING.setdefault(registry, _Folding()))
    return registry


def tally(registry: CollectorRegistry, child: Any) -> Tally:
    """A Tally of ``child`` (a label child of a counter or gauge of ``registry``). In a
    registry ``new_registry`` did not make, the folding comes after the metrics already there
    (a read then shows the counts up to the read before it)."""
    folding = _FOLDING.get(registry)
    if folding is None:
        folding = _FOLDING.setdefault(registry, _Folding())
        registry.register(folding)
    made = Tally(child)
    folding.tallies.append(made)
    return made


def histogram_tally(registry: CollectorRegistry, child: Any) -> Any:
    """A HistogramTally of ``child`` (a label child of a histogram of ``registry``), or the
    child itself when its values are not where this prometheus_client version kept them."""
    if not all(hasattr(child, name) for name in ("_upper_bounds", "_buckets", "_sum")):
        return child
    folding = _FOLDING.get(registry)
    if folding is None:
        folding = _FOLDING.setdefault(registry, _Folding())
        registry.register(folding)
    made = HistogramTally(child)
    folding.tallies.append(made)
    return made


class Metrics:
    def __init__(self) -> None:
        self.registry = new_registry()
        r = self.registry
        self.requests = Counter("apiserver_request", "Requests by verb, resource and code.",
                                [*REQUEST_LABELS, "code"], registry=r)
        self.latency = Histogram("apiserver_request_duration_seconds",
                                 "Response latency by verb and resource.", REQUEST_LABELS,
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.inflight = Gauge("apiserver_current_inflight_requests",
                              "Requests being served now, by kind.", ["request_kind"],
                              registry=r)
        self.longrunning = Gauge("apiserver_longrunning_requests",
                                 "Long-running requests (watches, proxies) open now.",
                                 REQUEST_LABELS, registry=r)
        self.watchers = Gauge("apiserver_registered_watchers", "Watches open now, by kind.",
                              ["group", "version", "kind"], registry=r)
        self.watch_events = Counter("apiserver_watch_events", "Watch events sent, by kind.",
                                    ["group", "version", "kind"], registry=r)
        self.terminated_watchers = Counter(
            "apiserver_terminated_watchers",
            "Counter of watchers closed due to unresponsiveness broken by resource type.",
            ["resource"], registry=r)
        self._counters: dict[tuple, Any] = {}
        self._histograms: dict[tuple, Any] = {}
        self._gauges: dict[tuple, Any] = {}
        self._series: dict[tuple[str, ...], Series] = {}
        self.storage = Histogram("etcd_request_duration_seconds",
                                 "Storage operation latency, by operation and resource.",
                                 ["operation", "type"], buckets=STORAGE_BUCKETS, registry=r)

    def watcher_terminated(self, prefix: str) -> None:
        """A watch cache closed a watcher that could not keep up; ``prefix`` is the cache's
        storage prefix (``/<group or core>/<resource>/``), labelled as kube 1.32 labels it:
        GroupResource.String()."""
        parts = prefix.strip("/").split("/")
        group, resource = ("" if parts[0] == "core" else parts[0]), parts[-1]
        self.terminated_watchers.labels(f"{resource}.{group}" if group else resource).inc()

    def labels(self, request: Any, info: RequestInfo) -> tuple[str, ...]:
        return self.labels_of(request.method, request.headers.get("Content-Type", ""),
                              "dryRun" in request.query, info)

    def labels_of(self, method: str, content_type: str, dry_run: bool,
                  info: RequestInfo) -> tuple[str, ...]:
        """The apiserver_request_* labels of a request (kube's verb, scope and dry run)."""
        verb = _VERBS.get(info.verb, info.verb.upper()) if info.is_resource_request else \
            method.upper()
        if verb == "PATCH" and content_type.startswith("application/apply-patch"):
            verb = "APPLY"
        if not info.is_resource_request:
            scope = ""
        elif info.name:
            scope = "resource"
        else:
            scope = "namespace" if info.namespace else "cluster"
        return (verb, "All" if dry_run else "", info.api_group, info.api_version, info.resource,
                info.subresource, scope, "apiserver")

    def observe(self, labels: tuple[str, ...], code: int, started: float) -> None:
        # label lookups cost more than the counting; keep the children per label set
        key = (*labels, code)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = tally(self.registry,
                                                  self.requests.labels(*labels, str(code)))
        histogram = self._histograms.get(labels)
        if histogram is None:
            histogram = self._histograms[labels] = histogram_tally(
                self.registry, self.latency.labels(*labels))
        counter.pending += 1
        histogram.observe(time.monotonic() - started)

    def series(self, request: Any, info: RequestInfo) -> Series:
        """What a request is counted in: its label set's in-flight gauge, latency histogram
        and counters by code, found with one look-up."""
        labels = self.labels(request, info)
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = Series(
                self, labels, self.inflight_gauge(labels, info.is_long_running,
                                                  info.is_mutating))
        return series

    def inflight_gauge(self, labels: tuple[str, ...], long_running: bool,
                       mutating: bool) -> Tally:
        """The gauge of requests in flight a request counts in (inc, then dec)."""
        key = (labels, long_running, mutating)
        gauge = self._gauges.get(key)
        if gauge is None:
            gauge = self.longrunning.labels(*labels) if long_running else \
                self.inflight.labels("mutating" if mutating else "readOnly")
            gauge = self._gauges[key] = tally(self.registry, gauge)
        return gauge

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(body=generate_latest(self.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})


class Series:
    """One label set's request metrics (see Metrics.series)."""

    __slots__ = ("counters", "gauge", "histogram", "labels", "metrics")

    def __init__(self, metrics: Metrics, labels: tuple[str, ...], gauge: Tally) -> None:
        self.metrics, self.labels, self.gauge = metrics, labels, gauge
        self.histogram = histogram_tally(metrics.registry, metrics.latency.labels(*labels))
        self.counters: dict[int, Tally] = {}

    def observe(self, code: int, seconds: float) -> None:
        counter = self.counters.get(code)
        if counter is None:
            counter = self.counters[code] = tally(
                self.metrics.registry, self.metrics.requests.labels(*self.labels, str(code)))
        counter.pending += 1
        self.histogram.observe(seconds)


class StorageTimer:
    """Times storage operations into etcd_request_duration_seconds."""

    def __init__(self, metrics: Metrics) -> None:
        self.histogram = metrics.storage
        self.registry = metrics.registry
        #: (operation, resource) -> its tally: a label child looked up once, observed
        #: without prometheus_client's lock (see HistogramTally)
        self._tallies: dict[tuple[str, str], Any] = {}

    def observe(self, operation: str, key: str, seconds: float) -> None:
        parts = key.strip("/").split("/", 2)
        resource = parts[1] if len(parts) > 1 else parts[0]
        found = self._tallies.get((operation, resource))
        if found is None:
            found = self._tallies[operation, resource] = histogram_tally(
                self.registry, self.histogram.labels(operation, resource))
        found.observe(seconds)

    def wrap(self, storage: Any) -> Any:
        """Time the operations of ``storage`` in place (its methods, not a copy)."""
        for operation in ("create", "get", "list", "guaranteed_update", "delete", "count"):
            setattr(storage, operation, self._timed(operation, getattr(storage, operation)))
        return storage

    def _timed(self, operation: str, method: Any) -> Any:
        async def timed(key: str, *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return await method(key, *args, **kwargs)
            finally:
                self.observe(operation, key, time.monotonic() - started)

        return timed


# -- API Priority and Fairness (kube's apiserver_flowcontrol_*) -----------------------------

FLOW_LABELS = ("priority_level", "flow_schema")
APF_DURATION_BUCKETS = (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)
APF_QUEUE_LENGTH_BUCKETS = (0, 10, 25, 50, 100, 250, 500, 1000)


class _Both:
    """One count into two gauges (kube keeps current_executing_seats and its older twin
    request_concurrency_in_use)."""

    __slots__ = ("first", "second")

    def __init__(self, first: Tally, second: Tally) -> None:
        self.first, self.second = first, second

    def inc(self, amount: int = 1) -> None:
        self.first.pending += amount
        self.second.pending += amount

    def dec(self, amount: int = 1) -> None:
        self.first.pending -= amount
        self.second.pending -= amount


class FlowSeries:
    """The apiserver_flowcontrol_* children of one (priority level, flow schema) pair
    (gateway.flowcontrol.observe.FlowSeries)."""

    __slots__ = ("_executed", "_labels", "_metrics", "_rejected", "_waited", "dispatched",
                 "estimated_seats", "executing_requests", "executing_seats",
                 "inqueue_requests", "inqueue_seats", "no_accommodation", "queue_length",
                 "watch_count")

    def __init__(self, metrics: FlowControlMetrics, level: str, schema: str) -> None:
        registry = metrics.registry
        self._metrics, self._labels = metrics, (level, schema)

        def count(metric: Any) -> Tally:
            return tally(registry, metric.labels(level, schema))

        def histogram(metric: Any) -> Any:
            return histogram_tally(registry, metric.labels(level, schema))

        self.inqueue_requests = count(metrics.inqueue_requests)
        self.inqueue_seats = count(metrics.inqueue_seats)
        self.executing_requests = count(metrics.executing_requests)
        self.executing_seats = _Both(count(metrics.executing_seats),
                                     count(metrics.concurrency_in_use))
        self.dispatched = count(metrics.dispatched)
        self.no_accommodation = count(metrics.no_accommodation)
        self.queue_length = histogram(metrics.queue_length)
        self.estimated_seats = histogram(metrics.estimated_seats)
        self.watch_count = histogram(metrics.watch_count)
        self._rejected: dict[str, Tally] = {}
        self._waited: dict[bool, Any] = {}
        self._executed: dict[bool, Any] = {}

    def rejected(self, reason: str) -> Tally:
        found = self._rejected.get(reason)
        if found is None:
            found = self._rejected[reason] = tally(
                self._metrics.registry, self._metrics.rejected.labels(*self._labels, reason))
        return found

    def waited(self, executed: bool) -> Any:
        found = self._waited.get(executed)
        if found is None:
            found = self._waited[executed] = histogram_tally(
                self._metrics.registry,
                self._metrics.wait.labels(*self._labels, "true" if executed else "false"))
        return found

    def executed(self, watch: bool) -> Any:
        found = self._executed.get(watch)
        if found is None:
            found = self._executed[watch] = histogram_tally(
                self._metrics.registry,
                self._metrics.execution.labels(*self._labels, "watch" if watch else "regular"))
        return found


class LevelSeries:
    """The gauges of one priority level (gateway.flowcontrol.observe.LevelSeries)."""

    def __init__(self, metrics: FlowControlMetrics, level: str) -> None:
        self._metrics, self._level = metrics, level

    def limits(self, nominal: int, lower: int, upper: int) -> None:
        m, level = self._metrics, self._level
        m.request_concurrency_limit.labels(level).set(nominal)
        m.nominal_limit.labels(level).set(nominal)
        m.lower_limit.labels(level).set(lower)
        m.upper_limit.labels(level).set(upper)

    def current_limit(self, seats: int) -> None:
        self._metrics.current_limit.labels(self._level).set(seats)

    def demand(self, high_watermark: float, average: float, deviation: float,
               smoothed: float, target: float) -> None:
        m, level = self._metrics, self._level
        m.demand_high_watermark.labels(level).set(high_watermark)
        m.demand_average.labels(level).set(average)
        m.demand_stdev.labels(level).set(deviation)
        m.demand_smoothed.labels(level).set(smoothed)
        m.target_seats.labels(level).set(target)


class FlowControlMetrics:
    """kube's apiserver_flowcontrol_* metrics (k8s.io/apiserver pkg/util/flowcontrol/metrics),
    the ones an operator reads: requests waiting, executing, dispatched and rejected by level
    and schema, wait and execution times, seat estimates, and each level's limits and seat
    demand. Also apiserver_storage_objects, from the object counts the seat estimates use."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = r = registry
        ns = "apiserver_flowcontrol_"

        def gauge(name: str, doc: str, labels: tuple[str, ...] = FLOW_LABELS) -> Gauge:
            return Gauge(ns + name, doc, list(labels), registry=r)

        def histogram(name: str, doc: str, buckets: tuple, labels: tuple[str, ...]
                      ) -> Histogram:
            return Histogram(ns + name, doc, list(labels), buckets=buckets, registry=r)

        self.rejected = Counter(ns + "rejected_requests", "Number of requests rejected by API "
                                "Priority and Fairness subsystem", [*FLOW_LABELS, "reason"],
                                registry=r)
        self.dispatched = Counter(ns + "dispatched_requests", "Number of requests executed by "
                                  "API Priority and Fairness subsystem", list(FLOW_LABELS),
                                  registry=r)
        self.no_accommodation = Counter(
            ns + "request_dispatch_no_accommodation", "Number of times a dispatch attempt "
            "resulted in a non accommodation due to lack of available seats",
            list(FLOW_LABELS), registry=r)
        self.inqueue_requests = gauge("current_inqueue_requests", "Number of requests "
                                      "currently pending in queues of the API Priority and "
                                      "Fairness subsystem")
        self.inqueue_seats = gauge("current_inqueue_seats", "Number of seats currently "
                                   "pending in queues of the API Priority and Fairness "
                                   "subsystem")
        self.executing_requests = gauge("current_executing_requests", "Number of requests in "
                                        "initial (for a WATCH) or any (for a non-WATCH) "
                                        "execution stage in the API Priority and Fairness "
                                        "subsystem")
        executing = ("Concurrency (number of seats) occupied by the currently executing "
                     "(initial stage for a WATCH, any stage otherwise) requests in the API "
                     "Priority and Fairness subsystem")
        self.executing_seats = gauge("current_executing_seats", executing)
        self.concurrency_in_use = gauge("request_concurrency_in_use", executing)
        self.wait = histogram("request_wait_duration_seconds", "Length of time a request "
                              "spent waiting in its queue", APF_DURATION_BUCKETS,
                              (*FLOW_LABELS, "execute"))
        self.execution = histogram("request_execution_seconds", "Duration of initial stage "
                                   "(for a WATCH) or any (for a non-WATCH) stage of request "
                                   "execution in the API Priority and Fairness subsystem",
                                   APF_DURATION_BUCKETS, (*FLOW_LABELS, "type"))
        self.queue_length = histogram("request_queue_length_after_enqueue", "Length of queue "
                                      "in the API Priority and Fairness subsystem, as seen by "
                                      "each request after it is enqueued",
                                      APF_QUEUE_LENGTH_BUCKETS, FLOW_LABELS)
        self.estimated_seats = histogram("work_estimated_seats", "Number of estimated seats "
                                         "(maximum of initial and final seats) associated "
                                         "with requests in API Priority and Fairness",
                                         (1, 2, 4, 10), FLOW_LABELS)
        self.watch_count = histogram("watch_count_samples", "count of watchers for mutating "
                                     "requests in API Priority and Fairness",
                                     (0, 1, 10, 100, 1000, 10000), FLOW_LABELS)
        level = ("priority_level",)
        self.request_concurrency_limit = gauge(
            "request_concurrency_limit", "Nominal number of execution seats configured for "
            "each priority level", level)
        self.nominal_limit = gauge("nominal_limit_seats", "Nominal number of execution seats "
                                   "configured for each priority level", level)
        self.lower_limit = gauge("lower_limit_seats", "Configured lower bound on number of "
                                 "execution seats available to each priority level", level)
        self.upper_limit = gauge("upper_limit_seats", "Configured upper bound on number of "
                                 "execution seats available to each priority level", level)
        self.current_limit = gauge("current_limit_seats", "current derived number of "
                                   "execution seats available to each priority level", level)
        self.demand_high_watermark = gauge("demand_seats_high_watermark", "High watermark, "
                                           "over last adjustment period, of demand_seats",
                                           level)
        self.demand_average = gauge("demand_seats_average", "Time-weighted average, over last "
                                    "adjustment period, of demand_seats", level)
        self.demand_stdev = gauge("demand_seats_stdev", "Time-weighted standard deviation, "
                                  "over last adjustment period, of demand_seats", level)
        self.demand_smoothed = gauge("demand_seats_smoothed", "Smoothed seat demands", level)
        self.target_seats = gauge("target_seats", "Seat allocation targets", level)
        self.fair_frac = Gauge(ns + "seat_fair_frac", "Fair fraction of server's concurrency "
                               "to allocate to each priority level that can use it",
                               registry=r)
        self.storage_objects = Gauge("apiserver_storage_objects", "Number of stored objects "
                                     "at the time of last check split by kind.", ["resource"],
                                     registry=r)

    def flow(self, level: str, schema: str) -> FlowSeries:
        return FlowSeries(self, level, schema)

    def level(self, name: str) -> LevelSeries:
        return LevelSeries(self, name)

    def fair_fraction(self, value: float) -> None:
        self.fair_frac.set(value)

    def stored_objects(self, resource: str, count: int) -> None:
        self.storage_objects.labels(resource).set(count)
