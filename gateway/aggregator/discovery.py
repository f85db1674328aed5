"""Aggregated discovery of remote APIServices (kube-aggregator's discovery manager).

For every APIService that names a Service, the manager keeps a document of its group version
in the discovery store (``gateway.server.discovery.DiscoveryStore``, source ``aggregator``,
which wins over the gateway's own servers for the same group version), placed by the
APIService's groupPriorityMinimum and versionPriority. Everything happens in the background:
a request for /apis only ever reads the store.

- An APIService is marked dirty when it is added or changes (``observe``, given to the
  registration controller) and every ``resync_period`` (60 s); workers sync dirty ones.
  Until its first sync, a new group version is listed with no resources, ``Stale``.
- Syncing asks the backend's Service, once for all APIServices that share it (namespace, name,
  port): a fetch that started after an APIService was marked dirty answers for it, whether it
  is still running or done. The fetch is ``GET /apis`` over the proxy's transport (the
  APIService's caBundle, the proxy client certificate, the Service resolved as the proxy
  resolves it) as ``system:kube-aggregator`` in ``system:masters``, asking for the v2 (or
  v2beta1) ``APIGroupDiscoveryList``, with ``If-None-Match`` the ETag of the last document,
  within 5 s:
  - 304: the last document still holds; 200 with an aggregated Content-Type: the new document,
    kept by group version with its ETag;
  - 503, a connection failure, a timeout, a body that does not decode: an error;
  - anything else: the backend has no aggregated discovery, so each APIService falls back to
    its legacy ``GET /apis/<g>/<v>`` (``Accept: application/json``, as
    ``system:kube-aggregator`` without groups), converted to the v2 shape.
- The APIService's group version then gets the resources found (none when the document lacks
  it), ``Current``; after an error, the last resources known for it, ``Stale``.
- A deleted APIService, or one turned local, leaves the store (the gateway's own servers then
  answer for a local one).

Departures from kube: five workers rather than two, so that a few hanging backends (5 s each)
do not hold up the others' refreshes; a failed fetch is shared by the APIServices of its
Service like a successful one; an APIService that is not Available is asked all the same (kube
asks through the proxy handler, which answers 503 until the APIService is Available, except
after an update, when it is forced available).
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog

from gateway.aggregator.availability import AGGREGATOR_GROUP, AGGREGATOR_USER, BACKOFF_MAX
from gateway.aggregator.proxy import describe_error, identity_headers
from gateway.aggregator.registration import APIServiceRegistration
from gateway.aggregator.routes import Route, ServiceRef
from gateway.apimachinery.user import UserInfo
from gateway.controllers.workqueue import WorkQueue
from gateway.server.discovery import (
    AGGREGATED,
    AGGREGATOR_SOURCE,
    CURRENT,
    STALE,
    DiscoveryStore,
    Priorities,
    VersionDocument,
    resources_from_aggregated,
    resources_from_legacy,
)
from gateway.storage.interface import Object
from gateway.transport import clients as transport
from gateway.transport.clients import ClientManager, TLSConfigError
from gateway.transport.resolver import ResolveError, ServiceResolver

log = structlog.get_logger(__name__)

SOURCE = "aggregator"
RESYNC_PERIOD = 60.0
FETCH_TIMEOUT = 5.0
WORKERS = 5
ACCEPT = (f"application/json;g={AGGREGATED};v=v2;as=APIGroupDiscoveryList,"
          f"application/json;g={AGGREGATED};v=v2beta1;as=APIGroupDiscoveryList")
#: Who the discovery requests are from: with groups for /apis, without for a legacy fallback.
_AGGREGATOR = UserInfo(AGGREGATOR_USER, groups=(AGGREGATOR_GROUP,))
_AGGREGATOR_ALONE = UserInfo(AGGREGATOR_USER)


def apiservice_priorities(registration: APIServiceRegistration) -> Priorities:
    """The priorities of a group version as its APIService gives them (local ones included)."""

    def priorities(group: str, version: str) -> tuple[int, int] | None:
        route = registration.route(group, version)
        if route is None:
            return None
        return route.group_priority_minimum, route.version_priority

    return priorities


class FetchError(Exception):
    """Discovery could not be had from a backend; the message says why."""


@dataclass(frozen=True)
class _Fetched:
    """What one fetch of a Service's /apis found."""

    tick: int  # when the fetch started, on the manager's clock of marks and fetches
    etag: str = ""
    #: The last aggregated document by (group, version); None: never had one.
    versions: dict[tuple[str, str], dict[str, Any]] | None = None
    error: str = ""
    #: The backend has no aggregated discovery: ask each group version's legacy document.
    legacy: bool = False


@dataclass
class _APIService:
    route: Route
    dirty: int  # marked dirty at this tick


@dataclass
class _Running:
    tick: int
    task: asyncio.Task[_Fetched]


@dataclass
class DiscoveryManager:
    """Keeps the store's documents of remote APIServices up to date (see the module's doc)."""

    store: DiscoveryStore
    clients: ClientManager
    resolver: ServiceResolver
    resync_period: float = RESYNC_PERIOD
    timeout: float = FETCH_TIMEOUT
    workers: int = WORKERS
    queue: WorkQueue = field(default_factory=lambda: WorkQueue(backoff_max=BACKOFF_MAX))
    _apiservices: dict[str, _APIService] = field(default_factory=dict)
    _fetched: dict[ServiceRef, _Fetched] = field(default_factory=dict)
    _running: dict[ServiceRef, _Running] = field(default_factory=dict)
    _failing: set[str] = field(default_factory=set)  # APIServices whose last sync failed
    _tick: int = 0

    def __post_init__(self) -> None:
        self.store.add_source(SOURCE, AGGREGATOR_SOURCE)

    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    # -- following the APIServices ---------------------------------------------------------

    def observe(self, name: str, route: Route | None, _obj: Object | None = None) -> None:
        """An APIService was added, changed (``route``) or deleted (None)."""
        known = self._apiservices.get(name)
        if route is None or route.local:
            if known is not None:
                del self._apiservices[name]
                self._failing.discard(name)
                self.store.remove(SOURCE, known.route.group, known.route.version)
                self._forget_service(known.route.service)
            return
        if known is not None and known.route.service != route.service:
            self._forget_service(known.route.service, keep=name)
        self._apiservices[name] = _APIService(route, self._next_tick())
        current = self.store.get(SOURCE, route.group, route.version)
        self.store.put(SOURCE, VersionDocument(
            route.group, route.version,
            current.resources if current is not None else (),
            current.freshness if current is not None else STALE,
            route.group_priority_minimum, route.version_priority))
        self.queue.add(name)

    def _forget_service(self, service: ServiceRef | None, keep: str = "") -> None:
        """Drop a Service's cached document once no other APIService names it."""
        if service is None:
            return
        if not any(a.route.service == service for n, a in self._apiservices.items()
                   if n != keep):
            self._fetched.pop(service, None)

    def mark_all_dirty(self) -> None:
        for name, apiservice in self._apiservices.items():
            apiservice.dirty = self._next_tick()
            self.queue.add(name)

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Sync dirty APIServices and mark them all dirty every ``resync_period``, forever."""
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self._worker()) for _ in range(self.workers)]
        tasks.append(loop.create_task(self._resync()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for running in self._running.values():
                running.task.cancel()
            await asyncio.gather(*tasks, *(r.task for r in self._running.values()),
                                 return_exceptions=True)
            self.queue.close()

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.resync_period)
            self.mark_all_dirty()

    async def _worker(self) -> None:
        while True:
            name = await self.queue.get()
            try:
                await self.sync(name)
            except Exception:
                log.exception("aggregated discovery of an APIService failed", apiservice=name)
            finally:
                self.queue.done(name)

    # -- one APIService -----------------------------------------------------------------------

    async def sync(self, name: str) -> None:
        """Fetch (or reuse) the discovery of one APIService's Service and record its group
        version."""
        apiservice = self._apiservices.get(name)
        if apiservice is None:
            return
        route = apiservice.route
        fetched = await self._fetch_shared(apiservice)
        if self._apiservices.get(name) is not apiservice:
            return  # changed or deleted meanwhile: that change syncs again
        key = (route.group, route.version)
        error = fetched.error
        resources: tuple[dict[str, Any], ...] = ()
        if not error and fetched.legacy:
            try:
                resources = await self._legacy(route)
            except FetchError as err:
                error = str(err)
        elif not error and fetched.versions is not None and key in fetched.versions:
            resources = resources_from_aggregated(fetched.versions[key])
        if error:
            current = self.store.get(SOURCE, route.group, route.version)
            resources = current.resources if current is not None else ()
            if name not in self._failing:
                log.warning("aggregated discovery of an APIService failed; its resources are "
                            "stale", apiservice=name, error=error)
            self._failing.add(name)
        elif name in self._failing:
            self._failing.discard(name)
            log.info("aggregated discovery of an APIService is current again", apiservice=name)
        if self._apiservices.get(name) is not apiservice:
            return
        self.store.put(SOURCE, VersionDocument(
            route.group, route.version, resources, STALE if error else CURRENT,
            route.group_priority_minimum, route.version_priority))

    async def _fetch_shared(self, apiservice: _APIService) -> _Fetched:
        """The Service's discovery as fetched after ``apiservice`` was marked dirty: the last
        fetch's, a running one's, or a new one's."""
        service = apiservice.route.service
        assert service is not None
        fetched = self._fetched.get(service)
        if fetched is not None and fetched.tick > apiservice.dirty:
            return fetched
        running = self._running.get(service)
        if running is None or running.tick < apiservice.dirty:
            tick = self._next_tick()
            task = asyncio.get_running_loop().create_task(
                self._fetch(apiservice.route, fetched, tick))
            running = self._running[service] = _Running(tick, task)
            task.add_done_callback(functools.partial(self._finished, service, running))
        return await asyncio.shield(running.task)

    def _finished(self, service: ServiceRef, running: _Running, _task: object) -> None:
        if self._running.get(service) is running:
            del self._running[service]
        if running.task.cancelled() or running.task.exception() is not None:
            return
        result = running.task.result()
        last = self._fetched.get(service)
        in_use = any(a.route.service == service for a in self._apiservices.values())
        if in_use and (last is None or last.tick < result.tick):
            self._fetched[service] = result

    # -- talking to a backend -----------------------------------------------------------------

    async def _fetch(self, route: Route, last: _Fetched | None, tick: int) -> _Fetched:
        """GET /apis of the route's backend (see the module's doc)."""
        headers = {"Accept": ACCEPT}
        if last is not None and last.etag and last.versions is not None:
            headers["If-None-Match"] = last.etag
        # an error keeps what the last fetch had
        etag, versions = ("", None) if last is None else (last.etag, last.versions)
        service = route.service
        assert service is not None
        try:
            code, response_headers, body = await self._get(route, "/apis", headers, _AGGREGATOR)
        except FetchError as err:
            return _Fetched(tick, etag, versions, error=str(err))
        if code == 304 and last is not None and last.versions is not None:
            return _Fetched(tick, last.etag, last.versions)
        if code == 503:
            return _Fetched(tick, etag, versions,
                            error=f"service {service.namespace}/{service.name}:"
                                  f"{service.port} returned non-success response code: 503")
        if code == 200 and _is_aggregated(response_headers.get("Content-Type", "")):
            try:
                found = _by_group_version(json.loads(body))
            except (ValueError, TypeError, AttributeError) as err:
                return _Fetched(tick, etag, versions,
                                error=f"decoding aggregated discovery: {err}")
            return _Fetched(tick, response_headers.get("ETag", ""), found)
        return _Fetched(tick, legacy=True)

    async def _legacy(self, route: Route) -> tuple[dict[str, Any], ...]:
        path = f"/api/{route.version}" if not route.group else \
            f"/apis/{route.group}/{route.version}"
        code, _, body = await self._get(route, path, {"Accept": "application/json"},
                                        _AGGREGATOR_ALONE)
        if code != 200:
            raise FetchError(f"failed to download legacy discovery for {path}: "
                             f"{body.decode(errors='replace')}")
        try:
            return resources_from_legacy(json.loads(body))
        except (ValueError, TypeError, AttributeError) as err:
            raise FetchError(f"decoding legacy discovery for {path}: {err}") from None

    async def _get(self, route: Route, path: str, headers: dict[str, str],
                   user: UserInfo) -> tuple[int, Any, bytes]:
        """One GET through the proxy's transport: (status, headers, body)."""
        service = route.service
        assert service is not None
        try:
            address = await self.resolver.resolve(service.namespace, service.name, service.port)
        except ResolveError as err:
            raise FetchError(f"service unavailable: {err}") from None
        host = f"[{address.host}]" if ":" in address.host else address.host
        url = f"https://{host}:{address.port}{path}"
        try:
            context = self.clients.context(route.ca_bundle,
                                           insecure=route.insecure_skip_tls_verify,
                                           client_cert=True)
        except TLSConfigError as err:  # what the proxy answers too (a 500 with these words)
            raise FetchError(str(err)) from None
        try:
            async with asyncio.timeout(self.timeout):
                async with self.clients.session().get(
                        url, headers=[*headers.items(), *identity_headers(user)], ssl=context,
                        server_hostname=address.server_name,
                        timeout=transport.timeout(self.timeout),
                        allow_redirects=False) as response:
                    return response.status, response.headers, await response.read()
        except TimeoutError:
            raise FetchError(f"GET {url}: request timed out") from None
        except (aiohttp.ClientError, OSError, ValueError) as err:
            raise FetchError(f"GET {url}: error trying to reach service: "
                             f"{describe_error(err, address)}") from None


def _is_aggregated(content_type: str) -> bool:
    """A v2 or v2beta1 APIGroupDiscoveryList (the media type's parameters in any order)."""
    media, *params = (part.strip() for part in content_type.split(";"))
    values = dict(p.partition("=")[::2] for p in params)
    return media == "application/json" and values.get("g") == AGGREGATED and \
        values.get("v") in ("v2", "v2beta1") and values.get("as") == "APIGroupDiscoveryList"


def _by_group_version(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """An APIGroupDiscoveryList's version entries by (group, version)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for item in document.get("items") or []:
        group = (item.get("metadata") or {}).get("name", "")
        for version in item.get("versions") or []:
            if isinstance(version, dict) and version.get("version"):
                out.setdefault((group, version["version"]), version)
    return out

