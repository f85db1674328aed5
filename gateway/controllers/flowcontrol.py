"""API Priority and Fairness configuration upkeep (kube-apiserver's
priority-and-fairness-config-producer hook, and the status half of its config consumer).

- The bootstrap objects (gateway/apis/flowcontrol/bootstrap.py) are kept as kube keeps them,
  at start, whenever a configuration object changes, and every minute:
  - a missing one is created (mandatory or suggested: nothing tells a deletion apart from a
    fresh store);
  - a mandatory one gets its fixed spec back (the ``exempt`` level keeps its ``spec.exempt``);
  - a suggested one gets the shipped spec back while its ``apf.kubernetes.io/autoupdate-spec``
    annotation says ``"true"`` (or, without a readable annotation, while the operator has
    not changed it: generation 1); the annotation is set to what was decided;
  - an object carrying the annotation ``"true"`` that is not one of them (one a former
    version shipped) is deleted.
- Every FlowSchema carries a ``Dangling`` condition saying whether the priority level it
  names exists, written through the status subresource with kube's field manager and words,
  so extension API servers (whose APF controller writes the same condition when it differs)
  find nothing to change.
"""

from __future__ import annotations

import asyncio
import copy

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apis.flowcontrol.bootstrap import (
    AUTOUPDATE,
    BOOTSTRAP,
    EXEMPT,
    MANDATORY_FLOW_SCHEMAS,
    MANDATORY_PRIORITY_LEVELS,
    SUGGESTED_FLOW_SCHEMAS,
    SUGGESTED_PRIORITY_LEVELS,
)
from gateway.apis.flowcontrol.resources import default_priority_level, semantic
from gateway.registry.follow import follow
from gateway.registry.store import DeleteOptions, RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import Object, WatchEvent

log = structlog.get_logger(__name__)
MANAGER = "api-priority-and-fairness-config-producer-v1"
STATUS_MANAGER = "api-priority-and-fairness-config-consumer-v1"
#: How often the bootstrap objects are looked at without a change to prompt it (kube's).
ENSURE_PERIOD = 60.0

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _parse_bool(value: object) -> bool | None:
    """Go's strconv.ParseBool; None when it is not a boolean."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def dangling_condition(flow_schema: Object, levels: set[str]) -> dict:
    """The Dangling condition kube's APF controller wants on ``flow_schema`` (no time)."""
    name = ((flow_schema.get("spec") or {}).get("priorityLevelConfiguration") or {}).get(
        "name", "")
    if name in levels:
        return {"type": "Dangling", "status": "False", "reason": "Found",
                "message": f"This FlowSchema references the PriorityLevelConfiguration "
                           f"object named \"{name}\" and it exists"}
    return {"type": "Dangling", "status": "True", "reason": "NotFound",
            "message": f"This FlowSchema references the PriorityLevelConfiguration object "
                       f"named \"{name}\" but there is no such object"}


def _current_dangling(flow_schema: Object) -> dict | None:
    for condition in (flow_schema.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Dangling":
            return condition
    return None


def _spec_differs(wanted: Object, current: Object) -> bool:
    """Whether ``current``'s spec is not the bootstrap one (both as defaulted; the exempt
    level's ``spec.exempt`` is the operator's)."""
    want = copy.deepcopy(wanted["spec"])
    have = current.get("spec") or {}
    if wanted["kind"] == "PriorityLevelConfiguration":
        default_priority_level(want)
        if wanted["metadata"]["name"] == EXEMPT:
            if have.get("exempt") is None:
                return True
            want["exempt"] = have["exempt"]
    return semantic(want) != semantic(have)


def revised(wanted: Object, current: Object, always: bool) -> Object | None:
    """``current`` as kube's ensure strategy leaves it (``always``: a mandatory object), or
    None when it is fine as it is."""
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    auto = always
    if not auto:
        given = _parse_bool(annotations.get(AUTOUPDATE))
        auto = given if given is not None else \
            (current.get("metadata") or {}).get("generation") == 1
    update_annotation = _parse_bool(annotations.get(AUTOUPDATE)) != auto
    change_spec = auto and _spec_differs(wanted, current)
    if not (update_annotation or change_spec):
        return None
    new = copy.deepcopy(current)
    meta = new.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           AUTOUPDATE: "true" if auto else "false"}
    if change_spec:
        spec = copy.deepcopy(wanted["spec"])
        if wanted["metadata"]["name"] == EXEMPT and wanted["kind"] != "FlowSchema":
            spec["exempt"] = copy.deepcopy((current.get("spec") or {}).get("exempt"))
        new["spec"] = spec
    return new


class FlowControlConfig:
    def __init__(self, flow_schemas: RESTStore, priority_levels: RESTStore) -> None:
        self.flow_schemas = flow_schemas
        self.priority_levels = priority_levels
        self._dirty = asyncio.Event()

    def _store(self, kind: str) -> RESTStore:
        return self.flow_schemas if kind == "FlowSchema" else self.priority_levels

    async def ensure(self) -> None:
        """Create or restore the bootstrap objects, suggested then mandatory (priority levels
        before the schemas that name them), and delete the retired ones."""
        for wanted in (*SUGGESTED_PRIORITY_LEVELS, *SUGGESTED_FLOW_SCHEMAS):
            await self._ensure(wanted, always=False)
        for wanted in (*MANDATORY_PRIORITY_LEVELS, *MANDATORY_FLOW_SCHEMAS):
            await self._ensure(wanted, always=True)
        await self._remove_retired()

    async def _ensure(self, wanted: Object, *, always: bool) -> None:
        store, name = self._store(wanted["kind"]), wanted["metadata"]["name"]
        try:
            current = await store.get("", name)
        except status.StatusError as err:
            if err.code != 404:
                raise
            try:
                await store.create("", copy.deepcopy(wanted), WriteOptions(manager=MANAGER))
                log.info("created APF configuration object", kind=wanted["kind"], name=name,
                         type="mandatory" if always else "suggested")
            except status.StatusError as err:
                if err.code != 409:
                    raise
            return
        new = revised(wanted, current, always)
        if new is None:
            return
        try:
            await store.update("", name, new, WriteOptions(manager=MANAGER))
            log.info("updated APF configuration object", kind=wanted["kind"], name=name,
                     type="mandatory" if always else "suggested")
        except status.StatusError as err:
            if err.code not in (404, 409):  # changed meanwhile: its event is on the way
                raise

    async def _remove_retired(self) -> None:
        for store, kind in ((self.flow_schemas, "FlowSchema"),
                            (self.priority_levels, "PriorityLevelConfiguration")):
            for obj in list(store.cacher.objects(store.resource.storage_prefix)):
                meta = obj.get("metadata") or {}
                name = meta.get("name") or ""
                annotations = meta.get("annotations") or {}
                if (kind, name) in BOOTSTRAP or AUTOUPDATE not in annotations:
                    continue
                if _parse_bool(annotations[AUTOUPDATE]) is not True:
                    continue  # kept: the operator's, or needs a look
                try:
                    await store.delete("", name, DeleteOptions(), WriteOptions(manager=MANAGER))
                    log.info("deleted a retired APF configuration object", kind=kind,
                             name=name)
                except status.StatusError as err:
                    if err.code != 404:
                        raise

    async def sync_status(self) -> None:
        """Give every FlowSchema the Dangling condition it should have."""
        levels = {o["metadata"]["name"] for o in self.priority_levels.cacher.objects()}
        for flow_schema in list(self.flow_schemas.cacher.objects()):
            wanted = dangling_condition(flow_schema, levels)
            current = _current_dangling(flow_schema)
            if current is not None and all(current.get(k) == wanted[k]
                                           for k in ("status", "reason", "message")):
                continue
            await self._write_condition(flow_schema["metadata"]["name"], wanted)

    async def _write_condition(self, name: str, wanted: dict) -> None:
        condition = {**wanted, "lastTransitionTime": now_rfc3339()}

        def update(current: Object | None) -> Object:
            assert current is not None
            new = copy.deepcopy(current)
            conditions = [c for c in (new.get("status") or {}).get("conditions") or []
                          if c.get("type") != "Dangling"]
            new["status"] = {**(new.get("status") or {}), "conditions": [*conditions,
                                                                          condition]}
            return new

        try:
            await self.flow_schemas.patch("", name, update, WriteOptions(
                manager=STATUS_MANAGER, subresource="status"))
        except status.StatusError as err:
            if err.code != 404:  # deleted meanwhile: its event is on the way
                raise

    async def run(self) -> None:
        """Keep the bootstrap objects and the Dangling conditions right."""
        worker = asyncio.ensure_future(self._work())
        ticker = asyncio.ensure_future(self._tick())
        try:
            await asyncio.gather(follow(self.flow_schemas, self._on_event, who="APF controller"),
                                 follow(self.priority_levels, self._on_event, who="APF controller"))
        finally:
            worker.cancel()
            ticker.cancel()

    async def _on_event(self, event: WatchEvent) -> None:
        self._dirty.set()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(ENSURE_PERIOD)
            self._dirty.set()

    async def _work(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(0.05)  # one pass for a burst of changes
            self._dirty.clear()
            try:
                await self.ensure()
                await self.sync_status()
            except (StorageError, status.StatusError) as err:
                log.warning("APF configuration upkeep failed", error=str(err))
                self._dirty.set()
                await asyncio.sleep(1)
