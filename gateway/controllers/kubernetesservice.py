"""The `kubernetes` Service in `default` and its endpoints, kept as kube-apiserver's bootstrap
controller and lease endpoint reconciler keep them (pkg/controlplane/controller/
kubernetesservice, pkg/controlplane/reconcilers).

- The Service (ClusterIP, port 443 named https to the gateway's --secure-port, the first
  address of the service range, labels component=apiserver and provider=kubernetes) is
  created when missing and otherwise left as it is, as kube leaves it.
- Every gateway holds a master lease, ``/masterleases/<advertise address>``, renewed every 10
  seconds and good for 15 (kube's etcd TTL; the gateway writes the expiry into the lease and
  readers skip and remove expired ones). The Endpoints `kubernetes` list the leased addresses:
  rewritten when they are missing, not one subset, or list other addresses (their port is set
  when they are made), labelled endpointslice.kubernetes.io/skip-mirror=true; the EndpointSlice
  `kubernetes` mirrors them (labelled kubernetes.io/service-name=kubernetes).
- On stop the gateway drops its lease, so the others stop listing it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Callable
from typing import Any

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.netutil import IPV6, ip_family
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.storage.errors import KeyNotFoundError, StorageError
from gateway.storage.interface import Object, Preconditions, Storage

log = structlog.get_logger(__name__)

NAMESPACE, NAME = "default", "kubernetes"
MANAGER = "kube-apiserver"
SERVICE_PORT = 443
PORT_NAME = "https"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
#: kube's --endpoint-reconciler-type=lease defaults: renew every 10 s, a lease lives 15 s.
ENDPOINT_INTERVAL = 10.0
LEASE_TTL = 15.0
LEASE_PREFIX = "/masterleases/"
#: Where a lease keeps its expiry (etcd's TTL does this for kube).
EXPIRES_ANNOTATION = "gateway/lease-expires-at"
_FIRST_SYNC_ATTEMPTS = 8
#: kube waits 2 intervals for the lease's removal at stop; the gateway does not hold up its
#: shutdown that long for an unreachable store.
_STOP_TIMEOUT = 3.0


class MasterLeases:
    """The addresses of the gateways serving this store, each with a lease it renews."""

    def __init__(self, storage: Storage, ttl: float = LEASE_TTL,
                 clock: Callable[[], float] = time.time) -> None:
        self.storage = storage
        self.ttl = ttl
        self.clock = clock

    async def update(self, ip: str) -> None:
        """Add or renew the lease of ``ip``."""
        expires = f"{self.clock() + self.ttl:.3f}"

        async def renew(current: Object | None) -> Object:
            generation = int(((current or {}).get("metadata") or {}).get("generation") or 0)
            return {"kind": "Endpoints", "apiVersion": "v1",
                    "metadata": {"generation": generation + 1,
                                 "annotations": {EXPIRES_ANNOTATION: expires}},
                    "subsets": [{"addresses": [{"ip": ip}]}]}

        await self.storage.guaranteed_update(LEASE_PREFIX + ip, renew, ignore_not_found=True)

    async def list(self) -> list[str]:
        """The leased addresses, in key order; expired leases are removed."""
        now = self.clock()
        ips = []
        for lease in (await self.storage.list(LEASE_PREFIX)).items:
            subsets = lease.get("subsets") or [{}]
            addresses = subsets[0].get("addresses") or [{}]
            ip = addresses[0].get("ip") or ""
            annotations = (lease.get("metadata") or {}).get("annotations") or {}
            try:
                expires = float(annotations.get(EXPIRES_ANNOTATION, "0"))
            except ValueError:
                expires = 0.0
            if expires <= now:
                await self._expire(ip, lease)
            elif ip:
                ips.append(ip)
        return ips

    async def _expire(self, ip: str, lease: Object) -> None:
        precondition = Preconditions(resource_version=lease["metadata"]["resourceVersion"])
        with contextlib.suppress(StorageError):  # renewed or removed meanwhile
            await self.storage.delete(LEASE_PREFIX + ip, preconditions=precondition)

    async def remove(self, ip: str) -> None:
        """Drop the lease of ``ip``; KeyNotFoundError when there is none."""
        await self.storage.delete(LEASE_PREFIX + ip)


def endpoint_slice_for(endpoints: Object) -> Object:
    """The EndpointSlice kube makes of the apiserver's Endpoints: the first subset's ports,
    and an endpoint per address of the slice's family (IPv6 when every address is)."""
    meta = endpoints.get("metadata") or {}
    name = meta.get("name", "")
    subsets = endpoints.get("subsets") or []
    subset = subsets[0] if subsets else {}
    ready = subset.get("addresses") or []
    not_ready = subset.get("notReadyAddresses") or []
    everything = ready + not_ready
    ipv6 = bool(everything) and all(_is_ipv6(a.get("ip", "")) for a in everything)
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": name, "namespace": meta.get("namespace", ""),
                           "labels": {SERVICE_NAME_LABEL: name}},
              "addressType": IPV6 if ipv6 else "IPv4",
              "endpoints": [_endpoint(a, is_ready)
                            for addresses, is_ready in ((ready, True), (not_ready, False))
                            for a in addresses if _is_ipv6(a.get("ip", "")) == ipv6],
              "ports": [{"name": p.get("name", ""), "port": p.get("port"),
                         "protocol": p.get("protocol", "TCP")}
                        for p in subset.get("ports") or []]}
    return slice_


def _endpoint(address: dict[str, Any], ready: bool) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"addresses": [address.get("ip", "")],
                                "conditions": {"ready": ready}}
    for key in ("nodeName", "targetRef"):
        if address.get(key):
            endpoint[key] = address[key]
    return endpoint


def _is_ipv6(ip: str) -> bool:
    try:
        return ip_family(ip) == IPV6
    except ValueError:
        return False


class KubernetesService:
    """Keeps the `kubernetes` Service, Endpoints and EndpointSlice of this gateway."""

    def __init__(self, services: RESTStore, endpoints: RESTStore, slices: RESTStore,
                 leases: MasterLeases, *, service_ip: str, public_ip: str, public_port: int,
                 service_port: int = SERVICE_PORT, interval: float = ENDPOINT_INTERVAL) -> None:
        self.services, self.endpoints, self.slices = services, endpoints, slices
        self.leases = leases
        self.service_ip, self.public_ip = service_ip, public_ip
        self.public_port, self.service_port = public_port, service_port
        self.interval = interval
        self._lock = asyncio.Lock()
        self._started = self._stopped = False

    @property
    def endpoint_ports(self) -> list[dict[str, Any]]:
        return [{"name": PORT_NAME, "port": self.public_port, "protocol": "TCP"}]

    def service(self) -> Object:
        """The Service as kube's bootstrap controller creates it."""
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": NAME, "namespace": NAMESPACE,
                             "labels": {"provider": "kubernetes", "component": "apiserver"}},
                "spec": {"ports": [{"name": PORT_NAME, "port": self.service_port,
                                    "protocol": "TCP", "targetPort": self.public_port}],
                         "clusterIP": self.service_ip, "ipFamilyPolicy": "SingleStack",
                         "sessionAffinity": "None", "type": "ClusterIP"}}

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Drop the lease a previous run of this gateway left (it did not stop cleanly), then
        make the Service and Endpoints, trying a few times before the loop takes over."""
        self._started = True
        log.info("advertising the gateway in the kubernetes service", address=self.public_ip,
                 port=self.public_port, cluster_ip=self.service_ip)
        try:
            await self.remove_endpoints()
            log.warning("found stale data, removed previous endpoints on the kubernetes "
                        "service; the gateway did not stop cleanly before")
        except KeyNotFoundError:
            pass
        except (StorageError, status.StatusError, RuntimeError) as err:
            log.warning("removing old endpoints of the kubernetes service failed",
                        error=str(err))
        delay = 0.1
        for attempt in range(_FIRST_SYNC_ATTEMPTS):
            try:
                await self.sync()
                return
            except (StorageError, status.StatusError, RuntimeError) as err:
                if attempt == _FIRST_SYNC_ATTEMPTS - 1:
                    log.warning("unable to sync the kubernetes service", error=str(err))
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def run(self) -> None:
        """Sync every ``interval`` seconds until stopped."""
        while not self._stopped:
            await asyncio.sleep(self.interval)
            try:
                await self.sync()
            except (StorageError, status.StatusError, RuntimeError) as err:
                log.warning("unable to sync the kubernetes service", error=str(err))

    async def stop(self) -> None:
        """Stop syncing and drop this gateway's lease."""
        if not self._started or self._stopped:
            self._stopped = True
            return
        try:
            async with asyncio.timeout(_STOP_TIMEOUT):
                async with self._lock:
                    self._stopped = True
                await self.remove_endpoints(locked=False)
        except (KeyNotFoundError, TimeoutError):
            pass
        except (StorageError, status.StatusError, RuntimeError) as err:
            log.warning("unable to remove endpoints from the kubernetes service",
                        error=str(err))

    async def sync(self) -> None:
        """The Service if missing; this gateway's lease; the Endpoints and EndpointSlice."""
        async with self._lock:
            if self._stopped:
                return
            await self._ensure_service()
            await self.leases.update(self.public_ip)
            await self._reconcile(reconcile_ports=False)

    async def remove_endpoints(self, *, locked: bool = True) -> None:
        """Drop this gateway's lease and list the others (KeyNotFoundError: no lease)."""
        if locked:
            async with self._lock:
                await self.leases.remove(self.public_ip)
                await self._reconcile(reconcile_ports=True)
            return
        await self.leases.remove(self.public_ip)
        await self._reconcile(reconcile_ports=True)

    # -- the objects ----------------------------------------------------------------------

    async def _ensure_service(self) -> None:
        try:
            await self.services.get(NAMESPACE, NAME)
            return
        except status.StatusError as err:
            if err.code != 404:
                raise
        try:
            await self.services.create(NAMESPACE, self.service(), WriteOptions(manager=MANAGER))
            log.info("created the kubernetes service", cluster_ip=self.service_ip)
        except status.StatusError as err:
            if err.code != 409:
                raise

    async def _reconcile(self, *, reconcile_ports: bool) -> None:
        """The lease reconciler's doReconcile."""
        try:
            endpoints = copy.deepcopy(await self.endpoints.get(NAMESPACE, NAME))
            create = False
        except status.StatusError as err:
            if err.code != 404:
                raise
            endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                         "metadata": {"name": NAME, "namespace": NAMESPACE}}
            create = True
        masters = await self.leases.list()
        if not masters:
            raise RuntimeError("no master IPs were listed in storage, refusing to erase all "
                               "endpoints for the kubernetes service")
        labels = endpoints["metadata"].setdefault("labels", {})
        mirror_changed = labels.get(SKIP_MIRROR_LABEL) != "true"
        labels[SKIP_MIRROR_LABEL] = "true"
        format_ok, ips_ok, ports_ok = self._check(endpoints, masters, reconcile_ports)
        if not mirror_changed and format_ok and ips_ok and ports_ok:
            await self._ensure_slice(endpoints)
            return
        if not format_ok:
            endpoints["subsets"] = [{"addresses": [], "ports": self.endpoint_ports}]
        subset = endpoints["subsets"][0]
        if not format_ok or not ips_ok:
            subset["addresses"] = [{"ip": ip} for ip in sorted(set(masters))]
        if not ports_ok:
            subset["ports"] = self.endpoint_ports
        log.info("resetting endpoints for the kubernetes service", addresses=masters)
        options = WriteOptions(manager=MANAGER)
        if create:
            try:
                written = await self.endpoints.create(NAMESPACE, endpoints, options)
            except status.StatusError as err:
                if err.code == 409:
                    return
                raise
        else:
            written, _ = await self.endpoints.update(NAMESPACE, NAME, endpoints, options)
        await self._ensure_slice(written)

    def _check(self, endpoints: Object, masters: list[str],
               reconcile_ports: bool) -> tuple[bool, bool, bool]:
        """(one subset, its addresses are the leased ones, its ports are ours or not asked)."""
        subsets = endpoints.get("subsets") or []
        if len(subsets) != 1:
            return False, False, False
        subset = subsets[0]
        ports_ok = not reconcile_ports or (subset.get("ports") or []) == self.endpoint_ports
        listed = [a.get("ip") for a in subset.get("addresses") or []]
        ips_ok = len(listed) == len(masters) and len(set(listed)) == len(listed) and \
            set(listed) == set(masters)
        return True, ips_ok, ports_ok

    async def _ensure_slice(self, endpoints: Object) -> None:
        """EnsureEndpointSliceFromEndpoints: create, replace when its address type changed,
        update when its endpoints, ports or labels differ."""
        wanted = endpoint_slice_for(endpoints)
        options = WriteOptions(manager=MANAGER)
        try:
            current = await self.slices.get(NAMESPACE, NAME)
        except status.StatusError as err:
            if err.code != 404:
                raise
            await self._create_slice(wanted, options)
            return
        if current.get("addressType") != wanted["addressType"]:
            await self.slices.delete(NAMESPACE, NAME, DeleteOptions(), options)
            await self._create_slice(wanted, options)
            return
        if all(current.get(k) == wanted[k] for k in ("endpoints", "ports")) and \
                (current.get("metadata") or {}).get("labels") == wanted["metadata"]["labels"]:
            return
        await self.slices.update(NAMESPACE, NAME, wanted, options)

    async def _create_slice(self, wanted: Object, options: WriteOptions) -> None:
        try:
            await self.slices.create(NAMESPACE, copy.deepcopy(wanted), options)
        except status.StatusError as err:
            if err.code != 409:
                raise
