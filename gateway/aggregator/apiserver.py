"""The aggregator, assembled (kube-aggregator's Config -> Complete -> New): the outermost server
of the chain. It serves apiregistration.k8s.io APIServices, sends remote group versions to their
backends, and owns the paths every client expects of the whole chain: /version, /metrics,
discovery merged over every server (/api, /apis, /apis/<group>[/<version>]) and the OpenAPI
documents.

It registers its own post-start hooks (APIService registration, local and remote availability,
the discovery and OpenAPI downloads, the local APIServices' autoregistration), the
autoregister-completion health check, and the signal that routes are still being installed
until every APIService is routed. Every call out to a backend (the proxy, discovery and
OpenAPI downloads, availability checks) goes through the one outgoing client it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gateway.aggregator.apiservices import APISERVICES
from gateway.aggregator.apiservices import GROUP as APIREGISTRATION_GROUP
from gateway.aggregator.autoregister import AutoRegistration, local_apiservices
from gateway.aggregator.availability import AvailabilityController
from gateway.aggregator.discovery import DiscoveryManager, apiservice_priorities
from gateway.aggregator.metrics import AggregatorMetrics
from gateway.aggregator.namespaced import RemoteNamespacedResources
from gateway.aggregator.openapi import AggregatedOpenAPI
from gateway.aggregator.proxy import Proxy
from gateway.aggregator.registration import APIServiceRegistration, LocalAvailability
from gateway.aggregator.server import AggregatorServer
from gateway.apimachinery import status
from gateway.endpoints.handlers import json_response
from gateway.registry.store import RESTStore
from gateway.server.config import CompletedConfig as GenericConfig
from gateway.server.discovery import Discovery
from gateway.server.genericapiserver import GenericAPIServer, Handler
from gateway.server.lifecycle import Start, retrying
from gateway.server.metrics import Metrics
from gateway.server.openapi import OpenAPI
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ServiceResolver
from gateway.version import version_info

APISERVICE_REGISTRATION_HOOK = "poststarthook/apiservice-registration-controller"
LOCAL_AVAILABLE_HOOK = "poststarthook/apiservice-status-local-available-controller"
REMOTE_AVAILABLE_HOOK = "poststarthook/apiservice-status-remote-available-controller"
DISCOVERY_HOOK = "poststarthook/apiservice-discovery-controller"
OPENAPI_HOOK = "poststarthook/apiservice-openapi-controller"
AUTOREGISTRATION_HOOK = "poststarthook/kube-apiserver-autoregistration"


@dataclass
class Config:
    generic: GenericConfig
    #: The process's metrics, served at /metrics; the aggregator's are registered with them.
    metrics: Metrics
    #: The one outgoing client, and how a Service becomes an address.
    clients: ClientManager
    resolver: ServiceResolver
    #: kube core's Services and Endpoints, which the availability checks follow.
    services: RESTStore
    endpoints: RESTStore

    def complete(self) -> CompletedConfig:
        return CompletedConfig(self)


class CompletedConfig:
    def __init__(self, config: Config) -> None:
        self.config = config

    def new(self, delegate: Handler) -> Aggregator:
        return Aggregator(self.config, delegate)


class Aggregator:
    """kube-aggregator: APIServices, their routing and proxying, and the merged documents."""

    def __init__(self, config: Config, delegate: Handler) -> None:
        generic, clients, resolver = config.generic, config.clients, config.resolver
        self.generic = generic
        self.server: GenericAPIServer = generic.new("kube-aggregator", delegate)
        # a write returns once routing can see it
        self.apiservices = generic.store_options.new_store(APISERVICES, read_your_writes=True)
        self.server.install_api(APISERVICES, generic.endpoints(self.apiservices))
        self.metrics = AggregatorMetrics(config.metrics.registry)
        self.registration = APIServiceRegistration(self.apiservices)
        self.local_availability = LocalAvailability(self.apiservices, self.registration)
        self.autoregistration = AutoRegistration(
            self.apiservices, self.registration,
            local_apiservices(self.local_group_versions()))
        self.discovery = Discovery(generic.api_groups, self.registration.groups,
                                   pinned=(APIREGISTRATION_GROUP,),
                                   priorities=apiservice_priorities(self.registration))
        self.registration.on_change(self.discovery.invalidate)
        self.proxy = Proxy(clients, resolver, self.metrics)
        # aggregated discovery of remote APIServices, fetched in the background
        self.discovery_manager = DiscoveryManager(self.discovery.store, clients, resolver)
        self.registration.observe(self.discovery_manager.observe)
        self.remote_availability = AvailabilityController(
            self.apiservices, config.services, config.endpoints, clients, resolver,
            self.metrics)
        self.openapi = AggregatedOpenAPI(OpenAPI(generic.api_resources), self.registration,
                                         clients, resolver, self.proxy)
        #: The namespaced resources of remote APIServices, for the namespace controller.
        self.remote_namespaced = RemoteNamespacedResources(
            self.discovery.store.merged, self.registration.route, clients, resolver)
        # group versions installed or removed while serving (CRDs): discovery, OpenAPI and the
        # local APIServices follow
        self.autoregistration.follow(self.local_group_versions)
        for server in generic.servers:
            server.on_change(self.discovery.invalidate)
            server.on_change(self.openapi.local.invalidate)
            server.on_change(self.autoregistration.served_changed)
        self._install_paths(config.metrics)
        self.aggregator_server = AggregatorServer(self.server, self.registration,
                                                  proxy=self.proxy)
        lifecycle = generic.lifecycle
        lifecycle.add_post_start_hook(APISERVICE_REGISTRATION_HOOK, self._start_registration)
        lifecycle.add_post_start_hook(LOCAL_AVAILABLE_HOOK,
                                      lambda start: start(self.local_availability.run()))
        lifecycle.add_post_start_hook(REMOTE_AVAILABLE_HOOK,
                                      lambda start: start(self.remote_availability.run()))
        lifecycle.add_post_start_hook(DISCOVERY_HOOK,
                                      lambda start: start(self.discovery_manager.run()))
        lifecycle.add_post_start_hook(OPENAPI_HOOK, lambda start: start(self.openapi.run()))
        lifecycle.add_post_start_hook(AUTOREGISTRATION_HOOK, self._autoregister)
        lifecycle.add_health_check(self.autoregistration.completion_check())
        hooks = lifecycle.hooks
        lifecycle.add_routes_complete_signal(
            "APIServiceRegistrationControllerInitiated",
            lambda: hooks[APISERVICE_REGISTRATION_HOOK].healthy)

    def local_group_versions(self) -> list[tuple[str, str]]:
        """Every (group, version) the servers below the aggregator serve."""
        return [(name, version) for server in self.generic.servers if server is not self.server
                for name, group in server.groups.items() for version in group.versions]

    def _install_paths(self, metrics: Metrics) -> None:
        agg = self.server
        agg.add_paths({
            "/version": _version,
            "/metrics": metrics.handle,
            "/api": self.discovery.api,
            "/apis": self.discovery.apis,
            "/api/v1": self.discovery.group_path,
            "/openapi/v2": self.openapi.v2,
            "/openapi/v3": self.openapi.v3_index,
        })
        agg.add_prefix("/apis/", self.discovery.group_path)
        agg.add_prefix("/openapi/v3/", self.openapi.v3_group_version)

    # -- post-start hooks ---------------------------------------------------------------------

    async def _start_registration(self, start: Start) -> None:
        """Route every APIService before going on (kube's apiservice-registration-controller
        hook waits for the same)."""
        await start(self.registration.run())
        await self.registration.synced.wait()

    async def _autoregister(self, start: Start) -> None:
        await retrying(self.autoregistration.sync_on_start, "registering local APIServices")
        await start(self.autoregistration.run())


async def _version(request: web.BaseRequest) -> web.StreamResponse:
    if request.method not in ("GET", "HEAD"):
        raise status.method_not_allowed(request.method, "version")
    return json_response(version_info())
