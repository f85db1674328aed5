"""Cluster IPs handed out of one service range, the allocation kept in the store (kube's
bitmap allocator behind a RangeAllocation object: pkg/registry/core/service/ipallocator and
allocator/storage).

The whole state of a range is one object, ``/ranges/serviceips`` (``/ranges/
secondaryserviceips`` for the second family), holding the range and a bitmap with one bit per
address. Every allocation and release is a compare-and-swap of that object (the store's
guaranteed update), so two requests, or two gateways on one etcd, never hand out the same
address: the loser of a race reads the winner's bitmap and tries again. The object is made by
the repair pass at start (gateway.controllers.serviceiprepair); until then allocation is
refused, as kube refuses it.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gateway.apimachinery.netutil import IPRange
from gateway.storage.errors import KeyNotFoundError
from gateway.storage.interface import Object, Preconditions, Storage

#: kube's resource name for the allocation objects, shown in its errors.
RESOURCE = "serviceipallocations"
PRIMARY_KEY = "/ranges/serviceips"
SECONDARY_KEY = "/ranges/secondaryserviceips"


class AllocationError(Exception):
    """An address could not be allocated; the message is kube's."""


class NotInRange(AllocationError):
    def __init__(self, ip: str, cidr: str) -> None:
        super().__init__(f"the provided IP ({ip}) is not in the valid range. The range of "
                         f"valid IPs is {cidr}")


class AlreadyAllocated(AllocationError):
    def __init__(self) -> None:
        super().__init__("provided IP is already allocated")


class RangeFull(AllocationError):
    def __init__(self) -> None:
        super().__init__("range is full")


class NotReady(AllocationError):
    """The range's object does not exist yet (the repair pass has not run)."""

    def __init__(self) -> None:
        super().__init__(f"cannot allocate resources of type {RESOURCE} at this time")


class RangeMismatch(AllocationError):
    """The stored object is of another range (the flag changed; the repair pass fixes it)."""

    def __init__(self) -> None:
        super().__init__("the provided range does not match the current range")


def encode_bits(bits: int) -> str:
    """The bitmap as kube stores it: big.Int.Bytes() (big-endian, no leading zeros), base64."""
    return base64.b64encode(bits.to_bytes((bits.bit_length() + 7) // 8, "big")).decode()


def decode_bits(data: str | None) -> int:
    return int.from_bytes(base64.b64decode(data or ""), "big")


def range_allocation(cidr: str, bits: int) -> Object:
    """The stored RangeAllocation object."""
    return {"kind": "RangeAllocation", "apiVersion": "v1", "metadata": {},
            "range": cidr, "data": encode_bits(bits)}


def pick_free(bits: int, size: int, offset: int, rng: random.Random) -> int | None:
    """A free index: from a random point of the upper band [offset, size), scanning forward
    and wrapping; then likewise in the lower band [0, offset). None when all are taken."""
    if bits.bit_count() >= size:
        return None
    for low, high in ((offset, size), (0, offset)):
        span = high - low
        if span <= 0:
            continue
        start = rng.randrange(span)
        for step in range(span):
            at = low + (start + step) % span
            if not bits >> at & 1:
                return at
    return None


@dataclass(frozen=True)
class Snapshot:
    """A stored allocation: its range, its bitmap, and the revision it was read at."""

    range: str
    bits: int
    resource_version: str


class RangeAllocator:
    """One family's addresses: allocate a given or any free address, release, and read or
    replace the whole bitmap (the repair pass)."""

    def __init__(self, storage: Storage, key: str, ip_range: IPRange,
                 rng: random.Random | None = None) -> None:
        self.storage = storage
        self.key = key
        self.range = ip_range
        self.rng = rng or random.Random()

    @property
    def family(self) -> str:
        return self.range.family

    def contains(self, ip: str) -> bool:
        return self.range.index(ip) is not None

    async def allocate(self, ip: str, *, dry_run: bool = False) -> None:
        """Take ``ip``: NotInRange, AlreadyAllocated, NotReady. A dry run checks only the
        range (as kube's does: whether it is free would be stale at once)."""
        index = self.range.index(ip)
        if index is None:
            raise NotInRange(ip, self.range.cidr)
        if dry_run:
            return

        def take(bits: int) -> int:
            if bits >> index & 1:
                raise AlreadyAllocated()
            return bits | 1 << index

        await self._change(take)

    async def allocate_next(self, *, dry_run: bool = False) -> str:
        """Take any free address: RangeFull, NotReady. A dry run answers the network address
        without looking (kube's dry-run allocator does the same)."""
        if dry_run:
            return self.range.network_address
        picked: list[int] = []

        def take(bits: int) -> int:
            index = pick_free(bits, self.range.size, self.range.offset, self.rng)
            if index is None:
                raise RangeFull()
            picked[:] = [index]
            return bits | 1 << index

        await self._change(take)
        return self.range.address(picked[0])

    async def release(self, ips: Iterable[str]) -> None:
        """Give addresses back; ones out of the range or not taken are left alone."""
        indexes = [i for i in (self.range.index(ip) for ip in ips) if i is not None]
        if not indexes:
            return
        mask = 0
        for index in indexes:
            mask |= 1 << index
        try:
            await self._change(lambda bits: bits & ~mask)
        except NotReady:
            return  # nothing was ever allocated

    async def _change(self, change: Callable[[int], int]) -> None:
        cidr = self.range.cidr

        async def apply(current: Object | None) -> Object:
            if current is None:
                raise NotReady()
            if current.get("range") != cidr:
                raise RangeMismatch()
            updated = dict(current)
            updated["data"] = encode_bits(change(decode_bits(current.get("data"))))
            return updated

        try:
            await self.storage.guaranteed_update(self.key, apply)
        except KeyNotFoundError:
            raise NotReady() from None

    async def snapshot(self) -> Snapshot | None:
        """The stored allocation, or None before the first repair pass made it."""
        try:
            obj = await self.storage.get(self.key)
        except KeyNotFoundError:
            return None
        return Snapshot(str(obj.get("range") or ""), decode_bits(obj.get("data")),
                        obj["metadata"]["resourceVersion"])

    async def save(self, bits: int, previous: Snapshot | None) -> None:
        """Replace the allocation with ``bits``, if it is still what ``previous`` read
        (ConflictError otherwise; KeyExistsError when someone made it first)."""
        new = range_allocation(self.range.cidr, bits)
        if previous is None:
            await self.storage.create(self.key, new)
            return

        async def replace(current: Object | None) -> Object:
            return new

        await self.storage.guaranteed_update(
            self.key, replace,
            preconditions=Preconditions(resource_version=previous.resource_version))
