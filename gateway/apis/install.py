"""Install the built-in groups into the kube core server."""

from __future__ import annotations

from gateway.apis.core.configmaps import CONFIGMAPS
from gateway.apis.core.namespaces import NAMESPACES, namespace_lifecycle
from gateway.endpoints.handlers import ResourceEndpoints
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.server.genericapiserver import GenericAPIServer
from gateway.storage.factory import StorageFactory

NAMESPACED_BUILTINS: tuple[ResourceDef, ...] = (CONFIGMAPS,)


def install_kube_core(server: GenericAPIServer, factory: StorageFactory) -> RESTStore:
    """Serve the built-in resources; returns the namespaces store (bootstrap needs it)."""
    namespaces = RESTStore(NAMESPACES, factory.cacher(NAMESPACES.storage_prefix))
    _install(server, namespaces)
    for resource in NAMESPACED_BUILTINS:
        check = namespace_lifecycle(namespaces, resource.plural, resource.group)
        store = RESTStore(resource, factory.cacher(resource.storage_prefix), check)
        _install(server, store)
    return namespaces


def _install(server: GenericAPIServer, store: RESTStore) -> None:
    resource = store.resource
    server.install_resource(resource.group, resource.version, resource.plural,
                            ResourceEndpoints(store))
