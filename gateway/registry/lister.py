"""Reading one resource's objects from its watch cache, as kube's listers read an informer.

Admission plugins and the service resolver read configuration (webhook configurations,
namespaces, Services, Endpoints) this way. A lister needs only the shared watch cache of the
resource, not its REST store, so it can be made before any store is built: that is what lets
every store be given its admission when it is built.
"""

from __future__ import annotations

from typing import Any

from gateway.registry.resource import ResourceDef
from gateway.storage.errors import StorageError
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

    async def read(self, namespace: str, name: str) -> Object:
        """The object from the cache, or from the store when the cache cannot answer yet or
        misses it (it may have been written a moment ago), as kube's admission plugins fall
        back to a live read; KeyNotFoundError when there is none."""
        key = self.resource.key(namespace, name)
        if self.cacher.ready:
            try:
                return await self.cacher.get_cached(key)
            except StorageError:
                pass
        return await self.cacher.get(key)

    def objects(self) -> list[Object]:
        """Every cached object of the resource (empty until the cache has synced)."""
        return self.cacher.objects(self.resource.storage_prefix)


def lister_for(factory: StorageFactory, resource: ResourceDef, *,
               read_your_writes: bool = False) -> Lister:
    """A lister of ``resource`` over the watch cache its store shares (``read_your_writes``:
    see StorageFactory.cacher)."""
    return Lister(resource, factory.cacher(resource.storage_prefix,
                                           read_your_writes=read_your_writes))
