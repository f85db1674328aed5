"""The remote availability controller (kube-aggregator's status/remote controller): keeps the
``Available`` condition of every APIService that names a Service.

Each such APIService is checked when it changes, when its Service or that Service's Endpoints
change, and every 30 s. The checks run in kube's order and the first that fails decides:

1. the Service exists (``ServiceNotFound``);
2. for a ClusterIP Service only: it has a port equal to ``spec.service.port``
   (``ServicePortError``), its Endpoints exist (``EndpointsNotFound``) and have a subset with
   addresses and a port of that port's name (``MissingEndpoints``);
3. discovery answers: ``GET /apis/<group>/<version>`` (``/api/<version>`` for ``v1.``) to the
   resolved address, five attempts at once, each within 5 s, as ``system:kube-aggregator`` in
   ``system:masters`` and with the proxy client certificate, *without* verifying the
   backend's certificate (kube does not use the caBundle here); any 2xx answer passes, otherwise
   the last error is the message (``FailedDiscoveryCheck``), and the APIService is checked again
   with growing back-off;
4. otherwise ``True``, ``Passed``, ``all checks passed``.

The status is written (through the ``status`` subresource) only when it changes, and the
condition's lastTransitionTime moves only when its status does. Local APIServices are left
alone: they are available from their creation on.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp
import structlog

from gateway.aggregator.apiservices import AVAILABLE, set_condition
from gateway.aggregator.metrics import AggregatorMetrics
from gateway.aggregator.proxy import describe_error
from gateway.aggregator.routes import DEFAULT_SERVICE_PORT
from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.gowords import go_quote
from gateway.controllers.workqueue import WorkQueue
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import KeyNotFoundError, StorageError
from gateway.storage.interface import EventType, Object
from gateway.transport import clients
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ResolveError, ServiceAddress, ServiceResolver

log = structlog.get_logger(__name__)
WHO = "availability controller"

MANAGER = "kube-apiserver"
RESYNC_PERIOD = 30.0
WORKERS = 5
DISCOVERY_ATTEMPTS = 5
DISCOVERY_TIMEOUT = 5.0
#: Each attempt is also given up after this long (kube's guard around its client).
ATTEMPT_DEADLINE = 6.0
AGGREGATOR_USER = "system:kube-aggregator"
AGGREGATOR_GROUP = "system:masters"
#: Rate-limited re-checks: 5 ms doubling up to 30 s per APIService (kube's item limiter).
BACKOFF_MAX = 30.0


class Unavailable(Exception):
    """A check failed: the condition to write."""

    def __init__(self, status_value: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status_value
        self.reason = reason
        self.message = message


def _service_ref(obj: Object) -> tuple[str, str, int] | None:
    service = (obj.get("spec") or {}).get("service")
    if not service:
        return None
    return (service.get("namespace", ""), service.get("name", ""),
            int(service.get("port") or DEFAULT_SERVICE_PORT))


class AvailabilityController:
    """Keeps the Available condition of remote APIServices (see the module's doc)."""

    def __init__(self, apiservices: RESTStore, services: RESTStore, endpoints: RESTStore,
                 clients: ClientManager, resolver: ServiceResolver | None,
                 metrics: AggregatorMetrics | None = None, *,
                 resync_period: float = RESYNC_PERIOD, workers: int = WORKERS) -> None:
        self.apiservices = apiservices
        self.services = services
        self.endpoints = endpoints
        self.clients = clients
        self.resolver = resolver
        self.metrics = metrics if metrics is not None else AggregatorMetrics()
        self.resync_period = resync_period
        self.workers = workers
        self.queue = WorkQueue(backoff_max=BACKOFF_MAX)
        #: Discovery attempts still running after their check was decided (each ends within
        #: ATTEMPT_DEADLINE): left to finish, as kube leaves its goroutines, since cutting a
        #: TLS handshake short makes uvloop log a fatal SSL error with a traceback.
        self._lingering: set[asyncio.Future[str | None]] = set()

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the three caches and check what they say changed, forever."""
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self._worker()) for _ in range(self.workers)]
        tasks += [
            loop.create_task(follow(self.apiservices, self._on_apiservice, initial=True,
                                    who=WHO)),
            loop.create_task(follow(self.services, self._on_service, who=WHO)),
            loop.create_task(follow(self.endpoints, self._on_service, who=WHO)),
            loop.create_task(self._resync()),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for attempt in list(self._lingering):
                attempt.cancel()
            self.queue.close()

    async def _on_apiservice(self, event: Any) -> None:
        obj = event.object or {}
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if event.type == EventType.DELETED:
            self.metrics.forget(name)
            self.queue.forget(name)
            return
        if _service_ref(obj) is not None:
            self.queue.add(name)

    async def _on_service(self, event: Any) -> None:
        """A Service or Endpoints changed: check the APIServices that name it."""
        meta = (event.object or {}).get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        for obj in self.apiservices.cacher.objects():
            ref = _service_ref(obj)
            if ref is not None and ref[:2] == key:
                self.queue.add(obj["metadata"]["name"])

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.resync_period)
            if not self.apiservices.cacher.ready:
                continue
            for obj in self.apiservices.cacher.objects():
                if _service_ref(obj) is not None:
                    self.queue.add(obj["metadata"]["name"])

    async def _worker(self) -> None:
        while True:
            name = await self.queue.get()
            try:
                if await self.sync(name):
                    self.queue.forget(name)
                else:
                    self.queue.add_rate_limited(name)
            except (StorageError, status.StatusError) as err:
                log.warning("APIService availability not recorded", apiservice=name,
                            error=str(err))
                self.queue.add_rate_limited(name)
            except Exception:
                log.exception("APIService availability check failed", apiservice=name)
                self.queue.add_rate_limited(name)
            finally:
                self.queue.done(name)

    # -- one APIService -----------------------------------------------------------------------

    async def sync(self, name: str) -> bool:
        """Check one APIService and record the result; False when it is to be checked again
        soon (the discovery check failed)."""
        try:
            obj = await self.apiservices.cacher.get_cached(self.apiservices.resource.key("",
                                                                                         name))
        except KeyNotFoundError:
            return True
        if _service_ref(obj) is None:
            return True
        try:
            await self.check(obj)
            condition = {"type": AVAILABLE, "status": "True", "reason": "Passed",
                         "message": "all checks passed"}
        except Unavailable as err:
            condition = {"type": AVAILABLE, "status": err.status, "reason": err.reason,
                         "message": err.message}
        self.metrics.set_unavailable(name, condition["status"] != "True")
        await self._record(obj, condition)
        return condition["reason"] != "FailedDiscoveryCheck"

    async def _record(self, obj: Object, condition: dict[str, Any]) -> None:
        """Write the condition unless the status would not change."""
        name = obj["metadata"]["name"]
        if _with_condition(obj, condition).get("status") == obj.get("status"):
            return

        def update(current: Object | None) -> Object:
            assert current is not None
            return _with_condition(current, condition)

        try:
            await self.apiservices.patch("", name, update,
                                         WriteOptions(manager=MANAGER, subresource="status"))
        except status.StatusError as err:
            if err.code == 404:
                return  # deleted meanwhile
            raise
        log.info("changing APIService availability", apiservice=name,
                 status=condition["status"], reason=condition["reason"],
                 message=condition["message"])

    async def check(self, obj: Object) -> None:
        """Raise Unavailable with the first check that fails (kube's order)."""
        ref = _service_ref(obj)
        assert ref is not None
        namespace, name, port = ref
        where = f"service/{name} in {go_quote(namespace)}"
        service = await self._get(self.services, namespace, name, where)
        if service is None:
            raise Unavailable("False", "ServiceNotFound", f"{where} is not present")
        spec = service.get("spec") or {}
        if (spec.get("type") or "ClusterIP") == "ClusterIP":
            port_name = next((p.get("name", "") for p in spec.get("ports") or []
                              if p.get("port") == port), None)
            if port_name is None:
                raise Unavailable("False", "ServicePortError",
                                  f"{where} is not listening on port {port}")
            endpoints = await self._get(self.endpoints, namespace, name, where)
            if endpoints is None:
                raise Unavailable("False", "EndpointsNotFound",
                                  f"cannot find endpoints for {where}")
            if not any(subset.get("addresses") and any(
                    p.get("name", "") == port_name for p in subset.get("ports") or [])
                    for subset in endpoints.get("subsets") or []):
                raise Unavailable("False", "MissingEndpoints",
                                  f"endpoints for {where} have no addresses with port name "
                                  f"{go_quote(port_name)}")
        if self.resolver is not None:
            await self._discovery_check(obj, namespace, name, port)

    async def _get(self, store: RESTStore, namespace: str, name: str,
                   where: str) -> Object | None:
        try:
            return await store.cacher.get_cached(store.resource.key(namespace, name))
        except KeyNotFoundError:
            return None
        except StorageError as err:
            reason = "ServiceAccessError" if store is self.services else "EndpointsAccessError"
            raise Unavailable("Unknown", reason,
                              f"{where} cannot be checked due to: {err}") from None

    async def _discovery_check(self, obj: Object, namespace: str, name: str, port: int) -> None:
        spec = obj.get("spec") or {}
        version = spec.get("version", "")
        path = f"/api/{version}" if obj["metadata"]["name"] == "v1." else \
            f"/apis/{spec.get('group', '')}/{version}"
        attempts = [asyncio.ensure_future(self._attempt(namespace, name, port, path))
                    for _ in range(DISCOVERY_ATTEMPTS)]
        last: str | None = None
        try:
            for next_done in asyncio.as_completed(attempts):
                error = await next_done
                if error is None:
                    return
                last = error
        finally:
            for attempt in attempts:
                if not attempt.done():
                    self._lingering.add(attempt)
                    attempt.add_done_callback(self._settled)
        raise Unavailable("False", "FailedDiscoveryCheck", last or "discovery check failed")

    def _settled(self, attempt: asyncio.Future[str | None]) -> None:
        self._lingering.discard(attempt)
        if not attempt.cancelled():
            attempt.exception()  # retrieved: an attempt's failure is no unhandled error

    async def _attempt(self, namespace: str, name: str, port: int, path: str) -> str | None:
        """One discovery request: None when it passed, else why not (in kube's words)."""
        assert self.resolver is not None
        try:
            address = await self.resolver.resolve(namespace, name, port)
        except ResolveError as err:
            return str(err)
        host = f"[{address.host}]" if ":" in address.host else address.host
        url = f"https://{host}:{address.port}{path}"
        try:
            async with asyncio.timeout(ATTEMPT_DEADLINE):
                code = await self._get_status(url, address)
        except TimeoutError:
            return f"timed out waiting for {url}"
        except _AttemptError as err:
            return f"failing or missing response from {url}: {err}"
        if 200 <= code < 300:
            return None
        return f"bad status from {url}: {code}"

    async def _get_status(self, url: str, address: ServiceAddress) -> int:
        context = self.clients.context(b"", insecure=True, client_cert=True)
        try:
            async with self.clients.session().get(
                    url, ssl=context, server_hostname=address.server_name,
                    headers={"X-Remote-User": AGGREGATOR_USER,
                             "X-Remote-Group": AGGREGATOR_GROUP},
                    timeout=clients.timeout(DISCOVERY_TIMEOUT),
                    allow_redirects=False) as response:
                return response.status
        except TimeoutError:
            raise _AttemptError(f'Get "{url}": context deadline exceeded (Client.Timeout '
                                "exceeded while awaiting headers)") from None
        except (aiohttp.ClientError, OSError, ValueError) as err:
            raise _AttemptError(f'Get "{url}": {describe_error(err, address)}') from None


class _AttemptError(Exception):
    pass


def _with_condition(obj: Object, condition: dict[str, Any]) -> Object:
    """A copy of ``obj`` with ``condition`` set (kube's SetAPIServiceCondition)."""
    new = copy.deepcopy(obj)
    set_condition(new, {**condition, "lastTransitionTime": now_rfc3339()})
    return new
