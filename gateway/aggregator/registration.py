"""The aggregator's routing table, kept in step with the APIService objects (kube-aggregator's
APIServiceRegistrationController).

``routes`` maps (group, version) to the Route of its APIService. It follows the APIService
watch cache: on every change the Route is built again and replaces the old one whole (a
request holding the old Route finishes with it), on delete it goes. After a lost watch the
table is rebuilt from the cache's current objects. ``synced`` is set once the first full
table is in place, so the gateway can hold readiness until every APIService is routed.

It also orders the APIService groups as kube-aggregator's /apis does (``groups``), and
holds kube's local availability controller (``LocalAvailability``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from gateway.aggregator.apiservices import (
    LOCAL_MESSAGE,
    LOCAL_REASON,
    available_condition,
    local_available,
    set_condition,
)
from gateway.aggregator.routes import Route
from gateway.apimachinery import status
from gateway.apimachinery.versions import version_rank
from gateway.registry.store import RESTStore, WriteOptions
from gateway.server.discovery import RegisteredGroup
from gateway.storage.errors import StorageError
from gateway.storage.interface import EventType, Object

log = structlog.get_logger(__name__)
MANAGER = "kube-apiserver"

#: Called with the name of an APIService, its new Route and the object it was built from
#: (None and None: deleted).
Observer = Callable[[str, "Route | None", "Object | None"], None]


# -- ordering ----------------------------------------------------------------------------------

def sorted_groups(routes: list[Route]) -> list[RegisteredGroup]:
    """kube's SortedByGroupAndVersion: APIServices by groupPriorityMinimum (highest first) and
    name; a group where its first APIService falls; within a group, versions by
    versionPriority (highest first), then in kube's version order. The core group is left
    out (it is discovered at /api)."""
    ordered = sorted(routes, key=lambda r: (-r.group_priority_minimum, r.name))
    grouped: dict[str, list[Route]] = {}
    for route in ordered:
        if route.group:
            grouped.setdefault(route.group, []).append(route)
    groups = []
    for name, members in grouped.items():
        members.sort(key=lambda r: (-r.version_priority, version_rank(r.version)))
        groups.append(RegisteredGroup(
            name, tuple(r.version for r in members),
            frozenset(r.version for r in members if not r.local)))
    return groups


# -- the controller ----------------------------------------------------------------------------


class APIServiceRegistration:
    """Keeps ``routes`` equal to the stored APIServices."""

    def __init__(self, store: RESTStore) -> None:
        self.store = store
        self.routes: dict[tuple[str, str], Route] = {}
        self.synced = asyncio.Event()
        self._observers: list[Observer] = []
        self._changed: list[Callable[[], None]] = []
        self._groups: list[RegisteredGroup] | None = None

    def observe(self, observer: Observer) -> None:
        """Call ``observer`` with each APIService's new Route and object (None when
        deleted)."""
        self._observers.append(observer)

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after any change of the table (discovery caches listen)."""
        self._changed.append(callback)

    def route(self, group: str, version: str) -> Route | None:
        return self.routes.get((group, version))

    def by_name(self) -> dict[str, Route]:
        return {route.name: route for route in self.routes.values()}

    def groups(self) -> list[RegisteredGroup]:
        """The APIService groups in kube's /apis order (recomputed after a change)."""
        if self._groups is None:
            self._groups = sorted_groups(list(self.routes.values()))
        return self._groups

    # -- following the cache ----------------------------------------------------------------

    async def run(self) -> None:
        """Follow the APIService watch cache forever."""
        cacher, prefix = self.store.cacher, self.store.resource.storage_prefix
        delay = 0.5
        while True:
            try:
                await cacher.wait_ready()
                # no await between the snapshot and its revision: the watch resumes exactly
                # after what the snapshot holds
                objects, revision = cacher.objects(prefix), cacher.revision
                self._replace_all(objects)
                self.synced.set()
                watch = await cacher.watch_cached(prefix, revision=revision)
                try:
                    async for event in watch:
                        self._apply(event.type, event.object)
                finally:
                    watch.stop()
                delay = 0.5
            except (StorageError, status.StatusError) as err:
                log.warning("APIService registration lost its watch", error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10)

    def _replace_all(self, objects: list[Object]) -> None:
        routes, sources = {}, {}
        for obj in objects:
            route = _route(obj)
            if route is not None:
                routes[(route.group, route.version)] = route
                sources[route.name] = obj
        gone = {r.name for r in self.routes.values()} - {r.name for r in routes.values()}
        self.routes = routes
        self._changed_table()
        for name in sorted(gone):
            self._notify(name, None, None)
        for route in routes.values():
            self._notify(route.name, route, sources[route.name])

    def _apply(self, kind: EventType, obj: Object | None) -> None:
        if obj is None or kind not in (EventType.ADDED, EventType.MODIFIED, EventType.DELETED):
            return
        route = _route(obj)
        if route is None:
            return
        key = (route.group, route.version)
        if kind == EventType.DELETED:
            if key not in self.routes:
                return
            self.routes = {k: v for k, v in self.routes.items() if k != key}
            self._changed_table()
            self._notify(route.name, None, None)
            return
        self.routes = {**self.routes, key: route}
        self._changed_table()
        self._notify(route.name, route, obj)

    def _changed_table(self) -> None:
        self._groups = None
        for callback in self._changed:
            callback()

    def _notify(self, name: str, route: Route | None, obj: Object | None) -> None:
        for observer in self._observers:
            try:
                observer(name, route, obj)
            except Exception:  # an observer's bug must not stop routing
                log.exception("APIService observer failed", apiservice=name)


def _route(obj: Object) -> Route | None:
    try:
        return Route.from_apiservice(obj)
    except (KeyError, TypeError, ValueError) as err:
        log.warning("APIService cannot be routed", error=str(err),
                    apiservice=(obj.get("metadata") or {}).get("name"))
        return None


# -- local availability ---------------------------------------------------------------------------


class LocalAvailability:
    """kube-aggregator's local availability controller: every local APIService's Available
    condition says True, Local, "Local APIServices are always available" (a status write, or
    a spec turned from remote to local, may have left another one). Remote APIServices are
    the remote availability controller's."""

    def __init__(self, store: RESTStore, registration: APIServiceRegistration) -> None:
        self.store = store
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        registration.observe(self._observed)

    def _observed(self, name: str, route: Route | None, obj: Object | None) -> None:
        if route is None or obj is None or not route.local or name in self._queued:
            return
        if _is_local_available(obj):
            return
        self._queued.add(name)
        self._queue.put_nowait(name)

    async def run(self) -> None:
        while True:
            name = await self._queue.get()
            self._queued.discard(name)
            try:
                await self._mark(name)
            except (StorageError, status.StatusError) as err:
                if isinstance(err, status.StatusError) and err.code == 404:
                    continue
                log.warning("marking a local APIService available failed; retrying",
                            apiservice=name, error=str(err))
                await asyncio.sleep(1)
                if name not in self._queued:
                    self._queued.add(name)
                    self._queue.put_nowait(name)

    async def _mark(self, name: str) -> None:
        def marked(obj: Object | None) -> Object:
            assert obj is not None
            if (obj.get("spec") or {}).get("service") is None:
                set_condition(obj, local_available())
            return obj

        await self.store.patch("", name, marked, WriteOptions(manager=MANAGER,
                                                               subresource="status"))


def _is_local_available(obj: Object) -> bool:
    condition = available_condition(obj)
    return condition is not None and (
        condition.get("status"), condition.get("reason"), condition.get("message")) == (
        "True", LOCAL_REASON, LOCAL_MESSAGE)
