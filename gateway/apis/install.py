"""The built-in groups: a store and REST endpoints for each built-in resource, for the kube
core server to serve."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.apis.admissionregistration.policies import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from gateway.apis.admissionregistration.webhooks import MUTATING, VALIDATING
from gateway.apis.coordination.leases import LEASES
from gateway.apis.core.configmaps import CONFIGMAPS
from gateway.apis.core.endpoints import ENDPOINTS
from gateway.apis.core.events import EVENTS
from gateway.apis.core.namespaces import NAMESPACES, NamespaceVersion
from gateway.apis.core.secrets import SECRETS
from gateway.apis.core.serviceaccounts import SERVICEACCOUNTS
from gateway.apis.core.serviceips import ServiceIPs, ServiceStore
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
from gateway.endpoints.handlers import ResourceEndpoints, SubresourceFactory
from gateway.registry.options import StoreOptions
from gateway.registry.resource import ResourceDef
from gateway.registry.store import Admission, RESTStore
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


def resource_name(resource: ResourceDef) -> str:
    """How the kube core names a built-in resource's store: ``<plural>`` for the core group,
    ``<plural>.<group>`` for the others."""
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def build_kube_core(options: StoreOptions, *, min_request_timeout: int = 1800,
                    stopping: asyncio.Event | None = None,
                    admission: Mapping[str, Sequence[Admission]] | None = None,
                    subresources: Mapping[str, Mapping[str, SubresourceFactory]] | None = None,
                    read_your_writes: Collection[str] = (),
                    service_ips: ServiceIPs | None = None) -> KubeCore:
    """A store and endpoints for every built-in resource (served in BUILTINS order), each
    store complete when built: the options' admission (the chain, NamespaceLifecycle), and
    by resource name (``resource_name``) the checks of every write
    (``admission``), subresources with handlers of their own, the caches the gateway decides
    from (``read_your_writes``); Services allocate cluster IPs from ``service_ips``."""
    admission = admission or {}
    subresources = subresources or {}

    def new_store(resource: ResourceDef, **extra: Any) -> RESTStore:
        name = resource_name(resource)
        return options.new_store(resource, admission=admission.get(name, ()),
                                 read_your_writes=name in read_your_writes, **extra)

    stores = {resource_name(r): r for r in BUILTINS}
    built: dict[str, RESTStore] = {}
    built["namespaces"] = new_store(NAMESPACES, version=NamespaceVersion(NAMESPACES))
    built["endpoints"] = new_store(ENDPOINTS)  # the Services store releases through it
    built["services"] = new_store(SERVICES, store_type=ServiceStore, ips=service_ips,
                                  endpoints=built["endpoints"] if service_ips else None)
    core = KubeCore(built["namespaces"])
    for name, resource in stores.items():  # in discovery order
        store = built.get(name) or new_store(resource)
        core.stores[name] = store
        core.endpoints[name] = ResourceEndpoints(store, min_request_timeout=min_request_timeout,
                                                 stopping=stopping,
                                                 subresources=subresources.get(name))
    return core
