"""PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

Strategic merge patch follows the schema's patch metadata, as kube's does with its Go struct
tags: a list with ``x-kubernetes-patch-strategy: merge`` and a merge key is merged element by
element (``$patch: delete`` removes one, ``$patch: replace`` replaces the list), a merge list of
scalars is a union (``$deleteFromPrimitiveList/<field>`` removes values), ``$retainKeys`` keeps
only the named fields, ``$setElementOrder/<field>`` orders the result, and null deletes a field.
Server-side apply (application/apply-patch+yaml) is in fieldmanager.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from gateway.endpoints import status
from gateway.schema.walk import items_schema, property_schema, resolve

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def unsupported(content_type: str) -> status.StatusError:
    return status.StatusError(
        415, "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(PATCH_TYPES)} (got {content_type!r})",
    )


def apply_json_patch(current: dict, operations: Any) -> dict:
    if not isinstance(operations, list):
        raise status.bad_request("json patch must be a list of operations")
    try:
        result = jsonpatch.JsonPatch(operations).apply(current)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError,
            TypeError, ValueError) as err:
        # kube answers a patch that cannot be applied with 422
        raise status.StatusError(422, "Invalid", f"the server rejected our request due to an "
                                 f"error in our request: {err}") from None
    if not isinstance(result, dict):
        raise status.bad_request("json patch result is not an object")
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# -- strategic merge patch ----------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN = "$retainKeys"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def strategic_merge(target: Any, patch: Any, schema: dict) -> Any:
    """Apply a strategic merge patch to ``target`` along ``schema``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get(_DIRECTIVE) == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    if patch.get(_DIRECTIVE) == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    if _RETAIN in patch:
        keep = set(patch[_RETAIN] or [])
        result = {k: v for k, v in result.items() if k in keep}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN) or key.startswith(_ORDER):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
            continue
        sub = property_schema(schema, key) or {}
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, sub)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for key, order in patch.items():
        if key.startswith(_ORDER) and isinstance(result.get(key[len(_ORDER):]), list):
            field = key[len(_ORDER):]
            result[field] = _ordered(result[field], order, property_schema(schema, field) or {})
    return result


def _merge_list(current: Any, patch: list, schema: dict) -> list:
    resolved = resolve(schema)
    strategy = resolved.get("x-kubernetes-patch-strategy", "")
    if "merge" not in strategy.split(",") or not isinstance(current, list):
        if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
            return [p for p in patch if not (isinstance(p, dict) and _DIRECTIVE in p)]
        return [_strip_directives(p) for p in patch]
    key = resolved.get("x-kubernetes-patch-merge-key")
    if key is None:  # a merged list of scalars: a union
        return current + [v for v in patch if v not in current]
    items = items_schema(schema) or {}
    if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (
            isinstance(p, dict) and p.get(_DIRECTIVE) == "replace")]
    result = list(current)
    for element in patch:
        if not isinstance(element, dict):
            raise status.bad_request(f"strategic merge patch: list element {element!r} has no "
                                     f"merge key {key!r}")
        index = next((i for i, e in enumerate(result)
                      if isinstance(e, dict) and e.get(key) == element.get(key)), None)
        if element.get(_DIRECTIVE) == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(_strip_directives(element))
        else:
            result[index] = strategic_merge(result[index], element, items)
    return result


def _ordered(values: list, order: Any, schema: dict) -> list:
    key = resolve(schema).get("x-kubernetes-patch-merge-key")
    if not isinstance(order, list):
        return values

    def identity(value: Any) -> Any:
        return value.get(key) if key and isinstance(value, dict) else value

    wanted = [identity(o) for o in order]
    ranked = {v: i for i, v in enumerate(wanted) if isinstance(v, str | int | float | bool)}
    return sorted(values, key=lambda v: ranked.get(identity(v), len(ranked)))


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
