"""The apiextensions server, assembled (kube's apiextensions-apiserver Config -> Complete ->
New): CustomResourceDefinitions and the custom resources they define, the last server of the
chain before the end (notfound).

It registers its own post-start hooks: the CRD controller's loop, and serving the CRDs there
are before the servers say they are ready (kube's crd-informer-synced, also a signal that
routes are still being installed). Every custom resource's store is built, while serving, from
the generic config's store options, so it is admitted as every other store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.apiextensions.controller import CRDController
from gateway.apiextensions.conversion import Converter, converter_for
from gateway.apiextensions.crds import CUSTOM_RESOURCE_DEFINITIONS
from gateway.endpoints.handlers import ResourceEndpoints, SubresourceFactory
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.server.config import CompletedConfig as GenericConfig
from gateway.server.genericapiserver import GenericAPIServer, Handler, not_found_handler
from gateway.server.lifecycle import Start
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ServiceResolver

CONTROLLERS_HOOK = "poststarthook/start-apiextensions-controllers"
CRD_SYNCED_HOOK = "poststarthook/crd-informer-synced"


@dataclass
class Config:
    generic: GenericConfig
    #: How conversion webhooks are called: the one outgoing client and the resolver.
    clients: ClientManager
    resolver: ServiceResolver

    def complete(self) -> CompletedConfig:
        return CompletedConfig(self)


class CompletedConfig:
    def __init__(self, config: Config) -> None:
        self.generic = config.generic
        self.clients = config.clients
        self.resolver = config.resolver

    def new(self, delegate: Handler = not_found_handler) -> APIExtensionsServer:
        return APIExtensionsServer(self, delegate)


class APIExtensionsServer:
    """apiextensions.k8s.io and the custom resources, over the CRD controller."""

    def __init__(self, config: CompletedConfig, delegate: Handler) -> None:
        generic = config.generic
        self.server: GenericAPIServer = generic.new("apiextensions-apiserver", delegate)
        # a write returns once the controller can see it
        self.crds: RESTStore = generic.store_options.new_store(CUSTOM_RESOURCE_DEFINITIONS,
                                                               read_your_writes=True)
        self.server.install_api(CUSTOM_RESOURCE_DEFINITIONS, generic.endpoints(self.crds))

        def endpoints(store: RESTStore, subresources: Mapping[str, SubresourceFactory]
                      ) -> ResourceEndpoints:
            return generic.endpoints(store, subresources)

        def converter(crd: dict) -> Converter:
            return converter_for(crd, config.clients, config.resolver)

        def builtin_names(group: str) -> list[ResourceDef]:
            """What the other servers serve in ``group``: a CRD may not take its names."""
            return [r for r in generic.api_resources() if r.group == group
                    and r.plural != CUSTOM_RESOURCE_DEFINITIONS.plural]

        self.controller = CRDController(
            self.crds, generic.store_options, install=self.server.install_api,
            uninstall=self.server.uninstall_api, endpoints=endpoints, converters=converter,
            builtin_names=builtin_names)
        lifecycle = generic.lifecycle
        lifecycle.add_post_start_hook(CONTROLLERS_HOOK, self._start_controller)
        lifecycle.add_post_start_hook(CRD_SYNCED_HOOK, lambda _: self.controller.sync_existing())
        hooks = lifecycle.hooks
        lifecycle.add_routes_complete_signal("CRDInformerSyncedSignal",
                                             lambda: hooks[CRD_SYNCED_HOOK].healthy)

    async def _start_controller(self, start: Start) -> None:
        await start(self.controller.run())

    def namespaced_stores(self) -> list[RESTStore]:
        """A store per namespaced custom resource, for the namespace controller."""
        return self.controller.namespaced_stores()
