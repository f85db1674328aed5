"""Walking an object along its schema: what kube-apiserver gets from decoding into Go types.

``check`` drops fields the schema does not know (reporting them for fieldValidation Warn or
Strict) and finds values of the wrong JSON type (a 400). ``node`` answers, for a path, the
schema there, so patch and apply can find list merge keys and list types.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from gateway.schema import times
from gateway.schema.dsl import DEFINITIONS, Schema

_TYPE_NAMES = {str: "string", bool: "boolean", int: "number", float: "number", list: "array",
               dict: "object"}


def resolve(schema: Schema | None) -> Schema:
    """Follow ``$ref``s to the schema itself; an unknown schema accepts anything."""
    seen = 0
    while schema is not None and isinstance(schema.get("$ref"), str):
        schema = DEFINITIONS.get(schema["$ref"])
        seen += 1
        if seen > 32:
            break
    return schema or {"x-kubernetes-preserve-unknown-fields": True}


def property_schema(schema: Schema, name: str) -> Schema | None:
    """The schema of field or map key ``name`` of an object schema."""
    schema = resolve(schema)
    props = schema.get("properties")
    if props is not None and name in props:
        return props[name]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    return None


def items_schema(schema: Schema) -> Schema | None:
    return resolve(schema).get("items")


def list_type(schema: Schema) -> str:
    """SSA's list type of an array schema: map, set, or atomic (the default)."""
    return resolve(schema).get("x-kubernetes-list-type", "atomic")


def is_map(schema: Schema) -> bool:
    """An object whose keys are data (additionalProperties), not declared fields."""
    resolved = resolve(schema)
    return "additionalProperties" in resolved and "properties" not in resolved


def is_atomic(schema: Schema) -> bool:
    resolved = resolve(schema)
    if resolved.get("x-kubernetes-map-type") == "atomic":
        return True
    if resolved.get("type") == "array":
        return list_type(resolved) == "atomic"
    return resolved.get("type") not in ("object", None) or (
        "properties" not in resolved and "additionalProperties" not in resolved
    )


@dataclass
class CheckResult:
    unknown: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _type_error(path: str, value: Any, expected: str) -> str:
    got = _TYPE_NAMES.get(type(value), type(value).__name__)
    return f"{path or 'body'}: expected {expected}, got {got}"


def check(value: Any, schema: Schema, path: str = "",
          result: CheckResult | None = None) -> CheckResult:
    """Drop unknown fields from ``value`` in place, write times as kube writes them, and
    report unknown fields and type errors."""
    result = result or CheckResult()
    _check(value, schema, path, result)
    return result


def _check(value: Any, schema: Schema, path: str, result: CheckResult) -> Any:
    """``value`` as kube would store it (times normalized); errors go to ``result``."""
    if value is None:
        return value
    moment = times.KINDS.get(schema.get("$ref", ""))
    if moment is not None:
        return _check_time(value, moment, path, result)
    schema = resolve(schema)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            result.errors.append(_type_error(path, value, "int or string"))
        return value
    kind = schema.get("type")
    if kind == "object":
        _check_object(value, schema, path, result)
    elif kind == "array":
        if not isinstance(value, list):
            result.errors.append(_type_error(path, value, "array"))
            return value
        items = schema.get("items") or {}
        for index, item in enumerate(value):
            value[index] = _check(item, items, f"{path}[{index}]", result)
    elif kind == "string":
        _check_string(value, schema, path, result)
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            result.errors.append(_type_error(path, value, "integer"))
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            result.errors.append(_type_error(path, value, "number"))
    elif kind == "boolean" and not isinstance(value, bool):
        result.errors.append(_type_error(path, value, "boolean"))
    return value


def _check_time(value: Any, moment: times.Precision, path: str, result: CheckResult) -> Any:
    if not isinstance(value, str):
        result.errors.append(_type_error(path, value, "string"))
        return value
    try:
        return times.normalized(value, moment)
    except ValueError as err:
        result.errors.append(str(err))
        return value


def _check_string(value: Any, schema: Schema, path: str, result: CheckResult) -> None:
    if not isinstance(value, str):
        result.errors.append(_type_error(path, value, "string"))
    elif schema.get("format") == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as err:
            result.errors.append(f"{path}: illegal base64 data ({err})")


def _check_object(value: Any, schema: Schema, path: str, result: CheckResult) -> None:
    if not isinstance(value, dict):
        result.errors.append(_type_error(path, value, "object"))
        return
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    if props is None and extra is None:
        return  # a free-form object (FieldsV1, RawExtension)
    for key in list(value):
        sub = props.get(key) if props is not None else None
        if sub is None and isinstance(extra, dict):
            sub = extra
        if sub is None:
            result.unknown.append(_path(path, key))
            del value[key]
            continue
        value[key] = _check(value[key], sub, _path(path, key), result)
