"""An APIService for every group version the gateway serves itself (kube-apiserver's
autoregistration, synced on start).

Each local group version with a priority in kube's table gets a local APIService named
``<version>.<group>`` (``v1.`` for the core group), labelled
``kube-aggregator.kubernetes.io/automanaged: onstart``. At start it is created when missing and
its spec put back when someone changed it (an object that is not labelled automanaged is
left alone); an ``onstart`` APIService that names a group version no longer served is
deleted, and so is a ``"true"`` one whose group version is not served now (a CRD deleted
while the gateway was down). That first sync is the only one for ``onstart`` APIServices, as
kube's autoregister controller syncs each of them until it has synced once: one deleted or
changed afterwards is left as it is until the next start. Group versions without a priority
in the table get no APIService, as in kube.

A group version that appears on a local server while serving (``follow``/``served_changed``:
CRDs) is managed continuously, as kube's AddAPIServiceToSync: its APIService is labelled
``kube-aggregator.kubernetes.io/automanaged: "true"``, placed by kube's table or, for a group
not in it, by kube's CRD defaults (groupPriorityMinimum 1000, versionPriority 100); it is
created, its spec corrected and, when deleted by someone, created again; when the group version
disappears, the APIService is deleted if it is still labelled "true".

``completion_check`` is kube's ``autoregister-completion`` health check: it fails with
``missing APIService: [...]`` until every one of them has been seen Available.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable

import structlog

from gateway.aggregator.apiservices import APISERVICES, available_condition
from gateway.aggregator.registration import APIServiceRegistration
from gateway.aggregator.routes import Route
from gateway.apimachinery import status
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.server.healthz import HealthCheck
from gateway.storage.errors import StorageError
from gateway.storage.interface import Object, Preconditions

log = structlog.get_logger(__name__)

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
ON_START = "onstart"
CONTINUOUSLY = "true"
MANAGER = "kube-apiserver"
CHECK_NAME = "autoregister-completion"

#: (group, version) -> (groupPriorityMinimum, versionPriority): kube-apiserver v1.32's
#: DefaultGenericAPIServicePriorities merged with its own table (which wins).
PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("events.k8s.io", "v1"): (17750, 15),
    ("events.k8s.io", "v1beta1"): (17750, 5),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authentication.k8s.io", "v1beta1"): (17700, 9),
    ("authentication.k8s.io", "v1alpha1"): (17700, 1),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("certificates.k8s.io", "v1alpha1"): (17300, 1),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1beta1"): (16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1"): (16700, 9),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("coordination.k8s.io", "v1alpha2"): (16500, 12),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("discovery.k8s.io", "v1beta1"): (16200, 12),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"): (16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"): (16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"): (16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1"): (16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1"): (16000, 9),
    ("resource.k8s.io", "v1alpha3"): (15900, 9),
    ("storagemigration.k8s.io", "v1alpha1"): (15800, 9),
    ("apps", "v1"): (17800, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2beta1"): (17500, 9),
    ("autoscaling", "v2beta2"): (17500, 1),
    ("batch", "v1"): (17400, 15),
    ("batch", "v1beta1"): (17400, 9),
    ("batch", "v2alpha1"): (17400, 9),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("networking.k8s.io", "v1beta1"): (17200, 9),
    ("policy", "v1"): (17100, 15),
    ("policy", "v1beta1"): (17100, 9),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("storage.k8s.io", "v1beta1"): (16800, 9),
    ("storage.k8s.io", "v1alpha1"): (16800, 1),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("node.k8s.io", "v1beta1"): (16300, 9),
    ("node.k8s.io", "v1alpha1"): (16300, 1),
}


#: Priorities of a group version not in kube's table (kube's CRD registration defaults).
CRD_GROUP_PRIORITY = 1000
CRD_VERSION_PRIORITY = 100


def apiservice_name(group: str, version: str) -> str:
    return f"{version}.{group}"


def _apiservice(group: str, version: str, priorities: tuple[int, int], label: str) -> Object:
    return {
        "apiVersion": APISERVICES.api_version, "kind": APISERVICES.kind,
        "metadata": {"name": apiservice_name(group, version), "labels": {AUTOMANAGED: label}},
        "spec": {"group": group, "version": version,
                 "groupPriorityMinimum": priorities[0], "versionPriority": priorities[1]},
    }


def continuous_apiservice(group: str, version: str) -> Object:
    """The APIService of a group version that appeared while serving (automanaged "true")."""
    priorities = PRIORITIES.get((group, version), (CRD_GROUP_PRIORITY, CRD_VERSION_PRIORITY))
    return _apiservice(group, version, priorities, CONTINUOUSLY)


def local_apiservices(group_versions: Iterable[tuple[str, str]]) -> list[Object]:
    """The APIService each served (group, version) should have; those without a priority in
    kube's table are skipped."""
    wanted = []
    for group, version in group_versions:
        priorities = PRIORITIES.get((group, version))
        if priorities is None:
            log.info("skipping APIService creation", group_version=f"{group}/{version}"
                     if group else version)
            continue
        wanted.append(_apiservice(group, version, priorities, ON_START))
    return wanted


def _spec(obj: Object) -> dict:
    """A spec as Go compares APIServiceSpecs: absent and zero values are the same."""
    return {k: v for k, v in (obj.get("spec") or {}).items() if v not in (None, "", 0, False)}


def _automanaged(obj: Object) -> str:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(AUTOMANAGED, "")


class AutoRegistration:
    """Creates and corrects the local APIServices (see the module docstring)."""

    def __init__(self, store: RESTStore, registration: APIServiceRegistration,
                 wanted: list[Object]) -> None:
        self.store = store
        self.registration = registration
        self.wanted = {obj["metadata"]["name"]: obj for obj in wanted}
        #: The continuously managed ones ("true"), of group versions that appeared later.
        self.continuous: dict[str, Object] = {}
        self._group_versions: Callable[[], Iterable[tuple[str, str]]] = lambda: ()
        self._served: set[tuple[str, str]] = set()
        #: Names seen Available at least once (kube's check never turns back).
        self.seen_available: set[str] = set()
        self._recreate: asyncio.Queue[str] = asyncio.Queue()
        registration.observe(self._observed)

    # -- the health check ---------------------------------------------------------------------

    def _observed(self, name: str, route: Route | None, obj: Object | None) -> None:
        if name not in self.wanted:
            self._observed_continuous(name, obj)
            return
        if obj is None:
            return  # deleted after the first sync: left so until the next start (kube's "once")
        # the condition itself: a Route counts every local APIService available
        condition = available_condition(obj)
        if condition is not None and condition.get("status") == "True":
            self.seen_available.add(name)

    def _observed_continuous(self, name: str, obj: Object | None) -> None:
        if obj is None and name in self.continuous:
            self._recreate.put_nowait(name)

    @property
    def missing(self) -> list[str]:
        return sorted(set(self.wanted) - self.seen_available)

    async def _check(self) -> None:
        missing = self.missing
        if missing:
            raise RuntimeError(f"missing APIService: [{' '.join(missing)}]")

    def completion_check(self) -> HealthCheck:
        return HealthCheck(CHECK_NAME, self._check)

    # -- syncing ------------------------------------------------------------------------------

    async def sync_on_start(self) -> None:
        """Create, correct and delete once, as the APIServices stand at start."""
        options = WriteOptions(manager=MANAGER)
        for name, wanted in self.wanted.items():
            await self._ensure(name, wanted, options)
        for obj in self.store.cacher.objects(self.store.resource.storage_prefix):
            name, managed = obj["metadata"]["name"], _automanaged(obj)
            if (managed == ON_START and name not in self.wanted) or \
                    (managed == CONTINUOUSLY and name not in self.continuous):
                await self._delete(obj, options)  # left from a group version now gone

    def follow(self, group_versions: Callable[[], Iterable[tuple[str, str]]]) -> None:
        """Read the served (group, version)s from ``group_versions`` on ``served_changed``;
        those served now are the ones known at start (their APIServices are ``wanted``)."""
        self._group_versions = group_versions
        self._served = set(group_versions())

    def served_changed(self) -> None:
        """The local servers' group versions changed: one that appeared gets a continuously
        managed APIService, one that disappeared loses it (synced by ``run``)."""
        served = set(self._group_versions())
        appeared, gone = served - self._served, self._served - served
        self._served = served
        for group, version in sorted(appeared):
            name = apiservice_name(group, version)
            if name not in self.wanted:
                self.continuous[name] = continuous_apiservice(group, version)
                self._recreate.put_nowait(name)
        for group, version in sorted(gone):
            name = apiservice_name(group, version)
            if self.continuous.pop(name, None) is not None:
                self._recreate.put_nowait(name)

    async def run(self) -> None:
        """After start: create, correct or delete the continuously managed APIServices as
        their group versions come and go, and create again one someone deletes."""
        while True:
            name = await self._recreate.get()
            delay = 0.2
            while True:
                try:
                    await self._sync(name, WriteOptions(manager=MANAGER))
                    break
                except (StorageError, status.StatusError) as err:
                    log.warning("re-creating an APIService failed; retrying", apiservice=name,
                                error=str(err))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)

    async def _sync(self, name: str, options: WriteOptions) -> None:
        wanted = self.wanted.get(name) or self.continuous.get(name)
        if wanted is not None:
            await self._ensure(name, wanted, options)
            return
        try:
            current = await self.store.get("", name)
        except status.StatusError as err:
            if err.code != 404:
                raise
            return
        if _automanaged(current) == CONTINUOUSLY:
            await self._delete(current, options)

    async def _ensure(self, name: str, wanted: Object, options: WriteOptions) -> None:
        try:
            current = await self.store.get("", name)
        except status.StatusError as err:
            if err.code != 404:
                raise
            try:
                await self.store.create("", copy.deepcopy(wanted), options)
                log.info("created APIService", apiservice=name)
            except status.StatusError as err:
                if err.code != 409:
                    raise
            return
        if not _automanaged(current) or _spec(current) == _spec(wanted):
            return

        def corrected(obj: Object | None) -> Object:
            assert obj is not None
            obj["spec"] = copy.deepcopy(wanted["spec"])
            return obj

        try:
            await self.store.patch("", name, corrected, options)
        except status.StatusError as err:
            if err.code in (404, 409):
                return
            raise
        log.info("corrected the spec of APIService", apiservice=name)

    async def _delete(self, obj: Object, options: WriteOptions) -> None:
        meta = obj["metadata"]
        try:
            await self.store.delete("", meta["name"], DeleteOptions(
                preconditions=Preconditions(uid=meta.get("uid"))), options)
            log.info("deleted APIService no longer served", apiservice=meta["name"])
        except status.StatusError as err:
            if err.code not in (404, 409):
                raise
