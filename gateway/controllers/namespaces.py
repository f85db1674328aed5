"""Empties a terminating namespace, then lets it go (kube's namespace controller).

Deleting a namespace sets its deletionTimestamp and phase Terminating (its spec.finalizers
hold "kubernetes"). This loop deletes every object in it, waits for objects with finalizers of
their own, then removes the "kubernetes" finalizer through the finalize subresource, after which
the store removes the namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.listoptions import ListOptions
from gateway.apis.core.namespaces import FINALIZER
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import EventType

log = structlog.get_logger(__name__)
MANAGER = "namespace-controller"


class NamespaceController:
    def __init__(self, namespaces: RESTStore,
                 contents: Callable[[], Iterable[RESTStore]]) -> None:
        self.namespaces = namespaces
        #: The stores of namespaced resources, asked anew each time (CRDs come and go).
        self.contents = contents
        self._working: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        """Follow namespaces forever; start a clean-up for each one being deleted."""
        delay = 0.5
        while True:
            try:
                watch = await self.namespaces.cacher.watch_cached(
                    self.namespaces.resource.storage_prefix, revision=0, send_initial=True)
                async for event in watch:
                    if event.type in (EventType.ADDED, EventType.MODIFIED) and event.object:
                        self._maybe_clean(event.object)
                delay = 0.5
            except (StorageError, status.StatusError) as err:
                log.warning("namespace controller lost its watch", error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10)

    def _maybe_clean(self, namespace: dict) -> None:
        meta = namespace.get("metadata", {})
        name = meta.get("name", "")
        if not meta.get("deletionTimestamp") or name in self._working:
            return
        if FINALIZER not in ((namespace.get("spec") or {}).get("finalizers") or []):
            return
        task = asyncio.get_running_loop().create_task(self._clean(name))
        self._working[name] = task
        task.add_done_callback(lambda _: self._working.pop(name, None))

    async def _clean(self, name: str) -> None:
        delay = 0.2
        while True:
            try:
                if await self._empty(name):
                    await self._finalize(name)
                    log.info("namespace emptied and finalized", namespace=name)
                    return
            except (StorageError, status.StatusError) as err:
                if getattr(err, "code", 0) == 404:
                    return
                log.warning("namespace clean-up failed; retrying", namespace=name,
                            error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5)

    async def _empty(self, name: str) -> bool:
        """Delete what is left in the namespace; True once nothing is."""
        left = 0
        for store in self.contents():
            await store.delete_collection(name, ListOptions(), DeleteOptions(),
                                          WriteOptions(manager=MANAGER))
            remaining = await store.list(name, ListOptions())
            left += len(remaining.items)
        return left == 0

    async def _finalize(self, name: str) -> None:
        def drop_finalizer(current: dict | None) -> dict:
            if current is None:
                raise status.not_found("namespaces", name)
            spec = current.setdefault("spec", {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
            return current

        await self.namespaces.patch("", name, drop_finalizer,
                                    WriteOptions(manager=MANAGER, subresource="finalize"))

    async def close(self) -> None:
        for task in list(self._working.values()):
            task.cancel()
