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
from aiohttp import web

from gateway.apimachinery import status
from gateway.schema.walk import items_schema, property_schema, resolve

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def unsupported(request: web.BaseRequest) -> status.StatusError:
    """A PATCH whose Content-Type is no patch type. kube's PATCH route consumes only the patch
    types, so its router (go-restful) refuses the request before the handler sees it: 415 for
    a body of known length, and, for a body of unknown (chunked) or zero length, the answer
    its Accept matching falls through to, with no representations to offer."""
    length = request.headers.get("Content-Length")
    if length is None:
        return status.route_unsupported_media_type(
            "415: Unsupported Media Type\n\nAvailable representations: ")
    if request.content_length:
        return status.route_unsupported_media_type()
    return status.route_not_acceptable("406: Not Acceptable\n\nAvailable representations: ")


def apply_json_patch(current: dict, operations: Any) -> dict:
    if not isinstance(operations, list):
        raise status.bad_request("json patch must be a list of operations")
    try:
        result = jsonpatch.JsonPatch(operations).apply(current)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError,
            TypeError, ValueError):
        # kube's NewGenericServerResponse(422): a fixed message, the library's error left out
        raise status.StatusError(422, "Invalid", "the server rejected our request due to an "
                                 "error in our request") from None
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
    live = dict(result)  # the lists as they were: $setElementOrder keeps live-only items so
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
            result[field] = _ordered(result[field], order, live.get(field),
                                     property_schema(schema, field) or {})
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
        merged = _unique(current + patch)
        return _normalize_order(merged, patch, current, None)
    if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
        # kube's mergeSliceWithSpecialElements: the list is the patch's plain elements
        return [_strip_directives(p) for p in patch if not (
            isinstance(p, dict) and _DIRECTIVE in p)]
    for element in patch:
        if not isinstance(element, dict):
            raise status.bad_request(f"strategic merge patch: list element {element!r} has no "
                                     f"merge key {key!r}")
    # kube's mergeSliceWithSpecialElements: every deletion first (of all matches), then merges
    deleted = [e.get(key) for e in patch if e.get(_DIRECTIVE) == "delete"]
    live = [e for e in current if not (isinstance(e, dict) and e.get(key) in deleted)]
    elements = [e for e in patch if e.get(_DIRECTIVE) != "delete"]
    return _normalize_order(_merge_by_key(live, elements, key, items_schema(schema) or {}),
                            elements, live, key)


def _merge_by_key(live: list, patch: list, key: str, items: dict) -> list:
    """Merge each patch element into the live element with its merge key, or append it."""
    result = list(live)
    for element in patch:
        index = next((i for i, e in enumerate(result)
                      if isinstance(e, dict) and e.get(key) == element.get(key)), None)
        if index is None:
            result.append(_strip_directives(element))
        else:
            result[index] = strategic_merge(result[index], element, items)
    return result


def _unique(values: list) -> list:
    """The values without repeats (kube's deduplicateScalars; the order is set afterwards)."""
    out: list = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _ordered(values: list, order: Any, live: Any, schema: dict) -> list:
    """$setElementOrder: the listed items in that order, the live-only ones around them."""
    if not isinstance(order, list):
        return values
    key = resolve(schema).get("x-kubernetes-patch-merge-key")
    return _normalize_order(values, order, live if isinstance(live, list) else [], key)


def _normalize_order(merged: list, order: list, live: list, key: str | None) -> list:
    """Order a merged list as kube's mergeSlice does (partition*ByPresentInList, then
    normalizeElementOrder), which clients rely on: the items ``order`` names follow ``order``,
    the others (live-only) keep their live order and are woven in among them. An item the live
    list did not have therefore goes before the live-only items not yet placed."""
    wanted = [_identity(o, key) for o in order]
    server = [_identity(v, key) for v in live]
    ordered = [v for v in merged if _identity(v, key) in wanted]
    server_only = [v for v in merged if _identity(v, key) not in wanted]
    ordered.sort(key=lambda v: _position(wanted, _identity(v, key)))
    server_only.sort(key=lambda v: _position(server, _identity(v, key)))
    return _merge_sorted(server_only, ordered, server, key)


def _merge_sorted(server_only: list, ordered: list, server: list, key: str | None) -> list:
    """kube's mergeSortedSlice: take the next live-only item first only when it and the next
    ordered item are both in the live list and it comes first there."""
    out, i, j = [], 0, 0
    while i < len(server_only) and j < len(ordered):
        left = _position(server, _identity(server_only[i], key), missing=-1)
        right = _position(server, _identity(ordered[j], key), missing=-1)
        if 0 <= left < right:
            out.append(server_only[i])
            i += 1
        else:
            out.append(ordered[j])
            j += 1
    return out + server_only[i:] + ordered[j:]


def _identity(value: Any, key: str | None) -> Any:
    """What list items are matched by: the merge key's value, or a scalar itself."""
    return value.get(key) if key and isinstance(value, dict) else value


def _position(values: list, value: Any, missing: int | None = None) -> int:
    """The index of ``value`` in ``values``; ``missing`` (default: past the end) when absent."""
    for i, v in enumerate(values):
        if v == value:
            return i
    return len(values) if missing is None else missing


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
