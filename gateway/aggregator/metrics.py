"""The aggregator's metrics: per-backend proxy counts and times, and which APIServices are
unavailable (kube's ``aggregator_unavailable_apiservice`` gauge; kube's counter of the same
name with ``_total`` cannot sit beside it in one prometheus_client registry, so it is left out).

They live in the registry the gateway serves at /metrics. Label children are kept per label
set, so the proxy's hot path does no label look-up after the first request of a backend; its
counters and gauges are Tallies (gateway/server/metrics.py), folded in when /metrics is read.
"""

from __future__ import annotations

import contextlib
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.server.metrics import Tally, histogram_tally, new_registry, tally

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2, 3, 5, 10,
                   30, 60)


class AggregatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else new_registry()
        self.registry = r
        self.requests = Counter(
            "aggregator_proxy_requests", "Requests proxied to backends, by APIService and "
            "HTTP code (503 and 502 included when the gateway answered for the backend).",
            ["name", "code"], registry=r)
        self.latency = Histogram(
            "aggregator_proxy_request_duration_seconds", "Time to a backend's response "
            "headers, by APIService.", ["name"], buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter(
            "aggregator_proxy_errors", "Proxied requests that failed, by APIService and "
            "reason (resolve, connect, redirect, upgrade, stream).", ["name", "reason"],
            registry=r)
        self.open = Gauge(
            "aggregator_proxy_open_requests", "Proxied requests and upgraded connections "
            "open now, by APIService.", ["name"], registry=r)
        self.fast_lane = Counter(
            "aggregator_proxy_fast_lane_requests", "Proxied requests served by the fast lane "
            "(below aiohttp's server; see gateway/aggregator/fastlane.py), of all APIServices.",
            registry=r)
        #: What the fast lane counts its requests in (folded into fast_lane).
        self.fast_lane_served = tally(r, self.fast_lane)
        self.unavailable = Gauge(
            "aggregator_unavailable_apiservice", "Gauge of APIServices which are marked as "
            "unavailable broken down by APIService name.", ["name"], registry=r)
        self._children: dict[tuple, Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _tally(self, metric: Any, *labels: str) -> Tally:
        key = (id(metric), *labels)
        made = self._children.get(key)
        if made is None:
            made = self._children[key] = tally(self.registry, metric.labels(*labels))
        return made

    def request(self, name: str, code: int) -> None:
        self._tally(self.requests, name, str(code)).pending += 1

    def observe(self, name: str, seconds: float) -> None:
        key = (id(self.latency), name)
        made = self._children.get(key)
        if made is None:
            made = self._children[key] = histogram_tally(self.registry,
                                                         self.latency.labels(name))
        made.observe(seconds)

    def error(self, name: str, reason: str) -> None:
        self._tally(self.errors, name, reason).pending += 1

    def opened(self, name: str) -> Tally:
        """The open-requests gauge of ``name`` (inc it, and dec it when done)."""
        return self._tally(self.open, name)

    def set_unavailable(self, name: str, unavailable: bool) -> None:
        self._child(self.unavailable, name).set(1 if unavailable else 0)

    def forget(self, name: str) -> None:
        """An APIService is gone: its unavailable gauge goes too (as kube's does)."""
        with contextlib.suppress(KeyError):
            self.unavailable.remove(name)
        self._children.pop((id(self.unavailable), name), None)
