"""Cluster IPs of Services: kube's service REST storage around the generic store
(pkg/registry/core/service/storage: alloc.go, storage.go).

A Service of type ClusterIP, NodePort or LoadBalancer gets an address of each of its IP
families from --service-cluster-ip-range (the one it asks for, or any free one); a headless
one (clusterIP None) and an ExternalName get none. ``ipFamilyPolicy`` and ``ipFamilies`` are
filled in from the cluster's families as kube fills them.

The work happens after the strategy's defaults and validation, as the last admission check
before the write (kube does it before its validation, in BeginCreate/BeginUpdate): so the
managed fields of the request's manager do not claim the allocated fields, as in kube.
Each request keeps what it allocated; when the request fails, addresses the stored object does
not hold are given back, and after a successful update the addresses the service no longer
holds are. Addresses of deleted Services are given back, and their Endpoints deleted, as kube's
AfterDelete does. What a crash leaves behind, the repair pass finds.
"""

from __future__ import annotations

import contextvars
import copy
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.netutil import IPV4, IPV6, IPRange, canonical_ip, ip_family
from gateway.apimachinery.status import Cause
from gateway.apis.core.services import (
    NONE,
    ServiceStrategy,
    cluster_ips_related_causes,
    go_strings,
    invalid_list,
    normalize_cluster_ips,
    same_field,
    spec_of,
)
from gateway.registry.ipallocator import (
    PRIMARY_KEY,
    SECONDARY_KEY,
    AllocationError,
    RangeAllocator,
)
from gateway.registry.resource import ResourceDef
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.registry.validation import invalid
from gateway.registry.versions import VersionLayer
from gateway.storage.errors import KeyNotFoundError, StorageError
from gateway.storage.interface import Object, Storage
from gateway.storage.watchcache import Cacher

log = structlog.get_logger(__name__)

#: (family, canonical address)
Allocation = tuple[str, str]


def other_family(family: str) -> str:
    return IPV6 if family == IPV4 else IPV4


def allocated_ips(obj: Object | None) -> set[Allocation]:
    """The cluster addresses a stored Service holds."""
    if obj is None:
        return set()
    spec = spec_of(obj)
    if spec.get("type") == "ExternalName":
        return set()
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    held = set()
    for ip in ips:
        canonical = canonical_ip(ip) if ip != NONE else None
        if canonical is not None:
            held.add((ip_family(canonical), canonical))
    return held


def _invalid(obj: Object, causes: list[Cause]) -> status.StatusError:
    return status.invalid("Service", obj.get("metadata", {}).get("name", ""), causes)


def _matching_prefer_dual_stack(spec: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """An update of a PreferDualStack service that keeps its addresses and families: the
    cluster turning dual- or single-stack does not change it."""
    if old is None or spec.get("ipFamilyPolicy") is None:
        return False
    if old.get("type") != spec.get("type") or spec.get("type") == "ExternalName":
        return False
    if spec.get("ipFamilyPolicy") != "PreferDualStack" or \
            old.get("ipFamilyPolicy") not in (None, "PreferDualStack"):
        return False
    return same_field(old, spec, "clusterIPs") and same_field(old, spec, "ipFamilies")


class ServiceIPs:
    """The allocators of the configured families (kube's Allocators); the first family is
    the cluster's default."""

    def __init__(self, allocators: list[RangeAllocator]) -> None:
        self.allocators = {a.family: a for a in allocators}
        self.default_family = allocators[0].family

    @classmethod
    def over(cls, storage: Storage, ranges: list[IPRange]) -> ServiceIPs:
        keys = (PRIMARY_KEY, SECONDARY_KEY)
        return cls([RangeAllocator(storage, keys[i], r) for i, r in enumerate(ranges)])

    @property
    def dual_stack(self) -> bool:
        return len(self.allocators) == 2

    def init_ip_families(self, obj: Object, old: dict[str, Any] | None) -> None:
        """initIPFamilyFields: default the policy, infer families from the addresses given,
        and refuse what the cluster's families cannot serve."""
        spec = spec_of(obj)
        if spec.get("type") == "ExternalName" or _matching_prefer_dual_stack(spec, old):
            return
        selectorless = not spec.get("selector")
        if spec.get("ipFamilyPolicy") is None:
            if old is not None and old.get("ipFamilyPolicy"):
                spec["ipFamilyPolicy"] = old["ipFamilyPolicy"]
            elif spec.get("clusterIP") == NONE and selectorless:
                spec["ipFamilyPolicy"] = "RequireDualStack"
            else:
                spec["ipFamilyPolicy"] = "SingleStack"
        causes = cluster_ips_related_causes(spec)
        if causes:
            raise _invalid(obj, causes)
        policy = spec["ipFamilyPolicy"]
        if old is not None:
            if policy == "SingleStack":
                if same_field(old, spec, "clusterIPs") and len(spec.get("clusterIPs") or []) > 1:
                    spec["clusterIPs"] = spec["clusterIPs"][:1]
                if same_field(old, spec, "ipFamilies") and len(spec.get("ipFamilies") or []) > 1:
                    spec["ipFamilies"] = spec["ipFamilies"][:1]
            else:
                causes += self._reduced_causes(spec, old, policy)
        ips = spec.get("clusterIPs") or []
        families = list(spec.get("ipFamilies") or [])
        if policy == "SingleStack":
            for what, values in (("cluster IPs", ips), ("IP families", families)):
                if len(values) == 2:
                    causes.append(invalid("spec.ipFamilyPolicy", policy,
                                          "must be 'RequireDualStack' or 'PreferDualStack' "
                                          f"when multiple {what} are specified"))
        for i, ip in enumerate(ips):
            if ip == NONE:
                break
            family = ip_family(ip)
            if i >= len(families):
                if family not in self.allocators:
                    causes.append(invalid_list(f"spec.clusterIPs[{i}]", ips,
                                               f"{family} is not configured on this cluster"))
                else:
                    families.append(family)
        if causes:
            raise _invalid(obj, causes)
        if spec.get("clusterIP") == NONE and selectorless:
            families = families or [self.default_family]
            if len(families) < 2 and policy != "SingleStack":
                families.append(other_family(families[0]))
            spec["ipFamilies"] = families
            return
        if policy == "RequireDualStack" and not self.dual_stack:
            causes.append(invalid("spec.ipFamilyPolicy", policy,
                                  "this cluster is not configured for dual-stack services"))
        causes += [invalid(f"spec.ipFamilies[{i}]", family, "not configured on this cluster")
                   for i, family in enumerate(families) if family not in self.allocators]
        if causes:
            raise _invalid(obj, causes)
        families = families or [self.default_family]
        if policy != "SingleStack" and len(families) == 1 and self.dual_stack:
            families.append(other_family(families[0]))
        spec["ipFamilies"] = families

    @staticmethod
    def _reduced_causes(spec: dict[str, Any], old: dict[str, Any], policy: str) -> list[Cause]:
        causes = []
        for name, what in (("clusterIPs", "cluster IP"), ("ipFamilies", "IP family")):
            values = spec.get(name) or []
            if values and len(values) < len(old.get(name) or []):
                causes.append(invalid("spec.ipFamilyPolicy", policy,
                                      f"must be 'SingleStack' to release the secondary {what}"))
        return causes

    def init_causes(self, obj: Object, old: dict[str, Any] | None) -> list[Cause]:
        """What ``init_ip_families`` would refuse, without changing ``obj``."""
        try:
            self.init_ip_families(copy.deepcopy(obj), old)
        except status.StatusError as err:
            return list(err.causes or [])
        return []

    async def release(self, ips: set[Allocation]) -> None:
        for family, allocator in self.allocators.items():
            mine = [ip for fam, ip in ips if fam == family]
            if mine:
                await allocator.release(mine)


@dataclass
class _Request:
    """What one write request allocated, and what the service held before it."""

    dry_run: bool
    allocated: set[Allocation] = field(default_factory=set)
    before: set[Allocation] = field(default_factory=set)


_REQUEST: contextvars.ContextVar[_Request | None] = contextvars.ContextVar(
    "service_ip_request", default=None)


class FamilyCheckingStrategy(ServiceStrategy):
    """The service strategy, refusing first what the cluster's IP families cannot serve (kube
    checks that before its validation; the fields themselves are set later, by the
    allocation)."""

    def __init__(self, ips: ServiceIPs) -> None:
        self.ips = ips

    def validate(self, obj: Object) -> list[Cause]:
        trial = copy.deepcopy(obj)
        normalize_cluster_ips(spec_of(trial), None)
        return self.ips.init_causes(trial, None) or super().validate(obj)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        old_spec = spec_of(old)
        if _matching_prefer_dual_stack(spec_of(new), old_spec):
            return super().validate_update(new, old)
        return self.ips.init_causes(new, old_spec) or super().validate_update(new, old)


class ServiceStore(RESTStore):
    """Services, with cluster IPs allocated and released around the generic store's writes.
    Without ``ips`` (no allocators) it is the plain store."""

    def __init__(self, resource: ResourceDef, cacher: Cacher,
                 version: VersionLayer | None = None, *, ips: ServiceIPs | None = None,
                 endpoints: RESTStore | None = None, **options: Any) -> None:
        super().__init__(resource, cacher, version, **options)
        self.ips, self.endpoints = ips, endpoints
        if ips is not None:
            self.strategy = FamilyCheckingStrategy(ips)
            self.admission = (self._allocate, *self.admission)

    # -- the writes, each one request -------------------------------------------------------

    async def create(self, namespace: str, obj: Object, options: WriteOptions) -> Object:
        request = _Request(options.dry_run)
        token = _REQUEST.set(request)
        try:
            result = await super().create(namespace, obj, options)
        except (status.StatusError, StorageError):
            await self._undo(request, namespace, obj.get("metadata", {}).get("name", ""))
            raise
        finally:
            _REQUEST.reset(token)
        await self._commit(request, result)
        return result

    async def update(self, namespace: str, name: str, obj: Object,
                     options: WriteOptions) -> tuple[Object, bool]:
        return await self._tracked(namespace, name, options,
                                 super().update(namespace, name, obj, options))

    async def patch(self, namespace: str, name: str, mutate: Any, options: WriteOptions, *,
                    may_create: bool = False) -> tuple[Object, bool]:
        return await self._tracked(namespace, name, options, super().patch(
            namespace, name, mutate, options, may_create=may_create))

    async def _tracked(self, namespace: str, name: str, options: WriteOptions,
                     work: Any) -> tuple[Object, bool]:
        request = _Request(options.dry_run)
        token = _REQUEST.set(request)
        try:
            result, created = await work
        except (status.StatusError, StorageError):
            await self._undo(request, namespace, name)
            raise
        finally:
            _REQUEST.reset(token)
        await self._commit(request, result)
        return result, created

    async def delete(self, namespace: str, name: str, options: DeleteOptions,
                     write: WriteOptions) -> tuple[Object, bool]:
        obj, gone = await super().delete(namespace, name, options, write)
        if gone and not write.dry_run:
            await self._after_delete(obj)
        return obj, gone

    async def _after_delete(self, obj: Object) -> None:
        """Give the addresses back, and delete the Endpoints of the same name (kube does, so
        that a new Service of that name never meets old endpoints)."""
        await self._release(allocated_ips(obj))
        if self.endpoints is None:
            return
        meta = obj.get("metadata", {})
        key = self.endpoints.resource.key(meta.get("namespace", ""), meta.get("name", ""))
        try:
            await self.endpoints.cacher.delete(key)
        except KeyNotFoundError:
            pass
        except StorageError as err:
            log.warning("deleting the endpoints of a deleted service failed", key=key,
                        error=str(err))

    async def _commit(self, request: _Request, result: Object) -> None:
        """After a successful write: give back what the service no longer holds."""
        if request.dry_run or self.ips is None:
            return
        meta = result.get("metadata", {})
        gone = bool(meta.get("deletionTimestamp")) and not self.strategy.pending_finalizers(
            result)
        holds = set() if gone else allocated_ips(result)
        await self._release((request.allocated | request.before | allocated_ips(result))
                            - holds)

    async def _undo(self, request: _Request, namespace: str, name: str) -> None:
        """After a failed write: give back what this request took, unless the stored
        service holds it after all (the failure came after the write)."""
        if request.dry_run or not request.allocated:
            return
        stored: Object | None = None
        if name:
            try:
                stored = await self.cacher.get(self.resource.key(namespace, name))
            except StorageError:
                stored = None
        await self._release(request.allocated - allocated_ips(stored))

    async def _release(self, ips: set[Allocation]) -> None:
        if not ips or self.ips is None:
            return
        try:
            await self.ips.release(ips)
        except (AllocationError, StorageError) as err:
            # the repair pass gives them back later
            log.warning("releasing service cluster IPs failed", ips=sorted(ip for _, ip in ips),
                        error=str(err))

    # -- the admission step ------------------------------------------------------------------

    async def _allocate(self, new: Object, old: Object | None, options: WriteOptions) -> None:
        if options.subresource:
            return
        spec = spec_of(new)
        if old is None:
            normalize_cluster_ips(spec, None)
        if self.ips is None:
            return
        request = _REQUEST.get()
        if request is None:  # a write outside create/update/patch: track nothing
            request = _Request(options.dry_run)
        if old is None:
            self.ips.init_ip_families(new, None)
            await self._allocate_cluster_ips(new, request)
            return
        old_spec = spec_of(old)
        request.before = allocated_ips(old)
        if _matching_prefer_dual_stack(spec, old_spec):
            return
        self.ips.init_ip_families(new, old_spec)
        if old_spec.get("type") == "ExternalName" and spec.get("type") != "ExternalName":
            await self._allocate_cluster_ips(new, request)
            return
        if (old_spec.get("clusterIPs") or [None])[0] == NONE or \
                spec.get("type") == "ExternalName":
            return  # headless stays headless; ExternalName's addresses go on commit
        families = spec.get("ipFamilies") or []
        if len(old_spec.get("ipFamilies") or []) == 1 and len(families) == 2:
            ips = list(spec.get("clusterIPs") or [])
            if len(ips) < 2:
                ips.append("")
            spec["clusterIPs"] = ips
            got = await self._allocate_ips(new, {families[1]: ips[1]}, request)
            ips[1] = got[families[1]]

    async def _allocate_cluster_ips(self, obj: Object, request: _Request) -> None:
        """allocClusterIPs: an address of each family, the given one or any free one."""
        spec = spec_of(obj)
        if spec.get("type") == "ExternalName":
            return
        ips = list(spec.get("clusterIPs") or [])
        if ips and ips[0] == NONE:
            return
        families = spec.get("ipFamilies") or []
        ips += [""] * (len(families) - len(ips))
        got = await self._allocate_ips(obj, {family: ips[i]
                                             for i, family in enumerate(families)}, request)
        for i, family in enumerate(families):
            ips[i] = got[family]
        spec["clusterIPs"] = ips
        if ips:
            spec["clusterIP"] = ips[0]

    async def _allocate_ips(self, obj: Object, wanted: dict[str, str],
                            request: _Request) -> dict[str, str]:
        """allocIPs: each family's address; a refused request for a given address is 422 on
        spec.clusterIPs, a failure to find a free one is 500."""
        assert self.ips is not None
        got: dict[str, str] = {}
        for family, ip in wanted.items():
            allocator = self.ips.allocators[family]
            if not ip:
                try:
                    found = await allocator.allocate_next(dry_run=request.dry_run)
                except (AllocationError, StorageError) as err:
                    raise status.internal_error(
                        f"failed to allocate a serviceIP: {err}") from None
                got[family] = found
            else:
                try:
                    await allocator.allocate(ip, dry_run=request.dry_run)
                except (AllocationError, StorageError) as err:
                    ips = spec_of(obj).get("clusterIPs")
                    raise _invalid(obj, [Cause(
                        "FieldValueInvalid", f"Invalid value: {go_strings(ips)}: failed to "
                        f"allocate IP {ip}: {err}", "spec.clusterIPs")]) from None
                got[family] = ip
            if not request.dry_run:
                canonical = canonical_ip(got[family])
                if canonical is not None:
                    request.allocated.add((family, canonical))
        return got
