"""core/v1 events, kept for --event-ttl after their last write, then removed."""

from __future__ import annotations

from gateway.endpoints.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import Column, since
from gateway.registry.validation import required

SELECTABLE = (
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
)


class EventStrategy(Strategy):
    selectable_fields = SELECTABLE

    def validate(self, obj: Object) -> list[Cause]:
        involved = obj.get("involvedObject")
        if not involved:
            return [required("involvedObject")]
        namespace = obj.get("metadata", {}).get("namespace", "")
        if involved.get("namespace") and namespace and involved["namespace"] != namespace:
            return [Cause("FieldValueInvalid", f'Invalid value: "{involved["namespace"]}": '
                          "does not match event.namespace", "involvedObject.namespace")]
        return []

    def field_set(self, obj: Object) -> dict[str, str]:
        involved = obj.get("involvedObject") or {}
        fields = {f"involvedObject.{k}": str(involved.get(k, "")) for k in (
            "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}
        source = obj.get("reportingComponent") or (obj.get("source") or {}).get("component", "")
        fields.update(reason=obj.get("reason", ""), type=obj.get("type", ""),
                      reportingComponent=obj.get("reportingComponent", ""), source=source)
        return fields


def last_seen(obj: Object) -> str | None:
    series = obj.get("series") or {}
    return (series.get("lastObservedTime") or obj.get("lastTimestamp")
            or obj.get("eventTime") or obj.get("metadata", {}).get("creationTimestamp"))


def _first_seen(obj: Object) -> str | None:
    return obj.get("firstTimestamp") or obj.get("eventTime") or \
        obj.get("metadata", {}).get("creationTimestamp")


def _object(obj: Object) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{(involved.get('kind') or '').lower()}/{involved.get('name', '')}"


def _source(obj: Object) -> str:
    source = obj.get("source") or {}
    parts = [source.get("component") or obj.get("reportingComponent", "")]
    if source.get("host"):
        parts.append(source["host"])
    return ", ".join(p for p in parts if p)


EVENTS = ResourceDef(
    group="", version="v1", kind="Event", plural="events", singular="event", namespaced=True,
    strategy=EventStrategy(), short_names=("ev",),
    columns=(
        Column("Last Seen", "string", "When the event was last seen.",
               lambda o: since(last_seen(o))),
        Column("Type", "string", "Normal or Warning.", lambda o: o.get("type", "")),
        Column("Reason", "string", "Why the event happened.", lambda o: o.get("reason", "")),
        Column("Object", "string", "The object the event is about.", _object),
        Column("Subobject", "string", "The part of the object.",
               lambda o: (o.get("involvedObject") or {}).get("fieldPath", ""), priority=1),
        Column("Source", "string", "What reported the event.", _source, priority=1),
        Column("Message", "string", "What happened.", lambda o: o.get("message", "")),
        Column("First Seen", "string", "When the event was first seen.",
               lambda o: since(_first_seen(o)), priority=1),
        Column("Count", "integer", "How many times it happened.",
               lambda o: o.get("count") or (o.get("series") or {}).get("count") or 1,
               priority=1),
        Column("Name", "string", "Name of the event.",
               lambda o: o.get("metadata", {}).get("name", ""), format="name", priority=1),
    ),
    schema="io.k8s.api.core.v1.Event",
)
