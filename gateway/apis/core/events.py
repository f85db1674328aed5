"""core/v1 events, kept for --event-ttl after their last write, then removed."""

from __future__ import annotations

from gateway.apimachinery.labels import qualified_name_errors
from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import Column, since
from gateway.registry.validation import dns1123_subdomain_errors, invalid, required

SELECTABLE = (
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
)


class EventStrategy(Strategy):
    selectable_fields = SELECTABLE

    def validate(self, obj: Object) -> list[Cause]:
        """ValidateEventCreate for a request through the core v1 API: the legacy rules only."""
        return legacy_event_causes(obj)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return legacy_event_causes(new)

    def field_set(self, obj: Object) -> dict[str, str]:
        involved = obj.get("involvedObject") or {}
        fields = {f"involvedObject.{k}": str(involved.get(k, "")) for k in (
            "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}
        source = obj.get("reportingComponent") or (obj.get("source") or {}).get("component", "")
        fields.update(reason=obj.get("reason", ""), type=obj.get("type", ""),
                      reportingComponent=obj.get("reportingComponent", ""), source=source)
        return fields


#: The legacy limits on the fields of an event that has an eventTime.
REPORTING_INSTANCE_MAX = ACTION_MAX = REASON_MAX = 128
NOTE_MAX = 1024


def legacy_event_causes(event: Object) -> list[Cause]:
    """legacyValidateEvent. An event without eventTime (the old kind) must name its
    involvedObject's namespace, or leave it empty in the default namespace; one with an
    eventTime may leave it empty in default and kube-system, and needs a reporting controller,
    instance, action and reason of bounded lengths."""
    namespace = event.get("metadata", {}).get("namespace", "")
    involved = (event.get("involvedObject") or {}).get("namespace") or ""
    path = "involvedObject.namespace"
    causes: list[Cause] = []
    if not event.get("eventTime"):
        if (not involved and namespace not in ("", "default")) or (
                involved and involved != namespace):
            causes.append(invalid(path, involved, "does not match event.namespace"))
    else:
        if not involved and namespace not in ("default", "kube-system"):
            causes.append(invalid(path, involved, "does not match event.namespace"))
        controller = event.get("reportingComponent") or ""
        if not controller:
            causes.append(required("reportingController"))
        causes += [invalid("reportingController", controller, e)
                   for e in qualified_name_errors(controller)]
        for field, limit in (("reportingInstance", REPORTING_INSTANCE_MAX),
                             ("action", ACTION_MAX), ("reason", REASON_MAX)):
            value = event.get(field) or ""
            if not value:
                causes.append(required(field))
            if len(value.encode()) > limit:
                causes.append(invalid(field, "", f"can have at most {limit} characters"))
        if len((event.get("message") or "").encode()) > NOTE_MAX:
            causes.append(invalid("message", "", f"can have at most {NOTE_MAX} characters"))
    return causes + [invalid("namespace", namespace, e)
                     for e in dns1123_subdomain_errors(namespace)]


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
