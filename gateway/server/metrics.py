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
        self._counters: dict[tuple, Any] = {}
        self._histograms: dict[tuple, Any] = {}
        self._gauges: dict[tuple, Any] = {}
        self._series: dict[tuple[str, ...], Series] = {}
        self.storage = Histogram("etcd_request_duration_seconds",
                                 "Storage operation latency, by operation and resource.",
                                 ["operation", "type"], buckets=STORAGE_BUCKETS, registry=r)

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

    def observe(self, operation: str, key: str, seconds: float) -> None:
        parts = key.strip("/").split("/")
        resource = parts[1] if len(parts) > 1 else parts[0]
        self.histogram.labels(operation, resource).observe(seconds)

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
