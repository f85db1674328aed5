"""What kube-apiserver's own controllers do for Services, assembled for the gateway: cluster IPs
allocated from --service-cluster-ip-range on every Service write, the repair pass over them,
and the `kubernetes` Service with this gateway's --advertise-address and --secure-port.

Two post-start hooks, named as kube-apiserver's: start-service-ip-repair-controllers (the first
repair pass, which also makes the allocation objects; ready waits for it) and
bootstrap-controller (the `kubernetes` Service and its endpoints).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.hostnet import default_advertise_address
from gateway.apimachinery.netutil import IPRange
from gateway.apis.core.serviceips import ServiceIPs
from gateway.apis.install import KubeCore
from gateway.controllers.kubernetesservice import KubernetesService, MasterLeases
from gateway.controllers.serviceiprepair import ServiceIPRepair
from gateway.storage.errors import StorageError
from gateway.storage.interface import Object, Storage

log = structlog.get_logger(__name__)

Start = Callable[[Coroutine[Any, Any, None]], Awaitable[None]]


class ServiceNetwork:
    """Cluster-IP allocation, its repair, and the `kubernetes` Service of one gateway."""

    def __init__(self, core: KubeCore, storage: Storage, ips: ServiceIPs, *,
                 ranges: list[IPRange], advertise_address: str, bind_address: str,
                 secure_port: int) -> None:
        """``ips``: the allocators the Services store was built with, over ``ranges``."""
        self.ips = ips
        services = core.store("services")
        endpoints = core.store("endpoints")

        async def list_services() -> list[Object]:
            return (await services.cacher.list(services.resource.list_prefix(""))).items

        self.repair = ServiceIPRepair(self.ips, list_services)
        self.kubernetes = KubernetesService(
            services, endpoints, core.store("endpointslices", "discovery.k8s.io"),
            MasterLeases(storage), service_ip=ranges[0].first_address,
            public_ip=advertise_address or default_advertise_address(bind_address),
            public_port=secure_port)

    async def start_repair(self, start: Start) -> None:
        """The first repair pass (retried until the store takes it), then one every few
        minutes."""
        delay = 0.2
        while True:
            try:
                await self.repair.run_once()
                break
            except (StorageError, status.StatusError) as err:
                log.warning("the first service cluster IP repair failed; retrying",
                            error=str(err))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        await start(self.repair.run())

    async def start_bootstrap(self, start: Start) -> None:
        """The `kubernetes` Service and endpoints now, then kept every 10 seconds."""
        await self.kubernetes.start()
        await start(self.kubernetes.run())

    async def stop(self) -> None:
        await self.kubernetes.stop()
