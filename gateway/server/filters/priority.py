"""API Priority and Fairness in the handler chain (kube's WithPriorityAndFairness), in place
of the in-flight limits when --enable-priority-and-fairness is on (the default).

Each request that is not long-running, and each watch, is classified (its FlowSchema, priority
level and flow, gateway/flowcontrol), costed in seats, and then executes at once, waits in its
level's queues, or is rejected. Every classified response carries the UIDs of its FlowSchema
and priority level (``X-Kubernetes-PF-FlowSchema-UID``, ``X-Kubernetes-PF-PriorityLevel-UID``:
UIDs rather than names, which are the operator's). A rejection, or a wait past a quarter of
the request's deadline (at most a minute; a watch: a quarter of --request-timeout), is
kube's plain-text 429 with ``Retry-After``.

A watch holds its seats only while it initializes: until its response starts (its watcher is
registered and its initial events are taken; looked at every few milliseconds), as kube
releases them at the watch cache's initialization signal. Other long-running requests
(exec, proxy, logs) are not limited.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from gateway.apimachinery.context import REQUEST_INFO, request_user, response_headers
from gateway.flowcontrol.controller import Classification, FlowControl
from gateway.flowcontrol.queueset import EXECUTING, WorkEstimate, wait
from gateway.flowcontrol.queueset import Request as Ticket
from gateway.server.filters.limits import timeout_from_query
from gateway.server.request import RESPONSE_STARTED, ChainHandler, Request, Response

PRIORITY_LEVEL_UID = "X-Kubernetes-PF-PriorityLevel-UID"
FLOW_SCHEMA_UID = "X-Kubernetes-PF-FlowSchema-UID"
TOO_MANY_REQUESTS = b"Too many requests, please try again later.\n"
#: No request waits in a queue longer than this.
MAX_WAIT = 60.0
#: How often an initializing watch is looked at.
WATCH_INIT_CHECK = 0.005


def too_many_requests(retry_after: int) -> web.Response:
    """kube's answer (http.Error): plain text, not a Status."""
    return web.Response(status=429, body=TOO_MANY_REQUESTS, headers={
        "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
        "Retry-After": str(retry_after)})


def with_priority_and_fairness(handler: ChainHandler, apf: FlowControl,
                               request_timeout: float) -> ChainHandler:
    estimate = apf.estimator.estimate
    watch_wait = min(request_timeout / 4, MAX_WAIT)

    async def priority_and_fairness_filter(request: Request) -> Response:
        info = request[REQUEST_INFO]
        watch = info.verb == "watch"
        if info.is_long_running and not watch:
            return await handler(request)
        found = apf.classify(info, request_user(request))
        level = found.level
        headers = response_headers(request)
        headers[PRIORITY_LEVEL_UID] = level.uid
        headers[FLOW_SCHEMA_UID] = found.schema.uid
        flow = found.flow
        if level.exempt:
            work = WorkEstimate(1)
        else:
            work = estimate(info, request.query, level.name, flow)
            flow.estimated_seats.observe(work.max_seats)
        arrived = time.monotonic()
        ticket = level.qs.start(work, flow, found.hand)
        executes = ticket is not None
        if ticket is not None and ticket.state != EXECUTING:
            limit = watch_wait if watch else min(timeout_from_query(
                request.query.get("timeout"), request_timeout) / 4, MAX_WAIT)
            executes = await wait(ticket, limit)
        if not level.exempt:
            flow.waited(executes).observe(time.monotonic() - arrived)
        if ticket is None or not executes:
            level.dropped.record(time.time())
            return too_many_requests(level.dropped.retry_after)
        flow.dispatched.inc()
        if watch:
            return await _watch(handler, request, apf, found, ticket)
        started = time.monotonic()
        try:
            return await handler(request)
        finally:
            level.qs.finish(ticket)
            flow.executed(False).observe(time.monotonic() - started)

    return priority_and_fairness_filter


async def _watch(handler: ChainHandler, request: Request, apf: FlowControl, found: Classification,
                 ticket: Ticket) -> Response:
    """Serve a watch, giving back its seats once its response has started."""
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def initialized() -> None:
        found.level.qs.finish(ticket)
        found.flow.executed(True).observe(time.monotonic() - started)

    def check() -> None:
        nonlocal timer
        if request.get(RESPONSE_STARTED):
            timer = None
            initialized()
        else:
            timer = loop.call_later(WATCH_INIT_CHECK, check)

    forget = apf.watches.register(request[REQUEST_INFO])
    timer = loop.call_later(WATCH_INIT_CHECK, check)
    try:
        return await handler(request)
    finally:
        forget()
        if timer is not None:
            timer.cancel()
            initialized()
