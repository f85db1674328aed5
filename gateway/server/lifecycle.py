"""What runs around the servers of one delegation chain: post-start hooks, health checks, the
background work the hooks start, and the signals of start and shutdown (kube's
GenericAPIServer.AddPostStartHook, AddHealthChecks, AddReadyzChecks and its lifecycle signals).

Every server of a chain is built from one generic config and so shares one ``Lifecycle``: each
server's builder registers its own hooks and checks, in the order it is built, and the outermost
server serves them all at /healthz, /livez and /readyz (``health_routes``), as kube's outermost
server lists the hooks it inherited from its delegates. A hook is a check that fails until its
work has finished, so "ready" means every hook has run. The hooks run one after another, in
the order they were added: each may rely on the ones before it (the watch caches first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from gateway.apimachinery import status
from gateway.server.healthz import FlagCheck, HealthCheck, health_routes
from gateway.storage.errors import StorageError

log = structlog.get_logger(__name__)

#: Work a hook starts and leaves running (a controller's loop), until the servers stop.
Start = Callable[[Coroutine[Any, Any, None]], Awaitable[None]]
#: A post-start hook: its work, given how to start what it leaves running.
Hook = Callable[[Start], Awaitable[object]]


class Lifecycle:
    """Post-start hooks, health checks and background work of the servers of one chain."""

    def __init__(self) -> None:
        self._hooks: dict[str, tuple[FlagCheck, Hook]] = {}
        self._base: list[HealthCheck] = []  # /healthz, /livez and /readyz, before the hooks
        self._readyz_base: list[HealthCheck] = []  # /readyz only, before the hooks
        self._checks: list[HealthCheck] = []  # every endpoint, after the hooks
        #: Fails /readyz once the servers begin to shut down (kube's "shutdown" check).
        self.shutting_down = FlagCheck("shutdown", True, "the gateway is shutting down")
        self._complete_signals: dict[str, Callable[[], bool]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # -- registration (while the servers are built) -----------------------------------------

    def add_post_start_hook(self, name: str, work: Hook) -> None:
        """Run ``work`` once the servers listen, after the hooks added before it; until it
        has finished, the check ``name`` fails."""
        if name in self._hooks:
            raise ValueError(f"post-start hook {name!r} added twice")
        self._hooks[name] = (FlagCheck(name, False, "not finished"), work)

    def add_base_checks(self, checks: list[HealthCheck], readyz_only: list[HealthCheck]
                        ) -> None:
        """The generic server's own checks (ping, the store), listed before the hooks."""
        self._base += checks
        self._readyz_base += readyz_only

    def add_health_check(self, check: HealthCheck) -> None:
        """A check of /healthz, /livez and /readyz, listed after the hooks."""
        self._checks.append(check)

    def add_routes_complete_signal(self, name: str, done: Callable[[], bool]) -> None:
        """Something still installing routes at start (CRDs, APIServices): until every such
        signal is done, a path nobody serves may be served in a moment (kube's
        RegisterMuxAndDiscoveryCompleteSignal)."""
        self._complete_signals[name] = done

    def routes_complete(self) -> bool:
        return all(done() for done in self._complete_signals.values())

    # -- what the servers serve -------------------------------------------------------------

    @property
    def hooks(self) -> dict[str, FlagCheck]:
        """Each hook's check, in the order the hooks run."""
        return {name: flag for name, (flag, _) in self._hooks.items()}

    def health_routes(self) -> dict[str, Callable[..., Awaitable[Any]]]:
        """/healthz, /livez, /readyz and each of their checks' paths, for the outermost server
        once every server of the chain is built (kube's PrepareRun)."""
        hooks = [flag.check() for flag in self.hooks.values()]
        common = [*self._base, *hooks, *self._checks]
        readyz = [*self._base, *self._readyz_base, *hooks, *self._checks,
                  self.shutting_down.check()]
        return health_routes(common, common, readyz)

    # -- running ------------------------------------------------------------------------------

    async def start(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (a controller's loop) until the servers stop."""
        self._tasks.append(asyncio.get_running_loop().create_task(work))

    async def run_post_start_hooks(self) -> None:
        """The hooks in order, each marked done as it finishes."""
        for name, (flag, work) in self._hooks.items():
            await work(self.start)
            flag.set(True)
            log.debug("post-start hook finished", hook=name)

    def begin_shutdown(self) -> None:
        self.shutting_down.set(False)

    async def stop(self) -> None:
        """Cancel every task the hooks started (and the hooks still running)."""
        await cancel_all(self._tasks)


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait for them, cancelling again any that went on (a cancellation
    swallowed by library code, or a task started by one being cancelled): stopping must
    not hang on one task."""
    while pending := [task for task in tasks if not task.done()]:
        for task in pending:
            task.cancel()
        _, still = await asyncio.wait(pending, timeout=1.0)
        if still:
            log.warning("tasks still running after cancellation; cancelling again",
                        tasks=len(still))


async def retrying(work: Callable[[], Awaitable[None]], what: str) -> None:
    """Run start-up ``work`` until it succeeds (the store may still be settling)."""
    delay = 0.2
    while True:
        try:
            await work()
            return
        except (StorageError, status.StatusError) as err:
            log.warning(f"{what} failed; retrying", error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
