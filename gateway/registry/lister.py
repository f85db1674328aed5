"""Reading one resource's objects from its watch cache, as kube's listers read an informer.

Admission plugins and the service resolver read configuration (webhook configurations,
namespaces, Services, Endpoints) this way. A lister needs only the shared watch cache of the
resource, not its REST store, so it can be made before any store is built: that is what lets
every store be given its admission when it is built.
"""

from __future__ import annotations

from typing import Any

from gateway.registry.resource import ResourceDef
from gateway.storage.factory import StorageFactory
from gateway.storage.watchcache import Cacher

Object = dict[str, Any]


class Lister:
    """The cached objects of one resource."""

    def __init__(self, resource: ResourceDef, cacher: Cacher) -> None:
        self.resource = resource
        self.cacher = cacher

    async def get(self, namespace: str, name: str) -> Object:
        """The cached object (KeyNotFoundError when there is none; StorageError when the
        cache cannot answer)."""
        return await self.cacher.get_cached(self.resource.key(namespace, name))

    def objects(self) -> list[Object]:
        """Every cached object of the resource (empty until the cache has synced)."""
        return self.cacher.objects(self.resource.storage_prefix)


def lister_for(factory: StorageFactory, resource: ResourceDef) -> Lister:
    """A lister of ``resource`` over the watch cache its store shares."""
    return Lister(resource, factory.cacher(resource.storage_prefix))
