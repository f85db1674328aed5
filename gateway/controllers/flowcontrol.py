"""API Priority and Fairness configuration upkeep (kube-apiserver's
priority-and-fairness-config-producer hook and the status half of its config consumer).

- The mandatory FlowSchemas and PriorityLevelConfigurations (``exempt`` and ``catch-all`` of
  each kind) are created at start, and again whenever one is deleted.
- Every FlowSchema carries a ``Dangling`` condition saying whether the priority level it
  names exists, written through the status subresource with kube's field manager and words,
  so extension API servers (whose APF controller writes the same condition when it differs)
  find nothing to change.

The gateway does not classify or queue requests itself.
"""

from __future__ import annotations

import asyncio
import copy

import structlog

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apis.flowcontrol.resources import (
    MANDATORY_FLOW_SCHEMAS,
    MANDATORY_PRIORITY_LEVELS,
)
from gateway.registry.follow import follow
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.errors import StorageError
from gateway.storage.interface import Object

log = structlog.get_logger(__name__)
MANAGER = "api-priority-and-fairness-config-producer-v1"
STATUS_MANAGER = "api-priority-and-fairness-config-consumer-v1"


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


class FlowControlConfig:
    def __init__(self, flow_schemas: RESTStore, priority_levels: RESTStore) -> None:
        self.flow_schemas = flow_schemas
        self.priority_levels = priority_levels
        self._dirty = asyncio.Event()

    def _store(self, kind: str) -> RESTStore:
        return self.flow_schemas if kind == "FlowSchema" else self.priority_levels

    async def ensure_mandatory(self) -> None:
        """Create whichever mandatory object is missing (priority levels first)."""
        for wanted in (*MANDATORY_PRIORITY_LEVELS, *MANDATORY_FLOW_SCHEMAS):
            store, name = self._store(wanted["kind"]), wanted["metadata"]["name"]
            try:
                await store.get("", name)
                continue
            except status.StatusError as err:
                if err.code != 404:
                    raise
            try:
                await store.create("", copy.deepcopy(wanted), WriteOptions(manager=MANAGER))
                log.info("created mandatory APF configuration object", kind=wanted["kind"],
                         name=name)
            except status.StatusError as err:
                if err.code != 409:
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
        """Recreate deleted mandatory objects and keep Dangling conditions right."""
        worker = asyncio.ensure_future(self._work())
        try:
            await asyncio.gather(follow(self.flow_schemas, self._on_event, who="APF controller"),
                                 follow(self.priority_levels, self._on_event, who="APF controller"))
        finally:
            worker.cancel()

    async def _on_event(self, event) -> None:
        self._dirty.set()

    async def _work(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(0.05)  # one pass for a burst of changes
            self._dirty.clear()
            try:
                await self.ensure_mandatory()
                await self.sync_status()
            except (StorageError, status.StatusError) as err:
                log.warning("APF configuration upkeep failed", error=str(err))
                self._dirty.set()
                await asyncio.sleep(1)
