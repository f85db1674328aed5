"""The cluster-IP allocator over a real store: ranges as kube's ipallocator sees them, the
bitmap kept in one RangeAllocation object under compare-and-swap, and the repair pass."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.apimachinery.netutil import IPRange, parse_service_cidrs
from gateway.apis.core.serviceips import ServiceIPs
from gateway.controllers.serviceiprepair import REPAIRS_BEFORE_LEAK_CLEANUP, ServiceIPRepair
from gateway.registry.ipallocator import (
    PRIMARY_KEY,
    AlreadyAllocated,
    NotInRange,
    NotReady,
    RangeAllocator,
    RangeFull,
    decode_bits,
    encode_bits,
    pick_free,
)
from gateway.storage.errors import ConflictError
from gateway.storage.sqlite import SQLiteStorage

SERVICES = "/core/services/"


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SQLiteStorage]:
    store = SQLiteStorage(tmp_path / "state.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def made(storage: SQLiteStorage, cidr: str = "10.0.0.0/24") -> RangeAllocator:
    """An allocator whose allocation object exists (as after the first repair pass)."""
    allocator = RangeAllocator(storage, PRIMARY_KEY, IPRange.parse(cidr))
    await allocator.save(0, None)
    return allocator


def test_ranges_as_kubes_allocator_sees_them():
    v4 = IPRange.parse("10.0.0.0/24")
    # neither the network nor the broadcast address; the first 16 kept for requests
    assert (v4.size, v4.offset, v4.first_address) == (254, 16, "10.0.0.1")
    assert (v4.index("10.0.0.1"), v4.index("10.0.0.254")) == (0, 253)
    assert v4.index("10.0.0.0") is None and v4.index("10.0.0.255") is None
    assert v4.index("10.1.2.3") is None and v4.index("fd00::1") is None
    assert v4.address(16) == "10.0.0.17"
    # a small range keeps no band; a big one at most 256; IPv6 is cut at 65536 addresses
    assert (IPRange.parse("10.0.0.0/28").offset, IPRange.parse("10.0.0.0/28").size) == (0, 14)
    assert IPRange.parse("10.96.0.0/12").offset == 256
    v6 = IPRange.parse("fd00::/108")
    assert (v6.family, v6.size, v6.offset, v6.first_address) == ("IPv6", 65535, 256, "fd00::1")
    assert [r.cidr for r in parse_service_cidrs("")] == ["10.0.0.0/24"]
    # host bits are dropped, leading zeros allowed, as Go's sloppy parser allows them
    assert IPRange.parse("10.0.0.5/24").cidr == "10.0.0.0/24"
    assert IPRange.parse("010.000.000.000/24").cidr == "10.0.0.0/24"


def test_random_picks_come_from_above_the_band_first():
    rng = random.Random(7)
    picks = {pick_free(0, 254, 16, rng) for _ in range(200)}
    assert picks and min(picks) >= 16
    # the upper band full: the band below serves
    upper_full = sum(1 << i for i in range(16, 254))
    assert pick_free(upper_full, 254, 16, rng) < 16
    assert pick_free((1 << 254) - 1, 254, 16, rng) is None
    assert decode_bits(encode_bits(upper_full)) == upper_full
    assert encode_bits(0) == ""


async def test_allocation_is_refused_until_the_range_object_exists(storage):
    allocator = RangeAllocator(storage, PRIMARY_KEY, IPRange.parse("10.0.0.0/24"))
    with pytest.raises(NotReady, match="cannot allocate resources of type "
                                        "serviceipallocations at this time"):
        await allocator.allocate("10.0.0.5")
    with pytest.raises(NotReady):
        await allocator.allocate_next()


async def test_allocate_requested_and_next(storage):
    allocator = await made(storage)
    await allocator.allocate("10.0.0.5")
    with pytest.raises(AlreadyAllocated, match=r"^provided IP is already allocated$"):
        await allocator.allocate("10.0.0.5")
    with pytest.raises(NotInRange) as err:
        await allocator.allocate("10.1.2.3")
    assert str(err.value) == ("the provided IP (10.1.2.3) is not in the valid range. The range "
                              "of valid IPs is 10.0.0.0/24")
    picked = {await allocator.allocate_next() for _ in range(20)}
    assert len(picked) == 20 and "10.0.0.5" not in picked
    snapshot = await allocator.snapshot()
    assert snapshot is not None and snapshot.range == "10.0.0.0/24"
    assert snapshot.bits.bit_count() == 21
    await allocator.release(["10.0.0.5", "10.9.9.9"])
    await allocator.allocate("10.0.0.5")  # free again
    # a dry run checks the range only, and names no real address
    await allocator.allocate("10.0.0.5", dry_run=True)
    assert await allocator.allocate_next(dry_run=True) == "10.0.0.0"


async def test_a_full_range(storage):
    allocator = await made(storage, "10.0.0.0/29")  # 6 addresses
    got = {await allocator.allocate_next() for _ in range(6)}
    assert got == {f"10.0.0.{i}" for i in range(1, 7)}
    with pytest.raises(RangeFull, match=r"^range is full$"):
        await allocator.allocate_next()


async def test_concurrent_allocations_never_share_an_address(storage):
    # two allocators over one store, as two gateways over one etcd
    first = await made(storage)
    second = RangeAllocator(storage, PRIMARY_KEY, IPRange.parse("10.0.0.0/24"))
    got = await asyncio.gather(*(a.allocate_next() for a in [first, second] * 25))
    assert len(set(got)) == 50
    requested = await asyncio.gather(*(a.allocate("10.0.0.9") for a in (first, second)),
                                     return_exceptions=True)
    assert sorted(type(r).__name__ for r in requested) == ["AlreadyAllocated", "NoneType"]


async def test_save_is_a_compare_and_swap(storage):
    allocator = await made(storage)
    snapshot = await allocator.snapshot()
    await allocator.allocate("10.0.0.7")  # a write after the read
    with pytest.raises(ConflictError):
        await allocator.save(0, snapshot)


async def put_service(storage: SQLiteStorage, name: str, *ips: str,
                      kind: str = "ClusterIP") -> None:
    spec = {"type": kind}
    if ips:
        spec |= {"clusterIP": ips[0], "clusterIPs": list(ips)}
    await storage.create(f"{SERVICES}ns/{name}", {"apiVersion": "v1", "kind": "Service",
                                                  "metadata": {"name": name, "namespace": "ns"},
                                                  "spec": spec})


def repair_of(storage: SQLiteStorage, cidrs: str = "10.0.0.0/24") -> ServiceIPRepair:
    ips = ServiceIPs.over(storage, parse_service_cidrs(cidrs))

    async def services() -> list[dict]:
        return (await storage.list(SERVICES)).items

    return ServiceIPRepair(ips, services)


async def test_the_first_pass_makes_the_allocation_from_the_services(storage):
    await put_service(storage, "a", "10.0.0.1")
    await put_service(storage, "b", "10.0.0.200")
    await put_service(storage, "headless", "None")
    await put_service(storage, "out", "10.5.0.1")  # not in the range: reported only
    await put_service(storage, "twice", "10.0.0.200")  # held twice: reported only
    repair = repair_of(storage)
    await repair.run_once()
    allocator = repair.ips.allocators["IPv4"]
    for ip in ("10.0.0.1", "10.0.0.200"):
        with pytest.raises(AlreadyAllocated):
            await allocator.allocate(ip)
    snapshot = await allocator.snapshot()
    assert snapshot is not None and snapshot.bits.bit_count() == 2


async def test_a_leaked_address_is_given_back_on_the_third_pass(storage):
    repair = repair_of(storage)
    await repair.run_once()
    allocator = repair.ips.allocators["IPv4"]
    await allocator.allocate("10.0.0.42")  # no service holds it: a create under way, or a leak
    for _ in range(REPAIRS_BEFORE_LEAK_CLEANUP - 1):
        await repair.run_once()
        with pytest.raises(AlreadyAllocated):
            await allocator.allocate("10.0.0.42")
    await repair.run_once()
    await allocator.allocate("10.0.0.42")  # given back
    # an address whose service arrives in time is kept
    await allocator.allocate("10.0.0.43")
    await repair.run_once()
    await put_service(storage, "late", "10.0.0.43")
    for _ in range(REPAIRS_BEFORE_LEAK_CLEANUP + 1):
        await repair.run_once()
    with pytest.raises(AlreadyAllocated):
        await allocator.allocate("10.0.0.43")


async def test_a_changed_range_is_rebuilt(storage):
    await repair_of(storage, "10.0.0.0/24").run_once()
    await put_service(storage, "a", "10.96.0.10")
    repair = repair_of(storage, "10.96.0.0/16")
    await repair.run_once()
    allocator = repair.ips.allocators["IPv4"]
    snapshot = await allocator.snapshot()
    assert snapshot is not None and snapshot.range == "10.96.0.0/16"
    with pytest.raises(AlreadyAllocated):
        await allocator.allocate("10.96.0.10")
