"""The gateway assembled: store, watch caches, the server chain, health, and start-up work.

The server chain is kube-apiserver's: aggregator -> kube core -> apiextensions -> 404. The
aggregator, outermost, also owns the non-resource paths every client expects: health, /version,
/metrics, discovery merged over every server (/api, /apis, /apis/<group>[/<version>]) and the
OpenAPI documents; it serves apiregistration.k8s.io APIServices and sends the group versions
of remote ones to their backends (gateway.aggregator.server). Start-up work that needs the
store (watch caches, system namespaces, controllers, the local APIServices) runs as post-start
hooks once the store answers, each with its readiness check, so the gateway listens at once and
reports what it is still waiting for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog
from aiohttp import web

from gateway.admission.attributes import cel_authorizer
from gateway.admission.chain import AdmissionChain
from gateway.admission.policy.plugin import ValidatingAdmissionPolicy
from gateway.admission.policy.served import ServedResources
from gateway.admission.policy.status import PolicyStatusController
from gateway.admission.policy.typechecking import TypeChecker
from gateway.admission.webhooks import WebhookAdmission
from gateway.aggregator.apiservices import APISERVICES
from gateway.aggregator.apiservices import GROUP as APIREGISTRATION_GROUP
from gateway.aggregator.autoregister import AutoRegistration, local_apiservices
from gateway.aggregator.availability import AvailabilityController
from gateway.aggregator.discovery import DiscoveryManager, apiservice_priorities
from gateway.aggregator.fastlane import FastLane
from gateway.aggregator.metrics import AggregatorMetrics
from gateway.aggregator.namespaced import RemoteNamespacedResources
from gateway.aggregator.openapi import AggregatedOpenAPI
from gateway.aggregator.proxy import Proxy
from gateway.aggregator.registration import APIServiceRegistration, LocalAvailability
from gateway.aggregator.resolver import StoreServiceResolver
from gateway.aggregator.server import AggregatorServer
from gateway.apiextensions.controller import CRDController
from gateway.apiextensions.conversion import converter_for
from gateway.apiextensions.crds import CUSTOM_RESOURCE_DEFINITIONS
from gateway.apimachinery import status
from gateway.apimachinery.dynamicfile import FileWatcher
from gateway.apis.admissionregistration.policies import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from gateway.apis.admissionregistration.webhooks import MUTATING, VALIDATING
from gateway.apis.authentication import reviews as authn_reviews
from gateway.apis.authorization import reviews as authz_reviews
from gateway.apis.core.endpoints import ENDPOINTS
from gateway.apis.core.namespaces import NAMESPACES, SYSTEM_NAMESPACES, namespace_lifecycle
from gateway.apis.core.serviceaccounts import token_request_handler
from gateway.apis.core.services import SERVICES
from gateway.apis.install import build_kube_core
from gateway.auth.rbac.authorizer import RBAC, RBACCaches
from gateway.auth.rbac.escalation import EscalationCheck
from gateway.auth.security import Security, build_security
from gateway.controllers.authconfig import AuthenticationInfoController
from gateway.controllers.events import EventReaper
from gateway.controllers.flowcontrol import FlowControlConfig
from gateway.controllers.namespaces import NamespaceController
from gateway.controllers.rbac import AggregationController, PolicyController
from gateway.controllers.rootcacert import RootCACertPublisher, load_root_ca
from gateway.controllers.serviceaccounts import ServiceAccountsController
from gateway.controllers.servicenetwork import ServiceNetwork
from gateway.endpoints.handlers import ResourceEndpoints, json_response
from gateway.flowcontrol.controller import FlowControl
from gateway.options import ServeOptions
from gateway.registry.lister import lister_for
from gateway.registry.options import StoreOptions
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore, WriteOptions
from gateway.server.discovery import Discovery, GroupVersions
from gateway.server.filters.draining import InFlightRequests
from gateway.server.filters.limits import InFlightLimits
from gateway.server.genericapiserver import GenericAPIServer, not_found_until_installed
from gateway.server.handler_chain import Audit, build_handler_chain
from gateway.server.healthz import FlagCheck, HealthCheck, health_routes, ping_check
from gateway.server.metrics import FlowControlMetrics, Metrics, StorageTimer
from gateway.server.openapi import OpenAPI
from gateway.server.request import ChainHandler
from gateway.storage.errors import StorageError
from gateway.storage.factory import StorageFactory, wait_until_reachable
from gateway.storage.interface import Storage
from gateway.transport.clients import ClientManager
from gateway.version import version_info

log = structlog.get_logger(__name__)

# Post-start hooks, in the order they run. Each is a check of /healthz, /livez and /readyz
# that fails until its work is done, so "ready" means every one of them has finished: a
# request never meets a half-bootstrapped policy. Names are kube-apiserver's where it has one.
CACHES_HOOK = "poststarthook/generic-apiserver-start-informers"
SYSTEM_NAMESPACES_HOOK = "poststarthook/start-system-namespaces-controller"
RBAC_HOOK = "poststarthook/rbac/bootstrap-roles"
AGGREGATION_HOOK = "poststarthook/rbac/aggregate-cluster-roles"
APF_CONFIG_HOOK = "poststarthook/priority-and-fairness-config-producer"
APF_CONSUMER_HOOK = "poststarthook/priority-and-fairness-config-consumer"
APISERVICE_REGISTRATION_HOOK = "poststarthook/apiservice-registration-controller"
LOCAL_AVAILABLE_HOOK = "poststarthook/apiservice-status-local-available-controller"
REMOTE_AVAILABLE_HOOK = "poststarthook/apiservice-status-remote-available-controller"
DISCOVERY_HOOK = "poststarthook/apiservice-discovery-controller"
OPENAPI_HOOK = "poststarthook/apiservice-openapi-controller"
AUTOREGISTRATION_HOOK = "poststarthook/kube-apiserver-autoregistration"
AUTH_INFO_HOOK = "poststarthook/start-cluster-authentication-info-controller"
CONTROLLERS_HOOK = "poststarthook/start-kube-controllers"
APIEXTENSIONS_HOOK = "poststarthook/start-apiextensions-controllers"
CRD_SYNCED_HOOK = "poststarthook/crd-informer-synced"
SERVICE_IP_REPAIR_HOOK = "poststarthook/start-service-ip-repair-controllers"
BOOTSTRAP_CONTROLLER_HOOK = "poststarthook/bootstrap-controller"
POST_START_HOOKS = (CACHES_HOOK, APIEXTENSIONS_HOOK, CRD_SYNCED_HOOK, SYSTEM_NAMESPACES_HOOK,
                    SERVICE_IP_REPAIR_HOOK, BOOTSTRAP_CONTROLLER_HOOK,
                    RBAC_HOOK, AGGREGATION_HOOK, APF_CONFIG_HOOK, APF_CONSUMER_HOOK,
                    APISERVICE_REGISTRATION_HOOK, LOCAL_AVAILABLE_HOOK, REMOTE_AVAILABLE_HOOK,
                    DISCOVERY_HOOK, OPENAPI_HOOK, AUTOREGISTRATION_HOOK, AUTH_INFO_HOOK,
                    CONTROLLERS_HOOK)
RBAC_GROUP = "rbac.authorization.k8s.io"


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
        self.factory = StorageFactory(self.storage,
                                      on_terminated=self.metrics.watcher_terminated)
        self.stopping = asyncio.Event()
        self.shutting_down = FlagCheck("shutdown", True, "the gateway is shutting down")
        self.hooks = {name: FlagCheck(name, False, "not finished") for name in POST_START_HOOKS
                      if name != APF_CONSUMER_HOOK or options.enable_priority_and_fairness}
        self._tasks: list[asyncio.Task[None]] = []
        self.apiextensions = GenericAPIServer("apiextensions-apiserver", not_found_until_installed(
            lambda: self.hooks[APISERVICE_REGISTRATION_HOOK].healthy))
        self.kube = GenericAPIServer("kube-apiserver", self.apiextensions.handle)
        self.aggregator = GenericAPIServer("kube-aggregator", self.kube.handle)
        # one outgoing client manager and one service resolver for every call out: admission
        # webhooks, the proxy, the availability checks; they and admission read watch caches
        # only, so they come before the stores, and every store is built with its admission
        self.clients = ClientManager(options.proxy_client_cert_file,
                                     options.proxy_client_key_file)
        self.resolver = StoreServiceResolver(
            lister_for(self.factory, SERVICES), lister_for(self.factory, ENDPOINTS),
            routing=options.enable_aggregator_routing)
        # CEL's authorizer asks the gateway's, which is assembled after the stores
        self.cel_authorizer = cel_authorizer(lambda attrs: self.security.authorize(attrs))
        self.webhooks = self._webhook_admission()
        self.policies = self._policy_admission()
        self.store_options = StoreOptions(self.factory, admission=AdmissionChain(
            mutating=[self.webhooks], validating=[self.policies, self.webhooks]))
        self.core = build_kube_core(self.store_options,
                                    min_request_timeout=options.min_request_timeout,
                                    stopping=self.stopping)
        for resource, endpoints in self.core.served():
            self.kube.install_api(resource, endpoints)
        self.service_network = ServiceNetwork(  # cluster IPs, the kubernetes Service
            self.core, self.storage, ranges=options.service_ip_ranges,
            advertise_address=options.advertise_address, bind_address=options.bind_address,
            secure_port=options.secure_port)
        self.root_ca = load_root_ca(options)  # kube-root-ca.crt's bundle; None: not known
        self.crd_controller = self._install_apiextensions()
        self.security = self._install_security()
        # certificate, CA and key files read again when they change (run.py adds the
        # serving certificate's)
        self.files = FileWatcher()
        self.files.watch(*self.security.files(), self.clients.pair)
        self.apiservices = self._install_apiregistration()
        self.aggregator_metrics = AggregatorMetrics(self.metrics.registry)
        self.registration = APIServiceRegistration(self.apiservices)
        self.local_availability = LocalAvailability(self.apiservices, self.registration)
        self.autoregistration = AutoRegistration(
            self.apiservices, self.registration, local_apiservices(self._local_group_versions()))
        self.discovery = Discovery(self.api_groups, self.registration.groups,
                                   pinned=(APIREGISTRATION_GROUP,),
                                   priorities=apiservice_priorities(self.registration))
        self.registration.on_change(self.discovery.invalidate)
        self.proxy = Proxy(self.clients, self.resolver, self.aggregator_metrics)
        # aggregated discovery of remote APIServices, fetched in the background
        self.discovery_manager = DiscoveryManager(self.discovery.store, self.clients,
                                                  self.resolver)
        self.registration.observe(self.discovery_manager.observe)
        self.remote_availability = AvailabilityController(
            self.apiservices, self.core.store("services"), self.core.store("endpoints"),
            self.clients, self.resolver, self.aggregator_metrics)
        self.openapi = AggregatedOpenAPI(OpenAPI(self.api_resources), self.registration,
                                         self.clients, self.resolver, self.proxy)
        # group versions installed or removed while serving (CRDs): discovery, OpenAPI and the
        # local APIServices follow
        self.autoregistration.follow(self._local_group_versions)
        for server in self.servers():
            server.on_change(self.discovery.invalidate)
            server.on_change(self.openapi.local.invalidate)
            server.on_change(self.autoregistration.served_changed)
        self._install_non_resource_paths()
        self.aggregator_server = AggregatorServer(self.aggregator, self.registration,
                                                  proxy=self.proxy)
        self.in_flight = InFlightRequests()
        self.limits = InFlightLimits(options.max_requests_inflight,
                                     options.max_mutating_requests_inflight)
        self.audit = Audit.from_options(options)
        self.flow_control = self._flow_control() if options.enable_priority_and_fairness \
            else None
        self.handler: ChainHandler = build_handler_chain(
            self.aggregator_server.handle, options, self.in_flight, self.limits, self.metrics,
            self.security, self.audit, self.flow_control)
        # plain requests for remote APIServices read below aiohttp, through the same chain
        # (none while auditing: audited requests go by aiohttp's side only)
        self.fast_lane = None if self.audit is not None else FastLane(
            self.aggregator_server, self.handler, self.aggregator_metrics.fast_lane_served,
            front_proxy=self.security.front_proxy, cors=bool(options.cors_allowed_origins))

    @property
    def storage_description(self) -> str:
        if self.options.uses_etcd:
            return "etcd " + ",".join(self.options.etcd_servers)
        return f"sqlite {self.options.state_db}"

    def servers(self) -> list[GenericAPIServer]:
        return [self.aggregator, self.kube, self.apiextensions]

    def api_groups(self) -> list[GroupVersions]:
        """Every group every server serves, merged by name, in installation order."""
        merged: dict[str, GroupVersions] = {}
        for server in self.servers():
            for name, group in server.groups.items():
                target = merged.setdefault(name, GroupVersions(name))
                for version, resources in group.versions.items():
                    target.versions.setdefault(version, []).extend(resources)
        return list(merged.values())

    def api_resources(self) -> list[ResourceDef]:
        return [r for server in self.servers() for r in server.api_resources]

    # -- apiextensions ----------------------------------------------------------------------

    def _endpoints(self, store: RESTStore) -> ResourceEndpoints:
        return ResourceEndpoints(store, min_request_timeout=self.options.min_request_timeout,
                                 stopping=self.stopping)

    def _install_apiextensions(self) -> CRDController:
        """CustomResourceDefinitions and the custom resources they define, served by the
        apiextensions server (the last of the chain before notfound)."""
        crds = self.store_options.new_store(CUSTOM_RESOURCE_DEFINITIONS)
        crds.cacher.read_your_writes = True
        self.apiextensions.install_api(CUSTOM_RESOURCE_DEFINITIONS, self._endpoints(crds))
        namespaces = self.core.namespaces

        def create_admission(resource: ResourceDef) -> list[Any]:
            if not resource.namespaced:
                return []
            return [namespace_lifecycle(namespaces, resource.plural, resource.group)]

        return CRDController(
            crds, self.store_options, install=self.apiextensions.install_api,
            uninstall=self.apiextensions.uninstall_api, endpoints=self._endpoints,
            converters=lambda crd: converter_for(crd, self.clients, self.resolver),
            builtin_names=lambda group: [r for r in self.api_resources() if r.group == group
                                         and r.plural != CUSTOM_RESOURCE_DEFINITIONS.plural],
            create_admission=create_admission)

    # -- aggregation ----------------------------------------------------------------------

    def _install_apiregistration(self) -> RESTStore:
        """apiregistration.k8s.io/v1 APIServices, served by the aggregator itself."""
        store = self.store_options.new_store(APISERVICES)
        store.cacher.read_your_writes = True  # a write returns once routing can see it
        self.aggregator.install_api(APISERVICES, self._endpoints(store))
        return store

    def _local_group_versions(self) -> list[tuple[str, str]]:
        """Every (group, version) the servers below the aggregator serve."""
        return [(name, version) for server in (self.kube, self.apiextensions)
                for name, group in server.groups.items() for version in group.versions]

    async def _start_registration(self) -> None:
        """Route every APIService before going on (kube's apiservice-registration-controller
        hook waits for the same)."""
        await self._start(self.registration.run())
        await self.registration.synced.wait()

    async def _autoregister(self) -> None:
        await _retrying(self.autoregistration.sync_on_start, "registering local APIServices")
        await self._start(self.autoregistration.run())

    async def _start(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (a controller's loop) until the gateway stops."""
        self._tasks.append(asyncio.get_running_loop().create_task(work))

    # -- security -------------------------------------------------------------------------

    def _install_security(self) -> Security:
        """Authenticators and authorizer, the review APIs, tokens for service accounts, and
        the escalation checks on RBAC objects."""
        core = self.core
        self.rbac = RBAC(RBACCaches(
            core.store("roles", "rbac.authorization.k8s.io").cacher,
            core.store("clusterroles", "rbac.authorization.k8s.io").cacher,
            core.store("rolebindings", "rbac.authorization.k8s.io").cacher,
            core.store("clusterrolebindings", "rbac.authorization.k8s.io").cacher))
        # The authorizer and the token authenticator read these caches: a write to them
        # returns once the cache has it, so a new binding or a deleted account counts at once.
        for cacher in (*self.rbac.caches.all(), core.store("serviceaccounts").cacher,
                       core.store("secrets").cacher):
            cacher.read_your_writes = True
        security = build_security(self.options, self.rbac, self._uid_of)
        for resource, endpoints in (
            (authn_reviews.TOKEN_REVIEWS, authn_reviews.token_review(
                security.token_authenticators, security.api_audiences)),
            (authn_reviews.SELF_SUBJECT_REVIEWS, authn_reviews.self_subject_review()),
            (authz_reviews.SUBJECT_ACCESS_REVIEWS,
             authz_reviews.subject_access_review(security.authorize)),
            (authz_reviews.SELF_SUBJECT_ACCESS_REVIEWS,
             authz_reviews.self_subject_access_review(security.authorize)),
            (authz_reviews.LOCAL_SUBJECT_ACCESS_REVIEWS,
             authz_reviews.local_subject_access_review(security.authorize)),
            (authz_reviews.SELF_SUBJECT_RULES_REVIEWS, authz_reviews.self_subject_rules_review(
                security.rbac, "AlwaysAllow" in security.modes)),
        ):
            self.kube.install_api(resource, endpoints)
        core.endpoints["serviceaccounts"].subresource_handlers["token"] = \
            token_request_handler(core.store("serviceaccounts"), security.tokens, self._uid_of)
        if security.rbac is not None:
            check = EscalationCheck(self.rbac, security.authorize)
            for plural in ("roles", "clusterroles"):
                core.store(plural, "rbac.authorization.k8s.io").admission.append(
                    check.role_hook(plural))
            for plural in ("rolebindings", "clusterrolebindings"):
                core.store(plural, "rbac.authorization.k8s.io").admission.append(
                    check.binding_hook(plural))
        return security

    def _webhook_admission(self) -> WebhookAdmission:
        """Admission webhooks, for every store's writes (built-in, CRDs, custom resources,
        APIServices), read from the configurations' watch caches."""
        configs = (lister_for(self.factory, MUTATING), lister_for(self.factory, VALIDATING))
        for lister in configs:  # a configuration counts from the moment its write returns
            lister.cacher.read_your_writes = True
        return WebhookAdmission(*configs, lister_for(self.factory, NAMESPACES), self.resolver,
                                self.clients, self.cel_authorizer)

    def _policy_admission(self) -> ValidatingAdmissionPolicy:
        """ValidatingAdmissionPolicies, for every store's writes, read from the watch caches
        of policies and bindings; params from the stores the servers serve."""
        listers = (lister_for(self.factory, VALIDATING_ADMISSION_POLICIES),
                   lister_for(self.factory, VALIDATING_ADMISSION_POLICY_BINDINGS))
        for lister in listers:  # a policy counts from the moment its write returns
            lister.cacher.read_your_writes = True
        return ValidatingAdmissionPolicy(*listers, lister_for(self.factory, NAMESPACES),
                                         ServedResources(self.servers), self.cel_authorizer)

    async def _uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        """The uid of a service account or secret (tokens are bound to them), or None."""
        plural = {"ServiceAccount": "serviceaccounts", "Secret": "secrets"}.get(kind)
        if plural is None:
            return None
        store = self.core.store(plural)
        try:
            if store.cacher.ready:
                cached = await store.cacher.get_cached(store.resource.key(namespace, name))
                return cached["metadata"].get("uid")
        except StorageError:
            pass
        try:
            return (await store.get(namespace, name))["metadata"].get("uid")
        except status.StatusError as err:
            if err.code == 404:
                return None
            raise

    # -- non-resource paths -----------------------------------------------------------------

    async def _check_storage(self) -> None:
        await asyncio.wait_for(self.storage.check_health(), 2.0)

    async def _check_caches(self) -> None:
        if not self.factory.caches_ready:
            raise RuntimeError("watch caches are not synced")

    def _install_non_resource_paths(self) -> None:
        storage = HealthCheck("etcd", self._check_storage)
        hooks = [hook.check() for hook in self.hooks.values()]
        autoregistered = self.autoregistration.completion_check()
        common = [ping_check(), storage, *hooks, autoregistered]
        readyz = [
            ping_check(), storage, HealthCheck("etcd-readiness", self._check_storage),
            HealthCheck("informer-sync", self._check_caches), *hooks, autoregistered,
            self.shutting_down.check(),
        ]
        agg = self.aggregator
        agg.add_paths(health_routes(common, common, readyz))
        agg.add_paths({
            "/version": self._version,
            "/metrics": self.metrics.handle,
            "/api": self.discovery.api,
            "/apis": self.discovery.apis,
            "/api/v1": self.discovery.group_path,
            "/openapi/v2": self.openapi.v2,
            "/openapi/v3": self.openapi.v3_index,
        })
        agg.add_prefix("/apis/", self.discovery.group_path)
        agg.add_prefix("/openapi/v3/", self.openapi.v3_group_version)

    async def _version(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise status.method_not_allowed(request.method, "version")
        return json_response(version_info())

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
        """The post-start hooks in order, each marked done as it finishes; then the
        controllers that keep their work up to date."""
        await wait_until_reachable(self.storage, describe=self.storage_description)
        policy = PolicyController({
            kind: self.core.store(kind.lower() + "s", RBAC_GROUP)
            for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")})
        aggregation = AggregationController(self.core.store("clusterroles", RBAC_GROUP))
        apf = self._flow_control_config()
        work: dict[str, Callable[[], Awaitable[object]]] = {
            CACHES_HOOK: self.factory.start_caches,
            APIEXTENSIONS_HOOK: lambda: self._start(self.crd_controller.run()),
            CRD_SYNCED_HOOK: self.crd_controller.sync_existing,
            SYSTEM_NAMESPACES_HOOK: self._ensure_system_namespaces,
            SERVICE_IP_REPAIR_HOOK: lambda: self.service_network.start_repair(self._start),
            BOOTSTRAP_CONTROLLER_HOOK: lambda: self.service_network.start_bootstrap(self._start),
            RBAC_HOOK: lambda: _retrying(policy.ensure_all, "bootstrapping RBAC"),
            AGGREGATION_HOOK: lambda: _retrying(aggregation.aggregate,
                                                "aggregating cluster roles"),
            APF_CONFIG_HOOK: lambda: self._start_flow_control_config(apf),
            APF_CONSUMER_HOOK: self._start_flow_control,
            APISERVICE_REGISTRATION_HOOK: self._start_registration,
            LOCAL_AVAILABLE_HOOK: lambda: self._start(self.local_availability.run()),
            REMOTE_AVAILABLE_HOOK: lambda: self._start(self.remote_availability.run()),
            DISCOVERY_HOOK: lambda: self._start(self.discovery_manager.run()),
            OPENAPI_HOOK: lambda: self._start(self.openapi.run()),
            AUTOREGISTRATION_HOOK: self._autoregister,
            AUTH_INFO_HOOK: self._start_authentication_info,
            CONTROLLERS_HOOK: lambda: self._start_controllers(policy, aggregation),
        }
        for name in self.hooks:
            await work[name]()
            self.hooks[name].set(True)
            log.debug("post-start hook finished", hook=name)
        log.info("gateway ready", storage=self.storage_description)

    async def _start_authentication_info(self) -> None:
        """The extension-apiserver-authentication ConfigMap, then the controller that keeps
        it current as the CA files change."""
        controller = AuthenticationInfoController(
            self.core.store("configmaps"), self.options, self.security.client_ca,
            self.security.requestheader_ca)
        await _retrying(controller.sync, "publishing the authentication ConfigMap")
        await self._start(controller.run())

    def _flow_control_config(self) -> FlowControlConfig:
        group = "flowcontrol.apiserver.k8s.io"
        stores = (self.core.store("flowschemas", group),
                  self.core.store("prioritylevelconfigurations", group))
        for store in stores:  # the upkeep reads its own writes from the caches
            store.cacher.read_your_writes = True
        return FlowControlConfig(*stores)

    async def _start_flow_control_config(self, apf: FlowControlConfig) -> None:
        """The bootstrap APF objects, then the controller that keeps them and their status."""
        await _retrying(apf.ensure, "creating the APF bootstrap configuration")
        await _retrying(apf.sync_status, "writing FlowSchema conditions")
        await self._start(apf.run())

    def _flow_control(self) -> FlowControl:
        """API Priority and Fairness: the in-flight limits' total shared among priority
        levels (kube's server concurrency limit)."""
        apf_metrics = FlowControlMetrics(self.metrics.registry)
        flow_control = FlowControl(
            self.options.max_requests_inflight + self.options.max_mutating_requests_inflight,
            apf_metrics)
        flow_control.counts.observers.append(apf_metrics.stored_objects)
        return flow_control

    async def _start_flow_control(self) -> None:
        """API Priority and Fairness follows its configuration; object counts for the seat
        cost of lists are polled."""
        assert self.flow_control is not None
        group = "flowcontrol.apiserver.k8s.io"
        await self._start(self.flow_control.follow(
            self.core.store("flowschemas", group),
            self.core.store("prioritylevelconfigurations", group)))
        if self.options.etcd_count_metric_poll_period > 0:
            await self._start(self.flow_control.counts.poll(
                self.factory, self.options.etcd_count_metric_poll_period))

    async def _start_controllers(self, policy: PolicyController,
                                 aggregation: AggregationController) -> None:
        loop = asyncio.get_running_loop()
        controllers = [
            NamespaceController(
                self.core.namespaces,
                lambda: self.core.namespaced + self.crd_controller.namespaced_stores(),
                remote=RemoteNamespacedResources(  # remote APIServices' objects too
                    self.discovery.store.merged, self.registration.route, self.clients,
                    self.resolver).discover).run(),
            EventReaper(self.core.store("events"), self.options.event_ttl).run(),
            policy.run(),
            aggregation.run(),
            ServiceAccountsController(self.core.namespaces,
                                      self.core.store("serviceaccounts")).run(),
            PolicyStatusController(  # kube-controller-manager's, for status.typeChecking
                self.core.store(VALIDATING_ADMISSION_POLICIES.plural,
                                VALIDATING_ADMISSION_POLICIES.group),
                TypeChecker(self.policies.resources)).run(),
        ]
        if self.root_ca is not None:
            controllers.append(RootCACertPublisher(
                self.core.namespaces, self.core.store("configmaps"), self.root_ca).run())
        else:
            log.warning("not publishing kube-root-ca.crt: no --root-ca-file, and the serving "
                        "certificate is not the development PKI's, so its CA is not known")
        self._tasks += [loop.create_task(c) for c in controllers]

    async def _ensure_system_namespaces(self) -> None:
        """Create default, kube-system, kube-public and kube-node-lease if missing."""
        delay = 0.2
        for name in SYSTEM_NAMESPACES:
            while True:
                try:
                    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    await self.core.namespaces.create("", obj, WriteOptions(
                        manager="kube-apiserver"))
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
        """From now on /readyz fails, and open watches end."""
        self.shutting_down.set(False)
        self.stopping.set()

    async def stop(self) -> None:
        await self.service_network.stop()  # drop this gateway from the kubernetes endpoints
        await _cancel_all(self._tasks)
        await self.webhooks.close()
        await self.clients.close()
        await self.factory.close()
        await self.storage.close()
        if self.audit is not None:
            self.audit.log.close()


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
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


async def _retrying(work: Callable[[], Awaitable[None]], what: str) -> None:
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
