"""What keeps the gateway up under load: in-flight limits and the request deadline.

- At most --max-requests-inflight read-only and --max-mutating-requests-inflight mutating
  requests are served at once; more get 429 with Retry-After: 1. Long-running requests
  (watches, proxies) and system:masters are not counted. 0 means no limit.
- A request that is not long-running ends with 504 after --request-timeout, or sooner when its
  ?timeout= asks for less; a timeout that does not parse is 400.
"""

from __future__ import annotations

import asyncio
from asyncio import current_task, get_running_loop

from gateway.apimachinery import status
from gateway.apimachinery.context import REQUEST_INFO, request_user, response_headers
from gateway.apimachinery.gowords import parse_duration
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.endpoints.negotiation import status_response
from gateway.server.request import ChainHandler, Request, Response


def too_many_requests() -> status.StatusError:
    return status.StatusError(429, "TooManyRequests", "Too many requests, please try again "
                              "later.", retry_after=1)


class _Limit:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.current = 0

    def try_enter(self) -> bool:
        if self.limit and self.current >= self.limit:
            return False
        self.current += 1
        return True

    def leave(self) -> None:
        self.current -= 1


class InFlightLimits:
    """The two in-flight budgets, shared by every way a request is served."""

    def __init__(self, max_read: int, max_mutating: int) -> None:
        self.enabled = bool(max_read or max_mutating)
        self._read_only, self._mutating = _Limit(max_read), _Limit(max_mutating)

    def enter(self, info: RequestInfo, user: UserInfo) -> _Limit | None:
        """The budget taken (give it back with ``leave``), None when the request is not
        counted; 429 when the budget is spent."""
        if not self.enabled or info.is_long_running or user.is_privileged:
            return None
        limit = self._mutating if info.is_mutating else self._read_only
        if not limit.try_enter():
            raise too_many_requests()
        return limit


def with_max_in_flight(handler: ChainHandler, limits: InFlightLimits) -> ChainHandler:
    if not limits.enabled:
        return handler

    async def max_in_flight_filter(request: Request) -> Response:
        taken = limits.enter(request[REQUEST_INFO], request_user(request))
        if taken is None:
            return await handler(request)
        try:
            return await handler(request)
        finally:
            taken.leave()

    return max_in_flight_filter


def request_timeout(request: Request, default: float) -> float:
    """The request's deadline: --request-timeout, or less when ?timeout= says so."""
    return timeout_from_query(request.query.get("timeout"), default)


def timeout_from_query(given: str | None, default: float) -> float:
    """``?timeout=`` within --request-timeout; 400 when it does not parse."""
    if not given:
        return default
    try:
        wanted = parse_duration(given)
    except ValueError as err:  # Go's time.ParseDuration error, as kube passes it on
        raise status.bad_request(f"invalid timeout specified in the request URL - {err}") \
            from None
    return min(wanted, default) if wanted > 0 else default


def timed_out() -> status.StatusError:
    return status.timeout("request did not complete within requested timeout - context "
                          "deadline exceeded")


#: How often request deadlines are looked at: a request ends at most this late.
DEADLINE_TICK = 0.05


class _Deadline:
    """Cancels a task at a time (what asyncio.timeout does, without its context manager and
    its state machine)."""

    __slots__ = ("fired", "task", "when")

    def __init__(self, task: asyncio.Task, when: float) -> None:
        self.task = task
        self.when = when
        self.fired = False

    def fire(self) -> None:
        self.fired = True
        self.task.cancel()


class _Deadlines:
    """The pending deadlines of one event loop, looked at by one timer every DEADLINE_TICK
    while there are any, rather than a timer made and cancelled per request (each a libuv
    handle to open and close)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[_Deadline] = set()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, deadline: _Deadline) -> None:
        self.pending.add(deadline)
        if self._timer is None:
            self._timer = self.loop.call_later(DEADLINE_TICK, self._tick)

    def _tick(self) -> None:
        now = self.loop.time()
        expired = [d for d in self.pending if d.when <= now]
        for deadline in expired:
            self.pending.discard(deadline)
            deadline.fire()
        self._timer = self.loop.call_later(DEADLINE_TICK, self._tick) if self.pending \
            else None


def with_timeout(handler: ChainHandler, default: float) -> ChainHandler:
    deadlines: _Deadlines | None = None

    async def timeout_filter(request: Request) -> Response:
        nonlocal deadlines
        if request[REQUEST_INFO].is_long_running:
            return await handler(request)
        timeout = timeout_from_query(request.query.get("timeout"), default)
        loop = get_running_loop()
        if deadlines is None or deadlines.loop is not loop:
            deadlines = _Deadlines(loop)
        task = current_task(loop)
        assert task is not None
        cancelling = task.cancelling()
        deadline = _Deadline(task, loop.time() + timeout)
        pending = deadlines.pending
        deadlines.add(deadline)
        uncancelled = False
        try:
            return await handler(request)
        except asyncio.CancelledError:
            # as asyncio.timeout: the deadline's own cancellation becomes the 504, unless
            # someone else cancelled the task too (the client left, the server stops)
            if deadline.fired:
                uncancelled = True
                if task.uncancel() <= cancelling:
                    raise timed_out() from None
            raise
        except TimeoutError:
            raise timed_out() from None
        finally:
            pending.discard(deadline)
            if deadline.fired and not uncancelled:  # the handler swallowed the cancellation
                task.uncancel()

    return timeout_filter


def with_cache_control(handler: ChainHandler) -> ChainHandler:
    """API responses are not to be cached unless a handler says otherwise: set before the
    handler runs, so a streamed response (a watch, a proxied one) carries it too. A Status
    error raised below becomes its response here, in the representation the request
    negotiates (protobuf for a client that asked for it first, as kube's ErrorNegotiated)."""

    async def cache_control_filter(request: Request) -> Response:
        response_headers(request)["Cache-Control"] = "no-cache, private"
        try:
            return await handler(request)
        except status.StatusError as err:
            return status_response(request.headers, err)

    return cache_control_filter
