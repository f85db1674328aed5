"""The gateway assembled from its servers' builders, as kube-apiserver assembles its chain:
aggregator -> kube core -> apiextensions -> notfound.

Each server builds itself (Config -> Complete -> New) in its own package and registers its own
post-start hooks and health checks in the lifecycle of the generic config they share; the
order of construction is what each builder takes from the ones before it. What is built here,
before the servers, is what they all use: the store and its watch caches, the one outgoing
client and service resolver, the authenticators and authorizer, and the admission chain every
store is built with. The post-start hooks run once the port is ours, so the gateway listens at
once and reports what it is still waiting for.
"""

from __future__ import annotations

import asyncio

import structlog

from gateway.aggregator import apiserver as aggregator
from gateway.aggregator.fastlane import FastLane
from gateway.aggregator.resolver import StoreServiceResolver
from gateway.apiextensions import apiserver as apiextensions
from gateway.apimachinery.dynamicfile import FileWatcher
from gateway.apis.core.endpoints import ENDPOINTS
from gateway.apis.core.services import SERVICES
from gateway.controlplane import apiserver as kube_core
from gateway.controlplane import controllers
from gateway.controlplane.admission import new_admission
from gateway.controlplane.security import new_security
from gateway.options import ServeOptions
from gateway.registry.lister import lister_for
from gateway.server import config as generic_config
from gateway.server.filters.draining import InFlightRequests
from gateway.server.filters.limits import InFlightLimits
from gateway.server.genericapiserver import GenericAPIServer, not_found_until_installed
from gateway.server.handler_chain import Audit, build_handler_chain
from gateway.server.healthz import FlagCheck
from gateway.server.lifecycle import cancel_all
from gateway.server.metrics import Metrics, StorageTimer
from gateway.server.request import ChainHandler
from gateway.storage.factory import StorageFactory, wait_until_reachable
from gateway.storage.interface import Storage
from gateway.transport.clients import ClientManager

log = structlog.get_logger(__name__)


def new_storage(options: ServeOptions) -> Storage:
    """SQLite under --data-dir, or etcd when --etcd-servers is given."""
    if options.uses_etcd:
        from gateway.storage.etcd3 import EtcdConfig, EtcdStorage

        return EtcdStorage(EtcdConfig(
            servers=tuple(options.etcd_servers),
            prefix=options.etcd_prefix,
            ca_file=str(options.etcd_cafile) if options.etcd_cafile else None,
            cert_file=str(options.etcd_certfile) if options.etcd_certfile else None,
            key_file=str(options.etcd_keyfile) if options.etcd_keyfile else None,
            compaction_interval=options.etcd_compaction_interval,
        ))
    from gateway.storage.sqlite import SQLiteStorage

    options.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return SQLiteStorage(options.state_db)


class Gateway:
    """Everything ``gateway serve`` runs, without the listening socket."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.metrics = Metrics()
        self.storage = StorageTimer(self.metrics).wrap(new_storage(options))
        factory = StorageFactory(self.storage, on_terminated=self.metrics.watcher_terminated)
        self.factory = factory
        # one outgoing client for every call out (the proxy, discovery and OpenAPI downloads,
        # availability checks, admission and conversion webhooks) and one service resolver
        self.clients = ClientManager(options.proxy_client_cert_file,
                                     options.proxy_client_key_file)
        self.resolver = StoreServiceResolver(
            lister_for(factory, SERVICES), lister_for(factory, ENDPOINTS),
            routing=options.enable_aggregator_routing)
        # authentication, authorization and admission read watch caches only: they come
        # before every store, and every store is built with them
        self.security = new_security(options, factory)
        servers: list[GenericAPIServer] = []
        self.admission = new_admission(factory, resolver=self.resolver, clients=self.clients,
                                       authorize=self.security.authorize,
                                       servers=lambda: servers)
        self.generic = generic_config.Config(
            self.admission.store_options, min_request_timeout=options.min_request_timeout,
            servers=servers).complete()
        lifecycle = self.generic.lifecycle
        self.flow_control = kube_core.new_flow_control(options, self.metrics)
        # the chain, innermost first: each server delegates to the one built before it
        self.apiextensions = apiextensions.Config(
            self.generic, self.clients, self.resolver).complete().new(
            not_found_until_installed(lifecycle.routes_complete))
        self.kube = kube_core.Config(
            self.generic, options, self.security, self.flow_control).complete().new(
            self.apiextensions.server.handle)
        self.aggregator = aggregator.Config(
            self.generic, self.metrics, self.clients, self.resolver,
            services=self.kube.core.store("services"),
            endpoints=self.kube.core.store("endpoints")).complete().new(self.kube.server.handle)
        self.controllers = controllers.Config(
            options, self.security, self.admission.policies, self.kube, self.apiextensions,
            self.aggregator).complete().new(lifecycle)
        # every hook and check is known now: the outermost server serves them
        self.aggregator.server.add_paths(lifecycle.health_routes())
        self.aggregator_server = self.aggregator.aggregator_server
        self.aggregator_metrics = self.aggregator.metrics
        # certificate, CA and key files read again when they change (run.py adds the
        # serving certificate's)
        self.files = FileWatcher()
        self.files.watch(*self.security.files(), self.clients.pair)
        self.in_flight = InFlightRequests()
        self.limits = InFlightLimits(options.max_requests_inflight,
                                     options.max_mutating_requests_inflight)
        self.audit = Audit.from_options(options)
        self.handler: ChainHandler = build_handler_chain(
            self.aggregator_server.handle, options, self.in_flight, self.limits, self.metrics,
            self.security, self.audit, self.flow_control)
        # plain requests for remote APIServices read below aiohttp, through the same chain
        # (none while auditing: audited requests go by aiohttp's side only)
        self.fast_lane = None if self.audit is not None else FastLane(
            self.aggregator_server, self.handler, self.aggregator_metrics.fast_lane_served,
            front_proxy=self.security.front_proxy, cors=bool(options.cors_allowed_origins))
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def hooks(self) -> dict[str, FlagCheck]:
        """Each post-start hook's check, in the order they run."""
        return dict(self.generic.lifecycle.hooks)

    @property
    def storage_description(self) -> str:
        if self.options.uses_etcd:
            return "etcd " + ",".join(self.options.etcd_servers)
        return f"sqlite {self.options.state_db}"

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store (raises if it cannot be used). The post-start hooks begin with
        ``begin_post_start``, once the port is ours: a gateway that cannot listen stops
        before any of their work started."""
        await self.storage.start()

    def begin_post_start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.files.run()))
        self._tasks.append(loop.create_task(self._post_start()))

    async def _post_start(self) -> None:
        """The post-start hooks in order, once the store answers."""
        await wait_until_reachable(self.storage, describe=self.storage_description)
        await self.generic.lifecycle.run_post_start_hooks()
        log.info("gateway ready", storage=self.storage_description)

    def begin_shutdown(self) -> None:
        """From now on /readyz fails, and open watches end."""
        self.generic.lifecycle.begin_shutdown()
        self.generic.stopping.set()

    async def stop(self) -> None:
        await self.kube.stop()  # drop this gateway from the kubernetes endpoints
        await cancel_all(self._tasks)
        await self.generic.lifecycle.stop()
        await self.clients.close()
        await self.factory.close()
        await self.storage.close()
        if self.audit is not None:
            self.audit.log.close()
