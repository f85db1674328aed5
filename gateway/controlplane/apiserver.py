"""The kube core server, assembled (kube's controlplane Config -> Complete -> New): the built-in
groups' stores and endpoints, the review APIs, service accounts' tokens, cluster IPs and the
``kubernetes`` Service, and the post-start hooks that bootstrap what a cluster starts with.

Every store is complete when built: RBAC's escalation check on roles and bindings, the token
subresource on service accounts, cluster-IP allocation on Services, and read-your-writes on the
caches the gateway decides from are given to ``build_kube_core``, not added afterwards.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.netutil import parse_service_cidrs
from gateway.apis.authentication import reviews as authn_reviews
from gateway.apis.authorization import reviews as authz_reviews
from gateway.apis.core.namespaces import SYSTEM_NAMESPACES
from gateway.apis.core.serviceaccounts import TokenHandler, token_request_handler
from gateway.apis.core.serviceips import ServiceIPs
from gateway.apis.install import KubeCore, build_kube_core
from gateway.auth.rbac.escalation import EscalationCheck
from gateway.auth.security import Security
from gateway.controllers.flowcontrol import FlowControlConfig
from gateway.controllers.rbac import AggregationController, PolicyController
from gateway.controllers.servicenetwork import ServiceNetwork
from gateway.endpoints.handlers import ResourceEndpoints, SubresourceFactory
from gateway.flowcontrol.controller import FlowControl
from gateway.options import ServeOptions
from gateway.registry.store import Admission, WriteOptions
from gateway.server.config import CompletedConfig as GenericConfig
from gateway.server.genericapiserver import GenericAPIServer, Handler
from gateway.server.lifecycle import Start, retrying
from gateway.server.metrics import FlowControlMetrics, Metrics

log = structlog.get_logger(__name__)

SYSTEM_NAMESPACES_HOOK = "poststarthook/start-system-namespaces-controller"
SERVICE_IP_REPAIR_HOOK = "poststarthook/start-service-ip-repair-controllers"
BOOTSTRAP_CONTROLLER_HOOK = "poststarthook/bootstrap-controller"
RBAC_HOOK = "poststarthook/rbac/bootstrap-roles"
AGGREGATION_HOOK = "poststarthook/rbac/aggregate-cluster-roles"
APF_CONFIG_HOOK = "poststarthook/priority-and-fairness-config-producer"
APF_CONSUMER_HOOK = "poststarthook/priority-and-fairness-config-consumer"
RBAC_GROUP = "rbac.authorization.k8s.io"
FLOWCONTROL_GROUP = "flowcontrol.apiserver.k8s.io"
#: The caches the gateway decides from, besides those the authorizer and admission read
#: (built with them): API Priority and Fairness' configuration, whose upkeep reads its own
#: writes back.
_READ_YOUR_WRITES = (f"flowschemas.{FLOWCONTROL_GROUP}",
                     f"prioritylevelconfigurations.{FLOWCONTROL_GROUP}")


def new_flow_control(options: ServeOptions, metrics: Metrics) -> FlowControl | None:
    """API Priority and Fairness, when enabled: the in-flight limits' total shared among
    priority levels (kube's server concurrency limit)."""
    if not options.enable_priority_and_fairness:
        return None
    apf_metrics = FlowControlMetrics(metrics.registry)
    flow_control = FlowControl(
        options.max_requests_inflight + options.max_mutating_requests_inflight, apf_metrics)
    flow_control.counts.observers.append(apf_metrics.stored_objects)
    return flow_control


@dataclass
class Config:
    generic: GenericConfig
    options: ServeOptions
    security: Security
    #: The generic server's API Priority and Fairness, which follows kube core's
    #: configuration objects (None: disabled).
    flow_control: FlowControl | None = None

    def complete(self) -> CompletedConfig:
        return CompletedConfig(self)


class CompletedConfig:
    def __init__(self, config: Config) -> None:
        self.generic = config.generic
        self.options = config.options
        self.security = config.security
        self.flow_control = config.flow_control
        ranges = config.options.service_ip_ranges or parse_service_cidrs("")
        self.service_ip_ranges = ranges
        self.service_ips = ServiceIPs.over(config.generic.factory.storage, ranges)

    def new(self, delegate: Handler) -> KubeCoreServer:
        return KubeCoreServer(self, delegate)


class KubeCoreServer:
    """The built-in groups, served by the ``kube-apiserver`` server of the chain."""

    def __init__(self, config: CompletedConfig, delegate: Handler) -> None:
        generic, options, security = config.generic, config.options, config.security
        self.generic, self.options = generic, options
        self.flow_control = config.flow_control
        self.server: GenericAPIServer = generic.new("kube-apiserver", delegate)
        self.core: KubeCore = build_kube_core(
            generic.store_options, min_request_timeout=generic.min_request_timeout,
            stopping=generic.stopping, admission=_escalation_checks(security),
            subresources={"serviceaccounts": {"token": _token_subresource(security)}},
            read_your_writes=_READ_YOUR_WRITES, service_ips=config.service_ips)
        for resource, endpoints in self.core.served():
            self.server.install_api(resource, endpoints)
        self._install_reviews(security)
        self.service_network = ServiceNetwork(  # cluster IPs, the kubernetes Service
            self.core, generic.factory.storage, config.service_ips,
            ranges=config.service_ip_ranges, advertise_address=options.advertise_address,
            bind_address=options.bind_address, secure_port=options.secure_port)
        core = self.core
        #: The bootstrap policy and the aggregated cluster roles: made by the hooks here,
        #: kept by their controllers once the controllers start.
        self.rbac_policy = PolicyController({
            kind: core.store(kind.lower() + "s", RBAC_GROUP)
            for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")})
        self.role_aggregation = AggregationController(core.store("clusterroles", RBAC_GROUP))
        self.flow_control_config = FlowControlConfig(
            core.store("flowschemas", FLOWCONTROL_GROUP),
            core.store("prioritylevelconfigurations", FLOWCONTROL_GROUP))
        network = self.service_network
        lifecycle = generic.lifecycle
        lifecycle.add_post_start_hook(SYSTEM_NAMESPACES_HOOK,
                                      lambda _: self._ensure_system_namespaces())
        lifecycle.add_post_start_hook(SERVICE_IP_REPAIR_HOOK, network.start_repair)
        lifecycle.add_post_start_hook(BOOTSTRAP_CONTROLLER_HOOK, network.start_bootstrap)
        lifecycle.add_post_start_hook(RBAC_HOOK, lambda _: retrying(
            self.rbac_policy.ensure_all, "bootstrapping RBAC"))
        lifecycle.add_post_start_hook(AGGREGATION_HOOK, lambda _: retrying(
            self.role_aggregation.aggregate, "aggregating cluster roles"))
        lifecycle.add_post_start_hook(APF_CONFIG_HOOK, self._start_flow_control_config)
        if self.flow_control is not None:
            lifecycle.add_post_start_hook(APF_CONSUMER_HOOK, self._start_flow_control)

    def _install_reviews(self, security: Security) -> None:
        """TokenReview, SelfSubjectReview and the access reviews, answered by the gateway's
        authenticators and authorizer."""
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
            self.server.install_api(resource, endpoints)

    # -- post-start hooks ---------------------------------------------------------------------

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

    async def _start_flow_control_config(self, start: Start) -> None:
        """The bootstrap APF objects, then the controller that keeps them and their status."""
        apf = self.flow_control_config
        await retrying(apf.ensure, "creating the APF bootstrap configuration")
        await retrying(apf.sync_status, "writing FlowSchema conditions")
        await start(apf.run())

    async def _start_flow_control(self, start: Start) -> None:
        """API Priority and Fairness follows its configuration; object counts for the seat
        cost of lists are polled."""
        flow_control = self.flow_control
        assert flow_control is not None
        await start(flow_control.follow(
            self.core.store("flowschemas", FLOWCONTROL_GROUP),
            self.core.store("prioritylevelconfigurations", FLOWCONTROL_GROUP)))
        poll = self.options.etcd_count_metric_poll_period
        if poll > 0:
            await start(flow_control.counts.poll(self.generic.factory, poll))

    async def stop(self) -> None:
        await self.service_network.stop()  # drop this gateway from the kubernetes endpoints


def _escalation_checks(security: Security) -> dict[str, list[Admission]]:
    """RBAC's escalation checks on roles and bindings (with RBAC among the modes)."""
    if security.rbac is None:
        return {}
    check = EscalationCheck(security.rbac, security.authorize)
    checks: dict[str, list[Admission]] = {}
    for plural in ("roles", "clusterroles"):
        checks[f"{plural}.{RBAC_GROUP}"] = [check.role_hook(plural)]
    for plural in ("rolebindings", "clusterrolebindings"):
        checks[f"{plural}.{RBAC_GROUP}"] = [check.binding_hook(plural)]
    return checks


def _token_subresource(security: Security) -> SubresourceFactory:
    """serviceaccounts/token: TokenRequests signed by the gateway's issuer."""

    def make(endpoints: ResourceEndpoints) -> TokenHandler:
        return token_request_handler(endpoints.store, security.tokens, security.tokens.lookup)

    return make
