"""What API Priority and Fairness reports, as kube's apiserver_flowcontrol_* metrics.

The metrics themselves are made in gateway/server/metrics.py (``FlowControlMetrics``, in the
gateway's registry); this package only counts into the objects it is given, through these
protocols, so it does not depend on the server layer above it. ``NoMetrics`` counts nothing
(unit tests, tools).
"""

from __future__ import annotations

from typing import Protocol


class Count(Protocol):
    """A counter or gauge child (Tally-like): ``inc`` and ``dec``."""

    def inc(self, amount: int = 1) -> None: ...
    def dec(self, amount: int = 1) -> None: ...


class Observe(Protocol):
    """A histogram child."""

    def observe(self, amount: float) -> None: ...


class FlowSeries(Protocol):
    """The series of one (priority level, flow schema) pair."""

    # read-only: the flow controller only counts into them
    @property
    def inqueue_requests(self) -> Count: ...
    @property
    def inqueue_seats(self) -> Count: ...
    @property
    def executing_requests(self) -> Count: ...
    @property
    def executing_seats(self) -> Count: ...
    @property
    def dispatched(self) -> Count: ...
    @property
    def no_accommodation(self) -> Count: ...
    @property
    def queue_length(self) -> Observe: ...
    @property
    def estimated_seats(self) -> Observe: ...
    @property
    def watch_count(self) -> Observe: ...

    def rejected(self, reason: str) -> Count:
        """apiserver_flowcontrol_rejected_requests_total{reason}: "queue-full",
        "concurrency-limit", "time-out" or "cancelled"."""
        ...

    def waited(self, executed: bool) -> Observe: ...

    def executed(self, watch: bool) -> Observe: ...


class LevelSeries(Protocol):
    """The gauges of one priority level."""

    def limits(self, nominal: int, lower: int, upper: int) -> None: ...

    def current_limit(self, seats: int) -> None: ...

    def demand(self, high_watermark: float, average: float, deviation: float,
               smoothed: float, target: float) -> None: ...


class FlowControlMetrics(Protocol):
    def flow(self, level: str, schema: str) -> FlowSeries: ...

    def level(self, name: str) -> LevelSeries: ...

    def fair_fraction(self, value: float) -> None: ...


class _Nothing:
    def inc(self, amount: int = 1) -> None:
        pass

    def dec(self, amount: int = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


_NOTHING = _Nothing()


class _NoFlowSeries:
    inqueue_requests = inqueue_seats = executing_requests = executing_seats = _NOTHING
    dispatched = no_accommodation = queue_length = estimated_seats = watch_count = _NOTHING

    def rejected(self, reason: str) -> Count:
        return _NOTHING

    def waited(self, executed: bool) -> Observe:
        return _NOTHING

    def executed(self, watch: bool) -> Observe:
        return _NOTHING


class _NoLevelSeries:
    def limits(self, nominal: int, lower: int, upper: int) -> None:
        pass

    def current_limit(self, seats: int) -> None:
        pass

    def demand(self, high_watermark: float, average: float, deviation: float,
               smoothed: float, target: float) -> None:
        pass


class NoMetrics:
    """Counts nothing."""

    def flow(self, level: str, schema: str) -> FlowSeries:
        return _NoFlowSeries()

    def level(self, name: str) -> LevelSeries:
        return _NoLevelSeries()

    def fair_fraction(self, value: float) -> None:
        pass
