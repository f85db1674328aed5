"""An embedded resource's metadata written back as kube writes a metav1.ObjectMeta
(objectmeta.GetObjectMetaWithOptions then SetObjectMeta): unknown fields dropped and reported
as json's strict decoding names them, empty fields dropped (omitempty), timestamps in UTC to
the second, a zero creationTimestamp removed. Only called on metadata that decodes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.apiextensions.schema._embedded import _MANAGED_FIELDS, _META_FIELDS, _OWNER_FIELDS

#: OwnerReference's fields without omitempty: written even when empty.
_OWNER_KEPT = frozenset({"apiVersion", "kind", "name", "uid"})
_ZERO_TIME = "0001-01-01T00:00:00Z"
#: Pointer fields: omitted when null only.
_POINTERS = {"deletionGracePeriodSeconds", "deletionTimestamp", "controller",
             "blockOwnerDeletion", "time", "fieldsV1"}


def _utc(value: str) -> str:
    """metav1.Time's MarshalJSON: RFC 3339 in UTC, whole seconds."""
    try:
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return value
    if moment.tzinfo is None:
        return value
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _empty(value: Any) -> bool:
    """Go's zero values (a zero time included), which omitempty leaves out."""
    return value is None or value in ("", _ZERO_TIME) or value == {} or value == [] or \
        (not isinstance(value, bool) and value == 0)


def _normal(value: Any, go_type: str) -> Any:
    if go_type == "time" and isinstance(value, str):
        return _utc(value)
    if go_type == "int64" and isinstance(value, float):
        return int(value)
    if go_type == "map[string]string" and isinstance(value, dict):
        return {k: v or "" for k, v in value.items()}
    if go_type == "[]string" and isinstance(value, list):
        return [v or "" for v in value]
    return value


def _struct(obj: dict, fields: dict[str, str], path: str, found: list[str],
            kept: frozenset[str] = frozenset()) -> None:
    """One struct round trip, in place: unknown keys reported and dropped, the rest
    normalized, empty omitempty fields dropped, fields without omitempty always written."""
    for name in list(obj):
        if name not in fields:
            found.append(f"{path}.{name}")
            del obj[name]
            continue
        value = obj[name] = _normal(obj[name], fields[name])
        if name not in kept and (value is None if name in _POINTERS else _empty(value)):
            del obj[name]
    for name in kept:
        obj[name] = obj.get(name) or ""


def coerce_meta(meta: dict, path: str) -> list[str]:
    """The metadata at ``path`` round-tripped in place; the unknown fields' paths."""
    found: list[str] = []
    for name in list(meta):
        if name not in _META_FIELDS:
            found.append(f"{path}.{name}")
            del meta[name]
    for name, item_fields in (("ownerReferences", _OWNER_FIELDS),
                              ("managedFields", _MANAGED_FIELDS)):
        items = meta.get(name)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if item is None:
                items[i] = item = {}
            kept = _OWNER_KEPT if item_fields is _OWNER_FIELDS else frozenset()
            _struct(item, item_fields, f"{path}.{name}[{i}]", found, kept)
    _struct(meta, _META_FIELDS, path, found)
    return found
