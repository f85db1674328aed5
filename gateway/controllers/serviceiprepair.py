"""kube's service cluster-IP repair controller (pkg/registry/core/service/ipallocator/
controller/repair.go): the stored allocation rebuilt from the stored Services.

A pass reads each family's allocation, then every Service, and marks each address a Service
holds. An address held but not marked allocated is repaired; one held twice, out of range or
of an unconfigured family is reported (the Service must be recreated). An address marked
allocated that no Service holds may belong to a create still under way, so it is kept for
two more passes and given back on the third. The rebuilt bitmap is written only if the
allocation did not change since it was read (compare-and-swap); otherwise the pass runs
again. The first pass runs at start, before the gateway is ready; then one every three minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from gateway.apimachinery.netutil import canonical_ip, ip_family
from gateway.apis.core.serviceips import ServiceIPs
from gateway.registry.ipallocator import Snapshot
from gateway.storage.errors import ConflictError, KeyExistsError
from gateway.storage.interface import Object

log = structlog.get_logger(__name__)

#: kube repairs every 3 minutes.
REPAIR_INTERVAL = 180.0
#: Passes an unheld address survives before it is given back.
REPAIRS_BEFORE_LEAK_CLEANUP = 3
_CONFLICT_RETRIES = 10

ListServices = Callable[[], Awaitable[list[Object]]]


class ServiceIPRepair:
    """Rebuilds the cluster-IP allocations from the Services that hold them."""

    def __init__(self, ips: ServiceIPs, list_services: ListServices, *,
                 interval: float = REPAIR_INTERVAL) -> None:
        self.ips = ips
        self.list_services = list_services
        self.interval = interval
        #: family -> address -> passes left before a leaked address is given back
        self.leaks: dict[str, dict[str, int]] = {family: {} for family in ips.allocators}

    async def run(self) -> None:
        """A pass every ``interval`` seconds, forever."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.run_once()
            except Exception as err:  # a failed pass is retried next time
                log.warning("service cluster IP repair failed", error=str(err))

    async def run_once(self) -> None:
        """One pass, again while another writer changed the allocation under it."""
        for attempt in range(_CONFLICT_RETRIES):
            try:
                await self._pass()
                return
            except (ConflictError, KeyExistsError):
                if attempt == _CONFLICT_RETRIES - 1:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))

    async def _pass(self) -> None:
        snapshots: dict[str, Snapshot | None] = {}
        stored: dict[str, int] = {}
        for family, allocator in self.ips.allocators.items():
            snapshot = snapshots[family] = await allocator.snapshot()
            same_range = snapshot is not None and snapshot.range in ("", allocator.range.cidr)
            if snapshot is not None and not same_range:
                log.warning("the stored service IP allocation is of another range; rebuilding",
                            stored=snapshot.range, configured=allocator.range.cidr)
            stored[family] = snapshot.bits if snapshot is not None and same_range else 0
        rebuilt = dict.fromkeys(self.ips.allocators, 0)
        for service in await self.list_services():
            self._mark(service, stored, rebuilt)
        for family in self.ips.allocators:
            rebuilt[family] |= self._keep_leaked(family, stored[family])
        for family, allocator in self.ips.allocators.items():
            await allocator.save(rebuilt[family], snapshots[family])

    def _mark(self, service: Object, stored: dict[str, int], rebuilt: dict[str, int]) -> None:
        """Mark the addresses one Service holds."""
        spec, meta = service.get("spec") or {}, service.get("metadata") or {}
        if spec.get("clusterIP") in (None, "", "None"):
            return
        where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        for value in spec.get("clusterIPs") or [spec["clusterIP"]]:
            ip = canonical_ip(value)
            if ip is None:
                log.warning("the cluster IP is not a valid IP; please recreate", ip=value,
                            service=where)
                continue
            family = ip_family(ip)
            allocator = self.ips.allocators.get(family)
            if allocator is None:
                log.warning("the cluster IP is of a family not configured on this cluster; "
                            "please recreate", ip=ip, family=family, service=where)
                continue
            index = allocator.range.index(ip)
            if index is None:
                log.warning("the cluster IP is not within the configured Service CIDR; please "
                            "recreate", ip=ip, cidr=allocator.range.cidr, service=where)
                continue
            bit = 1 << index
            if rebuilt[family] & bit:
                log.warning("the cluster IP was assigned to multiple services; please "
                            "recreate", ip=ip, service=where)
                continue
            rebuilt[family] |= bit
            if stored[family] & bit:
                stored[family] &= ~bit  # what stays in ``stored`` is held by nobody
            else:
                log.warning("the cluster IP is not allocated; repairing", ip=ip, service=where)
            self.leaks[family].pop(ip, None)

    def _keep_leaked(self, family: str, unheld: int) -> int:
        """Of the addresses allocated but held by no Service, those still within their grace
        passes (as a bitmap); the others are given back."""
        allocator = self.ips.allocators[family]
        leaks = self.leaks[family]
        kept = 0
        index = 0
        while unheld >> index:
            if unheld >> index & 1:
                ip = allocator.range.address(index)
                left = leaks.get(ip)
                if left is None:
                    log.info("the cluster IP may have leaked: flagging for later clean up",
                             ip=ip)
                    left = REPAIRS_BEFORE_LEAK_CLEANUP - 1
                if left > 0:
                    leaks[ip] = left - 1
                    kept |= 1 << index
                else:
                    log.warning("the cluster IP appears to have leaked: cleaning up", ip=ip)
                    leaks.pop(ip, None)
            index += 1
        return kept
