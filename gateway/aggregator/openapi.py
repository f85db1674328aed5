"""OpenAPI of the whole aggregated API (kube-aggregator's OpenAPI v2 and v3 controllers).

In the background, for every APIService that names a Service and is available, the backend's
``/openapi/v2`` and ``/openapi/v3`` index are downloaded (``OpenAPIDownloads``):

- straight to the resolved Service address with the APIService's TLS settings and the proxy
  client certificate, as user ``system:aggregator`` with no groups, ``Accept:
  application/json``, within 60 s;
- v2 with ``If-None-Match`` carrying the ETag the backend gave last time: 304 keeps the copy
  held, 404 means the backend publishes none, 200 replaces it; for v3 a 200 gives the backend's
  index entries (``apis/<g>/<v>`` → ``serverRelativeURL``), 404 none;
- again every minute after a success, after one minute doubling up to an hour after a failure
  (the copy held is kept meanwhile), and at once whenever the APIService changes; a deleted
  APIService's documents are dropped.

What is served (``AggregatedOpenAPI``) never waits for a backend:

- ``/openapi/v2``: the gateway's own document with every backend's merged in (APIServices by
  name): a path already present keeps its first operations; a definition of the same name and
  the same content is shared, one of the same name and different content keeps the earlier
  one (the gateway's own first) and is logged once per merge. JSON or protobuf, ETag and 304
  as ``gateway.server.openapi.V2Spec`` serves them. Rebuilt only when a document changed.
- ``/openapi/v3``: the gateway's own entries and those of every available backend (an entry
  the gateway serves itself stays its own).
- ``/openapi/v3/<g>/<v>`` of a backend's entry: proxied to that backend as the caller (kube's
  proxy handler), so its hash check, ETag and caching headers are the backend's own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from multidict import CIMultiDict

from gateway.aggregator.proxy import Proxy, describe_error
from gateway.aggregator.registration import APIServiceRegistration
from gateway.aggregator.routes import Route
from gateway.aggregator.server import service_unavailable
from gateway.server.openapi import OpenAPI, V2Spec
from gateway.storage.codec import dumps, loads
from gateway.transport import clients
from gateway.transport.clients import ClientManager, TLSConfigError
from gateway.transport.resolver import ResolveError, ServiceResolver

log = structlog.get_logger(__name__)

#: Who the aggregator is when it downloads a backend's documents (no groups).
AGGREGATOR_USER = "system:aggregator"
#: A download gives up after this long.
DOWNLOAD_TIMEOUT = 60.0
#: A backend's documents are downloaded again this long after a success...
REFRESH_PERIOD = 60.0
#: ... and after a failure this long, doubling each time up to FAILURE_DELAY_MAX.
FAILURE_DELAY = 60.0
FAILURE_DELAY_MAX = 3600.0
WORKERS = 4


class DownloadError(Exception):
    pass


@dataclass
class BackendSpecs:
    """What was last downloaded from one APIService's backend."""

    v2: dict[str, Any] | None = None
    v2_etag: str | None = None
    v2_digest: bytes = b""
    v3_paths: dict[str, Any] = field(default_factory=dict)


# -- merging ----------------------------------------------------------------------------------


def merge_v2(local: dict[str, Any], remotes: list[tuple[str, dict[str, Any]]]
             ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``local`` with the paths and definitions of each (APIService name, document) of
    ``remotes`` added in order; returns the merged document and the (APIService, definition)
    pairs left out because an earlier document defines that name differently."""
    paths = dict(local.get("paths") or {})
    definitions = dict(local.get("definitions") or {})
    conflicts = []
    for name, remote in remotes:
        for path, item in (remote.get("paths") or {}).items():
            paths.setdefault(path, item)
        for definition, schema in (remote.get("definitions") or {}).items():
            held = definitions.setdefault(definition, schema)
            if held is not schema and held != schema:
                conflicts.append((name, definition))
    return {**local, "paths": paths, "definitions": definitions}, conflicts


# -- downloading ------------------------------------------------------------------------------


class OpenAPIDownloads:
    """Keeps a copy of every available remote APIService's OpenAPI documents (by name)."""

    def __init__(self, registration: APIServiceRegistration, clients_: ClientManager,
                 resolver: ServiceResolver) -> None:
        self.registration = registration
        self.clients = clients_
        self.resolver = resolver
        self.specs: dict[str, BackendSpecs] = {}
        self._listeners: list[Callable[[], None]] = []
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._failures: dict[str, int] = {}
        registration.observe(self._observed)

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever a held document changes, appears or goes."""
        self._listeners.append(callback)

    def _changed(self) -> None:
        for callback in self._listeners:
            callback()

    # -- the work queue -----------------------------------------------------------------------

    def _observed(self, name: str, route: Route | None, _obj: Any) -> None:
        if route is None:
            self._cancel_timer(name)
            self._failures.pop(name, None)
            if self.specs.pop(name, None) is not None:
                self._changed()
            return
        if route.service is not None:
            self.add(name)

    def add(self, name: str) -> None:
        """Download ``name``'s documents soon (once, however often it is added; again after
        the download under way when it is being downloaded)."""
        if name in self._busy:
            self._again.add(name)
        elif name not in self._queued:
            self._queued.add(name)
            self._queue.put_nowait(name)

    def _add_later(self, name: str, delay: float) -> None:
        self._cancel_timer(name)
        self._timers[name] = asyncio.get_running_loop().call_later(delay, self._fire, name)

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        self.add(name)

    def _cancel_timer(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    async def run(self) -> None:
        """Download forever: every remote APIService routed now, then each change."""
        for name, route in self.registration.by_name().items():
            if route.service is not None:
                self.add(name)
        workers = [asyncio.ensure_future(self._worker()) for _ in range(WORKERS)]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            for timer in self._timers.values():
                timer.cancel()

    async def _worker(self) -> None:
        while True:
            name = await self._queue.get()
            self._queued.discard(name)
            self._busy.add(name)
            try:
                await self.sync(name)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug for one backend must not stop the others
                log.exception("OpenAPI download failed", apiservice=name)
                self._add_later(name, FAILURE_DELAY)
            finally:
                self._busy.discard(name)
                if name in self._again:
                    self._again.discard(name)
                    self.add(name)

    # -- one APIService -----------------------------------------------------------------------

    async def sync(self, name: str) -> None:
        """Download ``name``'s documents now, if it is remote and available; schedule the next
        download."""
        route = self.registration.by_name().get(name)
        if route is None or route.service is None:
            self._cancel_timer(name)
            if self.specs.pop(name, None) is not None:
                self._changed()
            return
        if not route.available:
            # the proxy would refuse it too; the copy held stays until it is available again
            self._cancel_timer(name)
            return
        held = self.specs.get(name) or BackendSpecs()
        try:
            updated = await self._download(route, held)
        except DownloadError as err:
            failures = self._failures[name] = self._failures.get(name, 0) + 1
            delay = min(FAILURE_DELAY * 2 ** (failures - 1), FAILURE_DELAY_MAX)
            # a warning when it starts failing, then one line per retry at info level
            (log.warning if failures == 1 else log.info)(
                "downloading an APIService's OpenAPI failed; retrying", apiservice=name,
                error=str(err), retry_in=delay)
            self._add_later(name, delay)
            return
        self._failures.pop(name, None)
        if self.registration.by_name().get(name) is None:
            return  # deleted while downloading
        self._add_later(name, REFRESH_PERIOD)
        changed = name not in self.specs or (updated.v2_digest, updated.v3_paths) != (
            held.v2_digest, held.v3_paths)
        self.specs[name] = updated
        if changed:
            self._changed()

    async def _download(self, route: Route, held: BackendSpecs) -> BackendSpecs:
        headers = {"Accept": "application/json"}
        if held.v2_etag:
            headers["If-None-Match"] = held.v2_etag
        code, body, answer = await self._get(route, "/openapi/v2", headers)
        updated = BackendSpecs(held.v2, held.v2_etag, held.v2_digest, held.v3_paths)
        if code == 404:
            updated.v2, updated.v2_etag, updated.v2_digest = None, None, b""
        elif code == 200:
            try:
                document = loads(body)
            except ValueError as err:
                raise DownloadError(f"/openapi/v2: not JSON: {err}") from None
            if not isinstance(document, dict):
                raise DownloadError("/openapi/v2: not an OpenAPI document")
            updated.v2, updated.v2_etag, updated.v2_digest = (
                document, answer.get("ETag"), dumps(document))
        elif code != 304:
            raise DownloadError(f"/openapi/v2: unexpected status {code}")
        code, body, _ = await self._get(route, "/openapi/v3", {"Accept": "application/json"})
        if code == 404:
            updated.v3_paths = {}
        elif code == 200:
            try:
                paths = loads(body).get("paths")
            except (ValueError, AttributeError) as err:
                raise DownloadError(f"/openapi/v3: not an index: {err}") from None
            if not isinstance(paths, dict):
                raise DownloadError("/openapi/v3: not an index")
            updated.v3_paths = {key: value for key, value in paths.items()
                                if isinstance(value, dict)}
        else:
            raise DownloadError(f"/openapi/v3: unexpected status {code}, could not get list "
                                "of group versions for APIService")
        return updated

    async def _get(self, route: Route, path: str, headers: dict[str, str]
                   ) -> tuple[int, bytes, CIMultiDict[str]]:
        service = route.service
        assert service is not None
        try:
            address = await self.resolver.resolve(service.namespace, service.name, service.port)
        except ResolveError as err:
            raise DownloadError(str(err)) from None
        host = f"[{address.host}]" if ":" in address.host else address.host
        url = f"https://{host}:{address.port}{path}"
        try:
            context = self.clients.context(route.ca_bundle,
                                           insecure=route.insecure_skip_tls_verify,
                                           client_cert=True)
        except TLSConfigError as err:  # what the proxy answers too (a 500 with these words)
            raise DownloadError(str(err)) from None
        try:
            async with self.clients.session().get(
                    url, headers={**headers, "X-Remote-User": AGGREGATOR_USER}, ssl=context,
                    server_hostname=address.server_name,
                    timeout=clients.timeout(DOWNLOAD_TIMEOUT),
                    allow_redirects=False) as response:
                return response.status, await response.read(), CIMultiDict(response.headers)
        except TimeoutError:
            raise DownloadError(f"{url}: timed out") from None
        except (aiohttp.ClientError, OSError, ValueError) as err:
            raise DownloadError(f"{url}: {describe_error(err, address)}") from None


# -- serving ----------------------------------------------------------------------------------


class AggregatedOpenAPI:
    """/openapi/v2 and /openapi/v3 of the gateway and every backend."""

    def __init__(self, local: OpenAPI, registration: APIServiceRegistration,
                 clients_: ClientManager, resolver: ServiceResolver, proxy: Proxy) -> None:
        self.local = local
        self.registration = registration
        self.proxy = proxy
        self.downloads = OpenAPIDownloads(registration, clients_, resolver)
        self._v2: V2Spec | None = None
        local.on_change(self.invalidate)
        self.downloads.on_change(self.invalidate)

    def invalidate(self) -> None:
        self._v2 = None

    async def run(self) -> None:
        await self.downloads.run()

    def v2_spec(self) -> V2Spec:
        spec = self._v2
        if spec is None:
            own = self.local.v2_spec()
            remotes = [(name, specs.v2) for name, specs in sorted(self.downloads.specs.items())
                       if specs.v2 is not None]
            if not remotes:
                spec = own
            else:
                started = time.monotonic()
                merged, conflicts = merge_v2(own.document, remotes)
                spec = V2Spec(merged)
                if conflicts:
                    log.info("OpenAPI v2 definitions of APIServices differ from ones already "
                             "defined; keeping the earlier ones",
                             conflicts=[f"{name}: {definition}"
                                        for name, definition in conflicts])
                log.debug("merged OpenAPI v2", apiservices=[n for n, _ in remotes],
                          seconds=round(time.monotonic() - started, 3))
            self._v2 = spec
        return spec

    async def v2(self, request: web.BaseRequest) -> web.StreamResponse:
        return self.v2_spec().serve(request)

    # -- v3 -----------------------------------------------------------------------------------

    def _remote_v3(self) -> dict[str, tuple[Route, dict[str, Any]]]:
        """Every group version path a backend lists, with its route (available ones only;
        by APIService name, the first lister wins)."""
        routes = self.registration.by_name()
        out: dict[str, tuple[Route, dict[str, Any]]] = {}
        for name, specs in sorted(self.downloads.specs.items()):
            route = routes.get(name)
            if route is None or route.service is None or not route.available:
                continue
            for gv, entry in specs.v3_paths.items():
                out.setdefault(gv, (route, entry))
        return out

    async def v3_index(self, request: web.BaseRequest) -> web.StreamResponse:
        paths: dict[str, Any] = {gv: entry for gv, (_, entry) in self._remote_v3().items()}
        paths.update(self.local.v3_paths())
        return web.Response(body=dumps({"paths": dict(sorted(paths.items()))}),
                            content_type="application/json")

    async def v3_group_version(self, request: web.BaseRequest) -> web.StreamResponse:
        gv = request.path[len("/openapi/v3/"):].strip("/")
        if not self.local.serves_v3(gv):
            remote = self._remote_v3().get(gv)
            if remote is not None:
                route = self.registration.by_name().get(remote[0].name) or remote[0]
                if not route.available or route.service is None:
                    return service_unavailable()
                response = await self.proxy.serve(request, route)
                # aiohttp's request (a path of the local server): aiohttp's response
                assert isinstance(response, web.StreamResponse)
                return response
        return await self.local.v3_group_version(request)
