"""The queues of one priority level and the fair queuing that dispatches from them (kube's
k8s.io/apiserver pkg/util/flowcontrol/fairqueuing/queueset, in our own words).

A request occupies *seats* while it executes (its width: one for most requests, more for big
lists; kube's work estimate). A priority level may have as many seats in use as its current
concurrency limit. What happens to a request that does not fit depends on the level:

- exempt: nothing is limited, the request runs at once;
- ``Reject`` (no queues): it is rejected ("concurrency-limit");
- ``Queue``: the flow's hash deals it a hand of queues (shuffle sharding), it joins the one
  with the least work waiting, or is rejected when the level is full and that queue is at its
  ``queueLengthLimit`` ("queue-full"). Queued requests are dispatched by fair queuing: each
  queue advances through *virtual time* R, which grows at the rate of the seats the queues
  could use, shared equally among the active queues; the next request dispatched is the one
  whose virtual finish (its queue's next dispatch R plus its own work) is earliest, so each
  active flow gets an equal share of the seats whatever its arrival rate. A request that waits
  longer than its limit (a quarter of its deadline) leaves its queue ("time-out").

Work is in seat-seconds: a request's is its seats times the estimated service time (3 ms)
plus, for a write that notifies many watchers, its final seats times the extra latency it
holds them for. When a request ends, its queue's virtual time is corrected by what its real
service time was.

Simplifications, all invisible to a client: R is a float of seat-seconds rather than kube's
fixed-point nanoseconds (so there is no epoch to advance), and everything runs on the event
loop (no locks).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.flowcontrol.observe import FlowSeries
from gateway.flowcontrol.shufflesharding import Dealer

#: kube's estimatedServiceDuration: the service time every request is assumed to take.
SERVICE_TIME = 0.003

WAITING, EXECUTING, DONE, REJECTED = range(4)


@dataclass(slots=True)
class WorkEstimate:
    """kube's WorkEstimate: seats while executing; seats held afterwards, and for how long."""

    initial_seats: int = 1
    final_seats: int = 0
    additional_latency: float = 0.0

    @property
    def max_seats(self) -> int:
        return max(self.initial_seats, self.final_seats)


class Integrator:
    """The time-weighted average, deviation and maximum of a value since the last reset
    (kube's fairqueuing Integrator): the seat demand of a level, for borrowing."""

    __slots__ = ("clock", "elapsed", "last", "maximum", "sum_x", "sum_xx", "value")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.last = clock()
        self.value = 0.0
        self.maximum = 0.0
        self.sum_x = self.sum_xx = self.elapsed = 0.0

    def _advance(self) -> None:
        now = self.clock()
        dt = now - self.last
        if dt > 0:
            self.sum_x += self.value * dt
            self.sum_xx += self.value * self.value * dt
            self.elapsed += dt
        self.last = now

    def set(self, value: float) -> None:
        if value == self.value:
            return
        self._advance()
        self.value = value
        if value > self.maximum:
            self.maximum = value

    def reset(self) -> tuple[float, float, float, float]:
        """(elapsed seconds, average, standard deviation, maximum) since the last reset."""
        self._advance()
        elapsed, maximum = self.elapsed, self.maximum
        average = deviation = 0.0
        if elapsed > 0:
            average = self.sum_x / elapsed
            deviation = math.sqrt(max(0.0, self.sum_xx / elapsed - average * average))
        self.sum_x = self.sum_xx = self.elapsed = 0.0
        self.maximum = self.value
        return elapsed, average, deviation, maximum


class Queue:
    __slots__ = ("executing", "index", "next_dispatch_r", "seats_in_use", "waiting",
                 "waiting_seats", "waiting_work")

    def __init__(self, index: int) -> None:
        self.index = index
        self.waiting: deque[Request] = deque()
        self.next_dispatch_r = 0.0
        self.executing = 0
        self.seats_in_use = 0
        self.waiting_seats = 0  # the max seats of the waiting requests
        self.waiting_work = 0.0  # their total work

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.executing


class Request:
    """One request's passage through a queue set."""

    __slots__ = ("arrival_r", "arrived", "final_work", "flow", "future", "qs", "queue",
                 "seats", "started", "state", "total_work", "work")

    def __init__(self, qs: QueueSet, work: WorkEstimate, flow: FlowSeries, now: float) -> None:
        self.qs = qs
        self.work = work
        self.flow = flow
        initial, final = work.initial_seats, work.final_seats
        self.seats = initial if initial >= final else final  # its width while it counts
        self.final_work = final * work.additional_latency
        self.total_work = initial * SERVICE_TIME + self.final_work
        self.arrived = now
        self.arrival_r = qs.current_r
        self.started = 0.0
        self.queue: Queue | None = None
        self.future: asyncio.Future[bool] | None = None  # made only for a request that has to wait
        self.state = WAITING


@dataclass
class QueuingConfig:
    """The queue set's part of a priority level: queues (0: Reject, -1: exempt), hand size
    and queue length limit."""

    queues: int = 0
    hand_size: int = 0
    queue_length_limit: int = 0
    dealer: Dealer | None = field(default=None, repr=False)

    @classmethod
    def of(cls, queues: int, hand_size: int, queue_length_limit: int) -> QueuingConfig:
        dealer = Dealer(queues, hand_size) if queues > 0 else None
        return cls(queues, hand_size, queue_length_limit, dealer)


class QueueSet:
    """The requests of one priority level, waiting and executing."""

    def __init__(self, name: str, clock: Callable[[], float], demand: Integrator,
                 *, call_later: Callable[[float, Callable[[], None]], object] | None = None,
                 on_idle: Callable[[], None] | None = None) -> None:
        self.name = name
        self.clock = clock
        self.demand = demand
        self.call_later = call_later
        self.on_idle = on_idle
        self.config = QueuingConfig()
        self.concurrency_limit = 0
        self.queues: list[Queue] = []
        self.current_r = 0.0
        self.last_time = clock()
        self.robin_index = -1
        self.enqueues = 0
        self.waiting = 0  # requests waiting in queues
        self.seats_waiting = 0
        self.executing = 0  # requests executing
        self.seats_in_use = 0
        self.active_queues = 0  # queues with a request waiting or executing
        self.queued_seats = 0  # seats in use or wanted by requests that came through queues
        self.nonempty: set[Queue] = set()  # queues with a request waiting
        # totals, for tests and debugging
        self.dispatched = self.rejected = self.timed_out = 0

    # -- configuration ------------------------------------------------------------------------

    @property
    def exempt(self) -> bool:
        return self.config.queues < 0

    def configure(self, config: QueuingConfig, concurrency_limit: int) -> None:
        """New queuing parameters and limit. More queues are added at once; fewer are removed
        as they empty (kube's attrition)."""
        self._sync_time()
        if config.queues > len(self.queues):
            self.queues += [Queue(i) for i in range(len(self.queues), config.queues)]
        self.config = config
        self.concurrency_limit = concurrency_limit
        self._dispatch_as_much_as_possible()

    def set_limit(self, concurrency_limit: int) -> None:
        self._sync_time()
        self.concurrency_limit = concurrency_limit
        self._dispatch_as_much_as_possible()

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.executing

    # -- virtual time --------------------------------------------------------------------------

    def _sync_time(self) -> float:
        """Advance R to now, at the rate the state since the last change gave it; every
        change of state calls this first."""
        now = self.clock()
        elapsed = now - self.last_time
        self.last_time = now
        if self.active_queues and elapsed > 0:
            rate = min(self.queued_seats, self.concurrency_limit) / self.active_queues
            self.current_r += rate * elapsed
        return now

    def _activity(self, queue: Queue, was_idle: bool) -> None:
        if was_idle and not queue.idle:
            self.active_queues += 1
        elif not was_idle and queue.idle:
            self.active_queues -= 1

    def _bound_next_dispatch(self, queue: Queue) -> None:
        """kube's anti-windup: a queue's virtual dispatch does not precede the arrival of its
        oldest waiting request."""
        if queue.waiting:
            arrival = queue.waiting[0].arrival_r
            if queue.next_dispatch_r < arrival:
                queue.next_dispatch_r = arrival

    # -- requests ------------------------------------------------------------------------------

    def can_accommodate(self, seats: int) -> bool:
        if self.config.queues < 0:
            return True
        if seats > self.concurrency_limit:
            # wider than the level: it runs alone, once everything else has finished
            return self.executing == 0
        return self.seats_in_use + seats <= self.concurrency_limit

    def start(self, work: WorkEstimate, flow: FlowSeries,
              hand: tuple[int, ...] | None) -> Request | None:
        """Admit a request: executing at once, waiting in a queue (its ``future`` is made by
        ``wait``), or None when rejected."""
        now = self._sync_time()
        request = Request(self, work, flow, now)
        if self.config.queues < 1:
            if not self.can_accommodate(request.seats):
                self._reject(request, "concurrency-limit")
                return None
            self._execute(request, now)
            return request
        queue = self._choose_queue(hand)
        if self.seats_in_use >= self.concurrency_limit and \
                len(queue.waiting) >= self.config.queue_length_limit:
            self._reject(request, "queue-full")
            return None
        if not self.waiting and self.can_accommodate(request.seats):
            # nobody waits and it fits: what enqueuing then dispatching would do, at once
            flow.queue_length.observe(1)
            if queue.idle:
                queue.next_dispatch_r = self.current_r
                self.active_queues += 1
            self._dispatch_from(queue, request, now)
            return request
        self._enqueue(request, queue)
        flow.queue_length.observe(len(queue.waiting))
        self._bound_next_dispatch(queue)
        self._dispatch_as_much_as_possible()
        return request

    def _reject(self, request: Request, reason: str) -> None:
        request.state = REJECTED
        self.rejected += 1
        request.flow.rejected(reason).inc()

    def _choose_queue(self, hand: tuple[int, ...] | None) -> Queue:
        """The queue of the flow's hand with the least work waiting (kube's shuffleShard);
        ties go to the first looked at, starting at a rotating offset."""
        if not hand:
            hand = (0,)
        size = len(hand)
        offset = self.enqueues % size
        self.enqueues += 1
        queues = self.queues
        if not self.waiting:  # every queue has nothing waiting: the first looked at
            return queues[hand[offset]]
        best: Queue | None = None
        for i in range(size):
            queue = queues[hand[(offset + i) % size]]
            if best is None or queue.waiting_work < best.waiting_work:
                best = queue
        assert best is not None
        return best

    def _enqueue(self, request: Request, queue: Queue) -> None:
        was_idle = queue.idle
        if was_idle:
            queue.next_dispatch_r = self.current_r
        request.queue = queue
        queue.waiting.append(request)
        seats = request.seats
        queue.waiting_seats += seats
        queue.waiting_work += request.total_work
        self.nonempty.add(queue)
        self.waiting += 1
        self.seats_waiting += seats
        self.queued_seats += seats
        self._activity(queue, was_idle)
        request.flow.inqueue_requests.inc()
        request.flow.inqueue_seats.inc(seats)
        self.demand.set(self.seats_in_use + self.seats_waiting)

    def _unqueue(self, request: Request) -> Queue:
        """Take a waiting request out of its queue's waiting line (dispatch or time-out)."""
        queue = request.queue
        assert queue is not None
        seats = request.seats
        queue.waiting_seats -= seats
        queue.waiting_work -= request.total_work
        if not queue.waiting:
            self.nonempty.discard(queue)
        self.waiting -= 1
        self.seats_waiting -= seats
        request.flow.inqueue_requests.dec()
        request.flow.inqueue_seats.dec(seats)
        return queue

    def _execute(self, request: Request, now: float) -> None:
        """The request starts executing (from a queue, or at once)."""
        request.state = EXECUTING
        request.started = now
        seats = request.seats
        self.executing += 1
        self.seats_in_use += seats
        self.dispatched += 1
        request.flow.executing_requests.inc()
        request.flow.executing_seats.inc(seats)
        self.demand.set(self.seats_in_use + self.seats_waiting)

    def _dispatch_as_much_as_possible(self) -> None:
        while self.waiting and self.seats_in_use < self.concurrency_limit and \
                self._dispatch_one():
            pass

    def _next_queue(self) -> Queue | None:
        """The queue whose oldest request finishes first in virtual time, looking at the
        queues round-robin after the one last dispatched from (its ties go to later ones)."""
        candidates = self.nonempty
        if len(candidates) == 1:
            return next(iter(candidates))
        count = len(self.queues)
        start = self.robin_index + 1
        best, best_finish = None, math.inf
        for queue in sorted(candidates, key=lambda q: (q.index - start) % count):
            finish = queue.next_dispatch_r + queue.waiting[0].total_work
            if finish < best_finish:
                best, best_finish = queue, finish
        return best

    def _dispatch_one(self) -> bool:
        queue = self._next_queue()
        if queue is None:
            return False
        request = queue.waiting[0]
        if not self.can_accommodate(request.seats):
            request.flow.no_accommodation.inc()
            return False
        queue.waiting.popleft()
        self._unqueue(request)
        self.queued_seats -= request.seats  # counted again as it executes
        self._dispatch_from(queue, request, self.last_time)
        self._bound_next_dispatch(queue)
        future = request.future
        if future is not None and not future.done():
            future.set_result(True)
        return True

    def _dispatch_from(self, queue: Queue, request: Request, now: float) -> None:
        """``request``, first in ``queue`` (or arriving at an empty set to an active
        queue), starts executing."""
        work = request.work
        if work.final_seats > self.concurrency_limit:
            # wider than the level: narrower and longer, the same work
            final = max(self.concurrency_limit, 1)
            work.additional_latency = request.final_work / final
            work.final_seats = final
            request.seats = max(work.initial_seats, final)
        request.queue = queue
        self.robin_index = queue.index
        self._execute(request, now)
        seats = request.seats
        queue.executing += 1
        queue.seats_in_use += seats
        self.queued_seats += seats
        queue.next_dispatch_r += request.total_work

    def cancel(self, request: Request) -> None:
        """A waiting request leaves its queue unserved (its wait limit passed, or its client
        went away): rejected, "time-out"."""
        if request.state != WAITING:
            return
        self._sync_time()
        queue = request.queue
        assert queue is not None
        was_idle = queue.idle
        queue.waiting.remove(request)
        self._unqueue(request)
        self.queued_seats -= request.seats
        self._activity(queue, was_idle)
        self._bound_next_dispatch(queue)
        self.timed_out += 1
        self._reject(request, "time-out")
        self.demand.set(self.seats_in_use + self.seats_waiting)
        self._after_change()

    def finish(self, request: Request) -> None:
        """An executing request has ended: its queue's virtual time learns its real service
        time, its seats are given back (after its additional latency, when it has one), and
        waiting requests are dispatched."""
        if request.state != EXECUTING:
            return
        now = self._sync_time()
        request.state = DONE
        self.executing -= 1
        request.flow.executing_requests.dec()
        queue = request.queue
        if queue is not None:
            was_idle = queue.idle
            queue.executing -= 1
            queue.next_dispatch_r -= request.work.initial_seats * (
                SERVICE_TIME - (now - request.started))
            self._bound_next_dispatch(queue)
            self._activity(queue, was_idle)
        latency = request.work.additional_latency
        if latency > 0 and self.call_later is not None:
            self.call_later(latency, lambda: self._release_later(request))
        else:
            self._release(request)
        self._dispatch_as_much_as_possible()
        self._after_change()

    def _release_later(self, request: Request) -> None:
        self._sync_time()
        self._release(request)
        self._dispatch_as_much_as_possible()
        self._after_change()

    def _release(self, request: Request) -> None:
        seats = request.seats
        self.seats_in_use -= seats
        request.flow.executing_seats.dec(seats)
        queue = request.queue
        if queue is not None:
            queue.seats_in_use -= seats
            self.queued_seats -= seats
            self._drop_if_surplus(queue)
        self.demand.set(self.seats_in_use + self.seats_waiting)

    def _drop_if_surplus(self, queue: Queue) -> None:
        """Fewer queues configured than there are: an emptied one goes (later ones move up)."""
        if len(self.queues) > max(self.config.queues, 0) and queue.idle and \
                not queue.seats_in_use and queue.index < len(self.queues) and \
                self.queues[queue.index] is queue:
            del self.queues[queue.index]
            for later in self.queues[queue.index:]:
                later.index -= 1
            if self.robin_index >= queue.index:
                self.robin_index -= 1

    def _after_change(self) -> None:
        if self.on_idle is not None and self.idle:
            self.on_idle()


async def wait(request: Request, limit: float) -> bool:
    """Wait until ``request`` executes (True), or ``limit`` seconds, after which it leaves its
    queue rejected (False). A cancelled waiter (the client went away, the deadline passed)
    leaves its queue too, or gives back the seats it was just given."""
    if request.state == EXECUTING:
        return True
    if request.state != WAITING:
        return False
    qs = request.qs
    future = request.future = asyncio.get_running_loop().create_future()
    try:
        async with asyncio.timeout(limit):
            await future
        return True
    except TimeoutError:
        if request.state == EXECUTING:  # dispatched as the limit passed
            return True
        qs.cancel(request)
        return False
    except asyncio.CancelledError:
        if request.state == EXECUTING:
            qs.finish(request)
        else:
            qs.cancel(request)
        raise
