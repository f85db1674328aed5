"""RBAC upkeep: the bootstrap policy and aggregated cluster roles.

- The bootstrap policy (gateway.auth.rbac.bootstrap) is reconciled at start and whenever one
  of its objects is deleted: missing objects are created again; existing ones whose autoupdate
  annotation is not "false" get back rules, subjects, labels and annotations they lost. Other
  changes users made, and objects users created, are left alone.
- A ClusterRole with an aggregationRule gets the rules of every ClusterRole its selectors
  match, kept up to date as those change (kube's clusterrole-aggregation controller).
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Callable

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.labels import from_label_selector
from gateway.auth.rbac import bootstrap
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import EventType, Object, WatchEvent

log = structlog.get_logger(__name__)
MANAGER = "kube-apiserver"
AGGREGATOR = "clusterrole-aggregation-controller"
#: Aggregation settles in as many passes as aggregated roles are nested deep (admin > edit >
#: view: three); a bound keeps a cycle of roles aggregating each other from spinning.
MAX_PASSES = 10


def _missing(wanted: list, have: list) -> list:
    return [item for item in wanted if item not in have]


def _reconciled(current: Object, wanted: Object) -> Object | None:
    """``current`` with what it lost of ``wanted``, or None when nothing is missing."""
    meta = current.get("metadata", {})
    if (meta.get("annotations") or {}).get(bootstrap.AUTOUPDATE) == "false":
        return None
    new = copy.deepcopy(current)
    new_meta = new.setdefault("metadata", {})
    for field in ("labels", "annotations"):
        merged = {**(wanted["metadata"].get(field) or {}), **(new_meta.get(field) or {})}
        new_meta[field] = merged
    if "aggregationRule" in wanted and not new.get("aggregationRule"):
        new["aggregationRule"] = wanted["aggregationRule"]
    if "rules" in wanted and "aggregationRule" not in wanted:
        new["rules"] = (new.get("rules") or []) + _missing(wanted["rules"],
                                                             new.get("rules") or [])
    if "subjects" in wanted:
        new["subjects"] = (new.get("subjects") or []) + _missing(wanted["subjects"],
                                                                   new.get("subjects") or [])
    return None if new == current else new


def reconciling(wanted: Object) -> Callable[[Object | None], Object]:
    """The patch that gives an object what it lost of ``wanted``."""

    def patch(current: Object | None) -> Object:
        # a patch that may not create: a missing object is the store's 404, never None here
        assert current is not None
        return _reconciled(current, wanted) or current

    return patch


class PolicyController:
    def __init__(self, stores: dict[str, RESTStore]) -> None:
        self.stores = stores  # by kind: ClusterRole, ClusterRoleBinding, Role, RoleBinding
        self.policy = [*bootstrap.CLUSTER_ROLES, *bootstrap.CLUSTER_ROLE_BINDINGS,
                       *bootstrap.ROLES, *bootstrap.ROLE_BINDINGS]

    async def ensure_all(self) -> None:
        for wanted in self.policy:
            await self.ensure(wanted)

    async def ensure(self, wanted: Object) -> None:
        store = self.stores[wanted["kind"]]
        meta = wanted["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        options = WriteOptions(manager=MANAGER)
        try:
            current = await store.get(namespace, name)
        except status.StatusError as err:
            if err.code != 404:
                raise
            await store.create(namespace, copy.deepcopy(wanted), options)
            log.info("created bootstrap RBAC object", kind=wanted["kind"], name=name)
            return
        if _reconciled(current, wanted) is not None:
            await store.patch(namespace, name, reconciling(wanted), options)
            log.info("reconciled bootstrap RBAC object", kind=wanted["kind"], name=name)

    async def run(self) -> None:
        """Recreate bootstrap objects as soon as someone deletes them."""
        await asyncio.gather(*(self._watch(kind) for kind in self.stores))

    async def _watch(self, kind: str) -> None:
        store = self.stores[kind]
        names = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                 for o in self.policy if o["kind"] == kind}
        await follow(store, lambda event: self._on_event(event, names), who="RBAC controller")

    async def _on_event(self, event: WatchEvent, names: dict) -> None:
        if event.type != EventType.DELETED or event.object is None:
            return
        meta = event.object.get("metadata", {})
        wanted = names.get((meta.get("namespace", ""), meta.get("name")))
        if wanted is not None:
            await self.ensure(wanted)


#: A test hook, never set in service: seconds each aggregation waits before it starts, so that
#: a test can see whether readiness waits for aggregation (tests/e2e/test_readiness.py:
#: without it, the later post-start hooks give aggregation time enough to hide one that
#: does not).
SLOW_AGGREGATION_ENV = "GATEWAY_TEST_SLOW_ROLE_AGGREGATION"


class AggregationController:
    def __init__(self, cluster_roles: RESTStore) -> None:
        self.store = cluster_roles
        self._dirty = asyncio.Event()
        self._test_delay = float(os.environ.get(SLOW_AGGREGATION_ENV) or 0)
        if self._test_delay:
            log.warning("cluster role aggregation slowed down for a test",
                        seconds=self._test_delay, variable=SLOW_AGGREGATION_ENV)

    async def run(self) -> None:
        worker = asyncio.ensure_future(self._work())
        try:
            await follow(self.store, self._on_event, initial=True, who="RBAC controller")
        finally:
            worker.cancel()

    async def _on_event(self, event: WatchEvent) -> None:
        self._dirty.set()

    async def _work(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(0.05)  # gather a burst of changes into one pass
            self._dirty.clear()
            try:
                await self.aggregate()
            except (StorageError, status.StatusError) as err:
                log.warning("cluster role aggregation failed", error=str(err))
                self._dirty.set()
                await asyncio.sleep(1)

    async def aggregate(self) -> None:
        """Bring every aggregated role up to date, until a pass changes nothing.

        One pass is not enough: ``admin`` aggregates ``edit``, which aggregates ``view``, and a
        pass in name order computes ``admin`` from the ``edit`` it is about to change. Each
        pass reads the cache, which holds this controller's own writes before they return."""
        if self._test_delay:
            await asyncio.sleep(self._test_delay)
        for _ in range(MAX_PASSES):
            if not await self._aggregate_once():
                return
        log.warning("cluster role aggregation did not settle", passes=MAX_PASSES)

    async def _aggregate_once(self) -> bool:
        """One pass over the aggregated roles; whether it changed any."""
        changed = False
        roles = sorted(self.store.cacher.objects(), key=lambda r: r["metadata"]["name"])
        for role in roles:
            rule = role.get("aggregationRule")
            if not rule:
                continue
            rules = _aggregated_rules(role, rule, roles)
            if rules != (role.get("rules") or []):
                name = role["metadata"]["name"]

                def update(current: Object | None, rules: list = rules) -> Object:
                    assert current is not None
                    return {**current, "rules": rules}

                await self.store.patch("", name, update, WriteOptions(manager=AGGREGATOR))
                changed = True
        return changed


def _aggregated_rules(role: Object, rule: Object, roles: list[Object]) -> list[Object]:
    selectors = [from_label_selector(s) for s in rule.get("clusterRoleSelectors") or []]
    rules: list[Object] = []
    for other in roles:
        if other is role or other["metadata"]["name"] == role["metadata"]["name"]:
            continue
        labels = other["metadata"].get("labels") or {}
        if any(s is not None and s.requirements and s.matches(labels) for s in selectors):
            rules += _missing(other.get("rules") or [], rules)
    return rules
