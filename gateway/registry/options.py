"""What every REST store is built with: kube's RESTOptionsGetter and admission chain in one.

A store is configured when it is built, never afterwards: the built-in stores, the CRD store,
the APIService store and every custom resource's store (built while serving, when a CRD is
established) all come from ``StoreOptions.new_store`` and so all get the same admission; what
is particular to one resource (RBAC's escalation check, the caches the gateway decides from)
is given as the store is built, too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.registry.admission import Admitter
from gateway.registry.resource import ResourceDef
from gateway.registry.store import Admission, RESTStore
from gateway.registry.versions import VersionLayer
from gateway.storage.factory import StorageFactory


@dataclass
class StoreOptions:
    """The watch caches over the shared store, and the admission every write goes through."""

    factory: StorageFactory
    #: The admission chain (mutating webhooks; ValidatingAdmissionPolicies and validating
    #: webhooks), called on every write of every store.
    admission: Admitter | None = None
    #: The checks of a create every store gets for its resource, before its own (kube's
    #: NamespaceLifecycle plugin, for namespaced resources).
    create_admission: Callable[[ResourceDef], Sequence[Admission]] | None = None

    def new_store(self, resource: ResourceDef, version: VersionLayer | None = None, *,
                  store_type: type[RESTStore] = RESTStore,
                  create_admission: Sequence[Admission] = (),
                  admission: Sequence[Admission] = (),
                  read_your_writes: bool = False, **extra: Any) -> RESTStore:
        """The REST store of ``resource`` (served at ``version``), with the admission chain
        and, before it, the checks particular to the resource (``create_admission``: on the
        object as sent, as kube's NamespaceLifecycle; ``admission``: on every write, as
        RBAC's escalation check). ``read_your_writes``: the gateway decides from this
        resource's cache (StorageFactory.cacher). ``extra`` goes to ``store_type``."""
        cacher = self.factory.cacher(resource.storage_prefix, read_your_writes=read_your_writes)
        common = self.create_admission(resource) if self.create_admission is not None else ()
        return store_type(resource, cacher, version, admitter=self.admission,
                          create_admission=[*common, *create_admission], admission=admission,
                          **extra)
