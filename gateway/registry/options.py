"""What every REST store is built with: kube's RESTOptionsGetter and admission chain in one.

A store is configured when it is built, never afterwards: the built-in stores, the CRD store,
the APIService store and every custom resource's store (built while serving, when a CRD is
established) all come from ``StoreOptions.new_store`` and so all get the same admission.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.registry.admission import Admitter
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.registry.versions import VersionLayer
from gateway.storage.factory import StorageFactory


@dataclass
class StoreOptions:
    """The watch caches over the shared store, and the admission every write goes through."""

    factory: StorageFactory
    #: The admission chain (mutating webhooks; ValidatingAdmissionPolicies and validating
    #: webhooks), called on every write of every store.
    admission: Admitter | None = None

    def new_store(self, resource: ResourceDef, version: VersionLayer | None = None, *,
                  store_type: type[RESTStore] = RESTStore) -> RESTStore:
        """The REST store of ``resource`` (served at ``version``), with its admission."""
        return store_type(resource, self.factory.cacher(resource.storage_prefix), version,
                          admitter=self.admission)
