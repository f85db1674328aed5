"""x-kubernetes-list-type set and map: the uniqueness kube checks after the schema
(apiextensions-apiserver pkg/apiserver/schema/listtype/validation.go).

Scalars are told apart as Go's map keys tell them (1 and 1.0 differ), objects and lists by
their JSON encoding (where they do not). Only the second appearance of a value is reported.
"""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.schema._gofmt import go_json, go_kind, go_v, normalized
from gateway.apiextensions.schema._paths import child, index, key
from gateway.apimachinery.status import Cause

_UNSPECIFIED = object()


def _duplicate(path: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {go_v(value)}", path)


def _identity(value: Any) -> tuple:
    if value is _UNSPECIFIED:
        return ("unspecified",)
    value = normalized(value)
    kind = go_kind(value)
    if kind in ("map", "slice"):
        return ("json", go_json(value))
    return (kind, value)


def _repeated(values: list) -> list[int]:
    """The index of each value's second appearance (validateListSet)."""
    seen: dict[tuple, int] = {}
    out = []
    for i, value in enumerate(values):
        ident = _identity(value)
        seen[ident] = seen.get(ident, 0) + 1
        if seen[ident] == 2:
            out.append(i)
    return out


def _map_keys(path: str, schema: dict, items: list) -> list[Cause]:
    for i, item in enumerate(items):
        if item is not None and not isinstance(item, dict):
            return [Cause("FieldValueInvalid", f"Invalid value: {go_v(item)}: must be an object "
                          "for an array of list-type map", index(path, i))]
    names = [k for k in schema.get("x-kubernetes-list-map-keys") or [] if isinstance(k, str)]
    if len(items) <= 1:
        return []
    if len(names) == 1:
        keys = [_UNSPECIFIED if item is None or names[0] not in item else item[names[0]]
                for item in items]
        return [_duplicate(index(path, i), {} if keys[i] is _UNSPECIFIED
                           else {names[0]: keys[i]}) for i in _repeated(keys)]
    keys = [{n: item[n] for n in names if n in item} if item else {} for item in items]
    return [_duplicate(index(path, i), keys[i]) for i in _repeated(keys)]


def _array(path: str, schema: dict, items: list) -> list[Cause]:
    causes = []
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        causes += [_duplicate(index(path, i), items[i]) for i in _repeated(items)]
    elif list_type == "map":
        causes += _map_keys(path, schema, items)
    element = schema.get("items")
    if isinstance(element, dict):
        for i, item in enumerate(items):
            causes += _value(index(path, i), element, item)
    return causes


def _value(path: str, schema: dict, value: Any) -> list[Cause]:
    if isinstance(value, list):
        return _array(path, schema, value)
    if isinstance(value, dict):
        return list_causes(schema, value, path)
    return []


def list_causes(schema: Any, obj: Any, path: str = "") -> list[Cause]:
    """ValidateListSetsAndMaps: duplicates in sets, duplicate keys in maps, anywhere below the
    object (through properties, additionalProperties and items)."""
    if not isinstance(schema, dict) or not isinstance(obj, dict):
        return []
    causes = []
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    additional = schema.get("additionalProperties")
    for name in sorted(obj):
        if isinstance(additional, dict):
            causes += _value(key(path, name), additional, obj[name])
        if isinstance(properties.get(name), dict):
            causes += _value(child(path, name), properties[name], obj[name])
    return causes
