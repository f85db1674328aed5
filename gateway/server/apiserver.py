"""The gateway assembled: store, watch caches, the server chain, health, and start-up work.

The server chain is kube-apiserver's: aggregator -> kube core -> apiextensions -> 404. The
aggregator, outermost, also owns the non-resource paths every client expects (/healthz, /livez,
/readyz, /version). Start-up work that needs the store (watch caches, system namespaces) runs
as post-start hooks once the store answers, each with its readiness check, so the gateway
listens at once and reports what it is still waiting for.
"""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web

from gateway.apis.core.namespaces import SYSTEM_NAMESPACES
from gateway.apis.install import install_kube_core
from gateway.endpoints import status
from gateway.endpoints.handlers import json_response
from gateway.options import ServeOptions
from gateway.registry.store import RESTStore
from gateway.server.filters.draining import InFlightRequests
from gateway.server.genericapiserver import GenericAPIServer, Handler
from gateway.server.handler_chain import build_handler_chain
from gateway.server.healthz import FlagCheck, HealthCheck, health_routes, ping_check
from gateway.storage.factory import StorageFactory, new_storage, wait_until_reachable
from gateway.version import version_info

log = structlog.get_logger(__name__)

SYSTEM_NAMESPACES_HOOK = "poststarthook/start-system-namespaces-controller"
CACHES_HOOK = "poststarthook/start-watch-caches"


class Gateway:
    """Everything ``gateway serve`` runs, without the listening socket."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.storage = new_storage(options)
        self.factory = StorageFactory(self.storage)
        self.shutting_down = FlagCheck("shutdown", True, "the gateway is shutting down")
        self.hooks = {
            name: FlagCheck(name, False, "not finished")
            for name in (CACHES_HOOK, SYSTEM_NAMESPACES_HOOK)
        }
        self._post_start: asyncio.Task[None] | None = None
        self.apiextensions = GenericAPIServer("apiextensions-apiserver")
        self.kube = GenericAPIServer("kube-apiserver", self.apiextensions.handle)
        self.aggregator = GenericAPIServer("kube-aggregator", self.kube.handle)
        self.namespaces: RESTStore = install_kube_core(self.kube, self.factory)
        self._install_non_resource_paths()
        self.in_flight = InFlightRequests()
        self.handler: Handler = build_handler_chain(self.aggregator.handle, self.in_flight)

    @property
    def storage_description(self) -> str:
        if self.options.uses_etcd:
            return "etcd " + ",".join(self.options.etcd_servers)
        return f"sqlite {self.options.state_db}"

    # -- health ---------------------------------------------------------------------------

    async def _check_storage(self) -> None:
        await asyncio.wait_for(self.storage.check_health(), 2.0)

    async def _check_caches(self) -> None:
        if not self.factory.caches_ready:
            raise RuntimeError("watch caches are not synced")

    def _install_non_resource_paths(self) -> None:
        storage = HealthCheck("etcd", self._check_storage)
        hooks = [hook.check() for hook in self.hooks.values()]
        common = [ping_check(), storage, *hooks]
        readyz = [
            ping_check(),
            storage,
            HealthCheck("etcd-readiness", self._check_storage),
            HealthCheck("informer-sync", self._check_caches),
            *hooks,
            self.shutting_down.check(),
        ]
        self.aggregator.add_paths(health_routes(common, common, readyz))
        self.aggregator.add_path("/version", self._version)

    async def _version(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise status.method_not_allowed(request.method, "version")
        return json_response(version_info())

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store (raises if it cannot be used) and begin the post-start hooks."""
        await self.storage.start()
        self._post_start = asyncio.get_running_loop().create_task(self._run_post_start_hooks())

    async def _run_post_start_hooks(self) -> None:
        await wait_until_reachable(self.storage, describe=self.storage_description)
        await self.factory.start_caches()
        self.hooks[CACHES_HOOK].set(True)
        await self._ensure_system_namespaces()
        self.hooks[SYSTEM_NAMESPACES_HOOK].set(True)
        log.info("gateway ready", storage=self.storage_description)

    async def _ensure_system_namespaces(self) -> None:
        """Create default, kube-system, kube-public and kube-node-lease if missing."""
        delay = 0.2
        for name in SYSTEM_NAMESPACES:
            while True:
                try:
                    await self.namespaces.get("", name)
                    break
                except status.StatusError as err:
                    if err.code != 404 and err.code < 500:
                        raise
                try:
                    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    await self.namespaces.create("", obj)
                    log.info("created system namespace", namespace=name)
                    break
                except status.StatusError as err:
                    if err.code == 409:
                        break
                    log.warning("creating a system namespace failed; retrying",
                                namespace=name, error=err.message)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)

    def begin_shutdown(self) -> None:
        """From now on /readyz fails, so load balancers stop sending new requests."""
        self.shutting_down.set(False)

    async def stop(self) -> None:
        if self._post_start is not None:
            self._post_start.cancel()
            await asyncio.gather(self._post_start, return_exceptions=True)
        await self.factory.close()
        await self.storage.close()
