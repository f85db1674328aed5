"""The controllers that run beside the servers once they are built (what kube-controller-manager
and kube-apiserver's own controllers do for the objects the gateway serves): the
extension-apiserver-authentication ConfigMap, namespaces' deletion, events' expiry, the RBAC
policy and role aggregation kept, service accounts, policies' type checks, kube-root-ca.crt.

They come last: the namespace controller deletes the objects of every server, custom resources
and remote APIServices' included, so it takes the servers it needs as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from gateway.admission.policy.plugin import ValidatingAdmissionPolicy
from gateway.admission.policy.status import PolicyStatusController
from gateway.admission.policy.typechecking import TypeChecker
from gateway.aggregator.apiserver import Aggregator
from gateway.apiextensions.apiserver import APIExtensionsServer
from gateway.apis.admissionregistration.policies import VALIDATING_ADMISSION_POLICIES
from gateway.auth.security import Security
from gateway.controllers.authconfig import AuthenticationInfoController
from gateway.controllers.events import EventReaper
from gateway.controllers.namespaces import NamespaceController
from gateway.controllers.rootcacert import RootCACertPublisher, load_root_ca
from gateway.controllers.serviceaccounts import ServiceAccountsController
from gateway.controlplane.apiserver import KubeCoreServer
from gateway.options import ServeOptions
from gateway.server.lifecycle import Lifecycle, Start, retrying

log = structlog.get_logger(__name__)

AUTH_INFO_HOOK = "poststarthook/start-cluster-authentication-info-controller"
CONTROLLERS_HOOK = "poststarthook/start-kube-controllers"


@dataclass
class Config:
    options: ServeOptions
    security: Security
    policies: ValidatingAdmissionPolicy
    kube: KubeCoreServer
    apiextensions: APIExtensionsServer
    aggregator: Aggregator

    def complete(self) -> CompletedConfig:
        return CompletedConfig(self)


class CompletedConfig:
    def __init__(self, config: Config) -> None:
        self.config = config
        #: kube-root-ca.crt's bundle; None: not known.
        self.root_ca = load_root_ca(config.options)

    def new(self, lifecycle: Lifecycle) -> Controllers:
        return Controllers(self, lifecycle)


class Controllers:
    """Registers the two post-start hooks that start the controllers."""

    def __init__(self, config: CompletedConfig, lifecycle: Lifecycle) -> None:
        self.config = config.config
        self.root_ca = config.root_ca
        lifecycle.add_post_start_hook(AUTH_INFO_HOOK, self._start_authentication_info)
        lifecycle.add_post_start_hook(CONTROLLERS_HOOK, self._start_controllers)

    async def _start_authentication_info(self, start: Start) -> None:
        """The extension-apiserver-authentication ConfigMap, then the controller that keeps
        it current as the CA files change."""
        config = self.config
        controller = AuthenticationInfoController(
            config.kube.core.store("configmaps"), config.options, config.security.client_ca,
            config.security.requestheader_ca)
        await retrying(controller.sync, "publishing the authentication ConfigMap")
        await start(controller.run())

    async def _start_controllers(self, start: Start) -> None:
        config = self.config
        core, kube = config.kube.core, config.kube
        controllers = [
            NamespaceController(
                core.namespaces,
                lambda: core.namespaced + config.apiextensions.namespaced_stores(),
                remote=config.aggregator.remote_namespaced.discover).run(),  # remote objects too
            EventReaper(core.store("events"), config.options.event_ttl).run(),
            kube.rbac_policy.run(),
            kube.role_aggregation.run(),
            ServiceAccountsController(core.namespaces, core.store("serviceaccounts")).run(),
            PolicyStatusController(  # kube-controller-manager's, for status.typeChecking
                core.store(VALIDATING_ADMISSION_POLICIES.plural,
                           VALIDATING_ADMISSION_POLICIES.group),
                TypeChecker(config.policies.resources)).run(),
        ]
        if self.root_ca is not None:
            controllers.append(RootCACertPublisher(
                core.namespaces, core.store("configmaps"), self.root_ca).run())
        else:
            log.warning("not publishing kube-root-ca.crt: no --root-ca-file, and the serving "
                        "certificate is not the development PKI's, so its CA is not known")
        for controller in controllers:
            await start(controller)
