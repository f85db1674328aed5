"""Know which requests are in flight, so a stop can wait for them (graceful shutdown).

aiohttp drops request bodies still arriving once its own shutdown begins, so the gateway
first closes its listener, then waits here for in-flight requests to finish (long-running
ones, watches, are not waited for), and only then shuts the HTTP server down. Responses sent
while draining ask the client to close the connection.
"""

from __future__ import annotations

import asyncio

from gateway.apimachinery.context import REQUEST_INFO
from gateway.server.request import ChainHandler, Request, Response


class InFlightRequests:
    def __init__(self) -> None:
        self.count = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.count += 1
        if self.count == 1:
            self._idle.clear()

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """True when every waited-for request finished within ``timeout``."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True


def with_drain_tracking(handler: ChainHandler, in_flight: InFlightRequests) -> ChainHandler:
    async def draining_filter(request: Request) -> Response:
        if request[REQUEST_INFO].is_long_running:
            return await handler(request)
        in_flight.enter()
        try:
            response = await handler(request)
        finally:
            in_flight.leave()
        if in_flight.draining:
            response.force_close()
        return response

    return draining_filter
