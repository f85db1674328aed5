"""The built-in groups: a store and REST endpoints for each built-in resource, for the kube
core server to serve."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from gateway.apis.admissionregistration.policies import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from gateway.apis.admissionregistration.webhooks import MUTATING, VALIDATING
from gateway.apis.coordination.leases import LEASES
from gateway.apis.core.configmaps import CONFIGMAPS
from gateway.apis.core.endpoints import ENDPOINTS
from gateway.apis.core.events import EVENTS
from gateway.apis.core.namespaces import NAMESPACES, NamespaceVersion, namespace_lifecycle
from gateway.apis.core.secrets import SECRETS
from gateway.apis.core.serviceaccounts import SERVICEACCOUNTS
from gateway.apis.core.serviceips import ServiceStore
from gateway.apis.core.services import SERVICES
from gateway.apis.discovery.endpointslices import ENDPOINTSLICES
from gateway.apis.flowcontrol.resources import FLOW_SCHEMAS, PRIORITY_LEVEL_CONFIGURATIONS

# the schemas must be defined before any document is rendered
from gateway.apis.rbac.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
)
from gateway.endpoints.handlers import ResourceEndpoints
from gateway.registry.options import StoreOptions
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.schema import admissionregistration as _adm  # noqa: F401
from gateway.schema import authentication as _authentication  # noqa: F401
from gateway.schema import authorization as _authorization  # noqa: F401
from gateway.schema import coordination as _coordination  # noqa: F401
from gateway.schema import core as _core  # noqa: F401
from gateway.schema import discovery as _discovery  # noqa: F401
from gateway.schema import flowcontrol as _flowcontrol  # noqa: F401
from gateway.schema import rbac as _rbac  # noqa: F401

#: In discovery order: the core group first, then the named groups.
BUILTINS: tuple[ResourceDef, ...] = (
    NAMESPACES, CONFIGMAPS, SECRETS, SERVICEACCOUNTS, SERVICES, ENDPOINTS, EVENTS,
    CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES,
    VALIDATING, MUTATING, VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS,
    LEASES, ENDPOINTSLICES, FLOW_SCHEMAS, PRIORITY_LEVEL_CONFIGURATIONS,
)


@dataclass
class KubeCore:
    """The stores of the built-in resources, for the controllers that need them."""

    namespaces: RESTStore
    stores: dict[str, RESTStore] = field(default_factory=dict)
    endpoints: dict[str, ResourceEndpoints] = field(default_factory=dict)

    @property
    def namespaced(self) -> list[RESTStore]:
        return [s for s in self.stores.values() if s.resource.namespaced]

    def store(self, plural: str, group: str = "") -> RESTStore:
        return self.stores[f"{plural}.{group}" if group else plural]

    def served(self) -> list[tuple[ResourceDef, ResourceEndpoints]]:
        """Every built-in resource and its endpoints, in discovery order."""
        return [(store.resource, self.endpoints[name]) for name, store in self.stores.items()]


def build_kube_core(options: StoreOptions, *, min_request_timeout: int = 1800,
                    stopping: asyncio.Event | None = None) -> KubeCore:
    """A store and endpoints for every built-in resource (served in BUILTINS order)."""
    namespaces = options.new_store(NAMESPACES, NamespaceVersion(NAMESPACES))
    core = KubeCore(namespaces)
    for resource in BUILTINS:
        if resource is NAMESPACES:
            store = namespaces
        else:
            store = options.new_store(
                resource, store_type=ServiceStore if resource is SERVICES else RESTStore)
            if resource.namespaced:
                # before naming and validation, as kube's NamespaceLifecycle admission
                store.create_admission.append(
                    namespace_lifecycle(namespaces, resource.plural, resource.group))
        name = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        core.stores[name] = store
        core.endpoints[name] = ResourceEndpoints(store, min_request_timeout=min_request_timeout,
                                                 stopping=stopping)
    return core
