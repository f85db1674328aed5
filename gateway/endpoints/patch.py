"""PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

Strategic merge patch follows the schema's patch metadata, as kube's does with its Go struct
tags: a list with ``x-kubernetes-patch-strategy: merge`` and a merge key is merged element by
element (``$patch: delete`` removes one, ``$patch: replace`` replaces the list), a merge list of
scalars is a union (``$deleteFromPrimitiveList/<field>`` removes values), ``$retainKeys`` keeps
only the named fields, ``$setElementOrder/<field>`` orders the result, and null deletes a field.
Server-side apply (application/apply-patch+yaml) is in fieldmanager.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import yaml
from aiohttp import web
from orjson import OPT_SORT_KEYS, dumps

from gateway.apimachinery import status
from gateway.apimachinery.gowords import (
    TYPE_META_STRUCT,
    go_print,
    go_quote,
    json_kind,
    json_patch_shape_error,
)
from gateway.apimachinery.objects import copy_object
from gateway.apimachinery.strictjson import (
    Findings,
    json_pairs,
    json_patch_findings,
    may_have_duplicates,
    yaml_load,
)
from gateway.endpoints.request import (
    JSONError,
    load_json,
    yaml_syntax_error,
)
from gateway.schema.walk import items_schema, property_schema, resolve

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)
#: kube refuses a JSON patch of more operations (413).
MAX_JSON_PATCH_OPERATIONS = 10000
_GO_MAP = "map[string]interface {}"


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


@dataclass
class Parsed:
    """A patch body read as kube's patcher for its type reads it."""

    patch_type: str
    document: Any = None
    #: Strict decoding errors of the patch itself (reported with the patched object's).
    findings: Findings = field(default_factory=Findings)
    #: A body kube cannot use, answered once the object to patch is known to exist (kube
    #: reads the patch only when it applies it to the current object).
    error: status.StatusError | None = None
    #: Server-side apply: go-yaml's strict error for duplicate keys ("" when none).
    yaml_problem: str = ""

    def shown(self, patched: list[str]) -> str:
        """The value kube's strict decoding error names: the patched object's JSON (JSON and
        merge patches), or the patch as Go prints its map (strategic merge patch)."""
        if self.patch_type == STRATEGIC_PATCH:
            return go_print(self.document)
        return patched[0] if patched else ""

    def report_apply_duplicates(self, validation: str, warnings: list[str]) -> None:
        """kube's apply checks the configuration again with go-yaml's strict mode, after
        applying it: a 400 under Strict, a warning under Warn."""
        if not self.yaml_problem or validation == "Ignore":
            return
        problem = f"error converting YAML to JSON: {self.yaml_problem}"
        if validation == "Strict":
            raise status.bad_request(f"error strict decoding YAML: {problem}")
        if problem not in warnings:
            warnings.append(problem)


def parse(body: bytes, patch_type: str, validation: str) -> Parsed:
    """Read a patch body in kube's words for each patch type; duplicate fields (and a JSON
    patch's unknown ones) are looked for under the Warn and Strict field validations."""
    strict = validation != "Ignore"
    parsed = Parsed(patch_type)
    if patch_type == APPLY_PATCH:
        try:
            document, parsed.yaml_problem = yaml_load(body, strict=strict)
        except yaml.YAMLError as err:
            raise status.bad_request("error decoding YAML: error converting YAML to JSON: "
                                     + yaml_syntax_error(err)) from None
        if document is not None and not isinstance(document, dict):
            raise status.bad_request(
                "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: "
                f"cannot unmarshal {json_kind(document)} into Go value of type {_GO_MAP}")
        parsed.document = document or {}
        return parsed
    try:
        document = load_json(body)
    except JSONError as err:
        if patch_type == MERGE_PATCH and not strict:
            parsed.error = status.bad_request("Invalid JSON Patch")
        elif patch_type == STRATEGIC_PATCH or not strict:
            parsed.error = status.bad_request(str(err))
        else:
            parsed.error = status.bad_request(f"error decoding patch: {err}")
        return parsed
    if document is None:  # Go decodes null into an empty patch
        document = [] if patch_type == JSON_PATCH else {}
    if patch_type == JSON_PATCH:
        parsed.error = _operations_error(document, strict)
        if strict and parsed.error is None:
            parsed.findings = json_patch_findings(body, document)
    else:
        if not isinstance(document, dict):
            parsed.error = _not_a_map(document, patch_type, strict)
        elif strict and may_have_duplicates(body, document):
            parsed.findings = json_pairs(body, merge=False)[1]
    parsed.document = document
    return parsed


def _operations_error(document: Any, strict: bool) -> status.StatusError | None:
    """What Go's decoder says of a JSON patch that is no list of operations: kube's strict
    decoding into its own operation type first, else evanphx/json-patch's."""
    if strict:
        if not isinstance(document, list):
            return status.bad_request(f"error decoding patch: json: cannot unmarshal "
                                      f"{json_kind(document)} into Go value of type "
                                      "[]handlers.jsonPatchOp")
        for operation in document:
            if not isinstance(operation, dict):
                return status.bad_request(f"error decoding patch: json: cannot unmarshal "
                                          f"{json_kind(operation)} into Go value of type "
                                          "handlers.jsonPatchOp")
            for key in ("op", "path", "from"):
                value = operation.get(key)
                if value is not None and not isinstance(value, str):
                    return status.bad_request(
                        f"error decoding patch: json: cannot unmarshal {json_kind(value)} "
                        f"into Go struct field jsonPatchOp.{key} of type string")
        return None
    shape = json_patch_shape_error(document)
    return status.bad_request(shape) if shape else None


def _not_a_map(document: Any, patch_type: str, strict: bool) -> status.StatusError:
    """A merge or strategic merge patch that is no JSON object."""
    unmarshal = f"json: cannot unmarshal {json_kind(document)} into Go value of type {_GO_MAP}"
    if patch_type == STRATEGIC_PATCH:
        return status.bad_request(unmarshal)
    if strict:
        return status.bad_request(f"error decoding patch: {unmarshal}")
    if not isinstance(document, list):  # evanphx/json-patch takes a list as the result
        return status.bad_request("Invalid JSON Patch")
    shown = patched_json(document)
    return status.invalid("", "", [status.Cause(
        "FieldValueInvalid", f"Invalid value: {go_quote(shown)}: couldn't get "
        f"version/kind; json parse error: json: cannot unmarshal array into Go value of type "
        f"{TYPE_META_STRUCT}", "patch")])


def patched_json(obj: Any) -> str:
    """The patched object as kube's patch library writes it for its errors (compact JSON,
    an object's keys sorted as Go writes a map)."""
    return dumps(obj, option=OPT_SORT_KEYS).decode()


def apply_json_patch(current: dict, operations: Any) -> dict:
    if not isinstance(operations, list):  # refused when parsed
        raise status.bad_request("json: cannot unmarshal object into Go value of type "
                                 "jsonpatch.Patch")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise status.StatusError(413, "RequestEntityTooLarge", "Request entity too large: The "
                                 f"allowed maximum operations in a JSON patch is "
                                 f"{MAX_JSON_PATCH_OPERATIONS}, got {len(operations)}")
    try:
        result = jsonpatch.JsonPatch(operations).apply(current)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError,
            TypeError, ValueError, IndexError, AttributeError):
        # kube's NewGenericServerResponse(422, ...): its fixed message and an empty details
        # object, the patch library's own error left out
        raise status.StatusError(422, "Invalid", "the server rejected our request due to an "
                                 "error in our request", always_details=True) from None
    if not isinstance(result, dict):
        raise status.bad_request("json patch result is not an object")
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy_object(patch)
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


#: mergepatch's errors that kube's PATCH answers with 400 (interpretStrategicMergePatchError).
BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
BAD_ELEMENT_ORDER = "invalid patch format of setElementOrder list"


def _directive_errors(patch: dict) -> None:
    """The directives' shapes, as kube's mergeMap checks them before merging: a 400 in
    mergepatch's words for a $retainKeys, $deleteFromPrimitiveList or $setElementOrder that is
    no list (or a patch field $retainKeys does not name), and kube's own 500 for a $patch in
    a map that is neither replace nor delete (ErrBadPatchType, which its PATCH handler passes
    on as an internal error)."""
    directive = patch.get(_DIRECTIVE)
    if directive is not None and directive not in ("replace", "delete"):
        raise status.internal_error(f"Unknown patch type: {go_print(directive)} in map: "
                                    f"{go_print(patch)}")
    if _RETAIN in patch:
        keep = patch[_RETAIN]
        # (an element that is a list or an object is a panic in Go: refused here instead)
        if keep is not None and not (isinstance(keep, list) and not any(
                isinstance(k, list | dict) for k in keep)):
            raise status.bad_request(BAD_RETAIN_KEYS)
        named = set(keep or [])
        if any(value is not None and key not in named and not key.startswith(
                (_DELETE_PRIMITIVE, _ORDER, _DIRECTIVE, _RETAIN)) for key, value in patch.items()):
            raise status.bad_request(BAD_RETAIN_KEYS)
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE) and value is not None and not isinstance(
                value, list):
            raise status.bad_request(BAD_PRIMITIVE_LIST)
        if key.startswith(_ORDER) and value is not None and not isinstance(value, list):
            raise status.bad_request(BAD_ELEMENT_ORDER)


def strategic_merge(target: Any, patch: Any, schema: dict) -> Any:
    """Apply a strategic merge patch to ``target`` along ``schema``."""
    if not isinstance(patch, dict):
        return copy_object(patch)
    _directive_errors(patch)
    if patch.get(_DIRECTIVE) == "replace":
        return {k: copy_object(v) for k, v in patch.items() if k != _DIRECTIVE}
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
            current = result.get(field)
            if isinstance(current, list):  # nothing to delete from otherwise
                result[field] = [v for v in current if v not in (value or [])]
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
