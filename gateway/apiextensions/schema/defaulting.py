"""Structural defaulting of custom resources (apiextensions-apiserver
pkg/apiserver/schema/defaulting/algorithm.go), applied on the way in and on every read from
storage.

A property with a default is set when it is missing, or when it is null and the property is
not nullable; map values (additionalProperties) and list items that are such nulls get their
schema's default too. Defaulting then goes down into properties, additionalProperties and
items, x-kubernetes-preserve-unknown-fields or not (fields the schema does not specify have no
defaults). Defaults are deep-copied. A default of null is no default.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["apply_defaults"]


def _schema(value: Any) -> dict | None:
    return value if isinstance(value, dict) else None


def _default_for_null(value: Any, schema: dict | None) -> bool:
    """isNonNullableNull: a null where the schema does not allow one."""
    return value is None and schema is not None and schema.get("nullable") is not True


def apply_defaults(obj: Any, schema: dict) -> None:
    """Default ``obj`` in place from ``schema`` (structural.Default)."""
    schema = _schema(schema)
    if schema is None:
        return
    if isinstance(obj, dict):
        _default_object(obj, schema)
    elif isinstance(obj, list):
        items = _schema(schema.get("items"))
        for i, item in enumerate(obj):
            if _default_for_null(item, items):
                obj[i] = item = copy.deepcopy(items.get("default"))
            apply_defaults(item, items)


def _default_object(obj: dict, schema: dict) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for name, prop in properties.items():
        prop = _schema(prop)
        if prop is None or prop.get("default") is None:
            continue
        if name not in obj or _default_for_null(obj[name], prop):
            obj[name] = copy.deepcopy(prop["default"])
    additional = _schema(schema.get("additionalProperties"))
    for name in list(obj):
        if name in properties:
            apply_defaults(obj[name], _schema(properties[name]))
        elif additional is not None:
            if _default_for_null(obj[name], additional):
                obj[name] = copy.deepcopy(additional.get("default"))
            apply_defaults(obj[name], additional)
