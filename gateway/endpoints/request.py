"""Reading a request: the body (bounded, JSON or YAML) and the common query parameters."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import yaml
from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.gowords import (
    TYPE_META_STRUCT,
    go_quote,
    json_kind,
    json_syntax_error,
    parse_int,
    without_lone_surrogates,
)
from gateway.apimachinery.strictjson import (
    Findings,
    json_pairs,
    may_have_duplicates,
    yaml_load,
)
from gateway.endpoints.protobuf import PROTOBUF, decode_body
from gateway.storage.codec import loads

#: kube-apiserver refuses request bodies over 3 MiB.
MAX_BODY_BYTES = 3 * 1024 * 1024

JSON_TYPES = frozenset({"application/json", ""})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})


def too_large() -> status.StatusError:
    return status.StatusError(413, "RequestEntityTooLarge",
                              "Request entity too large: limit is 3145728")


async def read_body(request: web.BaseRequest, limit: int = MAX_BODY_BYTES) -> bytes:
    """The whole body, refusing (413) anything over ``limit`` without reading it all."""
    length = request.content_length
    if length is not None:
        if length > limit:
            raise too_large()
        try:  # the common case: one read of the length the client declared
            return await request.content.readexactly(length)
        except asyncio.IncompleteReadError as err:
            return err.partial  # the client closed early: what came is the body
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def body_media_type(request: web.BaseRequest) -> str:
    """The request's media type; a missing Content-Type means JSON, as in kube-apiserver."""
    raw = request.headers.get("Content-Type", "")
    return raw.split(";", 1)[0].strip().lower()


def _summary(body: bytes, limit: int = 30) -> str:
    """kube's summary of a body it cannot read: the text of a JSON object, hex otherwise."""
    if not body:
        return "<empty>"
    cut = body[:limit]
    text = cut.decode("utf-8", "replace") if body[:1] == b"{" else cut.hex()
    return text + " ..." if len(body) > limit else text


def _type_meta_error(obj: Any) -> str:
    """What Go's encoding/json says when ``obj`` does not fit kube's TypeMeta probe."""
    if not isinstance(obj, dict):
        return f"json: cannot unmarshal {json_kind(obj)} into Go value of type {TYPE_META_STRUCT}"
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            return (f"json: cannot unmarshal {json_kind(value)} into Go struct field "
                    f".{key} of type string")
    return ""


def unrecognized(kind: str, error: str, body: bytes) -> status.StatusError:
    """kube's answer to a body it cannot even find the kind of (400)."""
    return status.bad_request(f"the object provided is unrecognized (must be of type {kind}): "
                              f"{error} ({_summary(body)})")


#: What a resource without protobuf (a custom resource) reads.
JSON_OR_YAML = ("application/json", "application/yaml")


class JSONError(ValueError):
    """A body that is not JSON; the message is encoding/json's."""


def load_json(body: bytes) -> Any:
    """The JSON value of ``body`` (orjson; the standard library for what orjson refuses and Go
    takes: integers past 64 bits, text that is not UTF-8), or JSONError in Go's words."""
    try:
        return loads(body)  # the common case; Go's words are looked for only on failure
    except ValueError:
        syntax = json_syntax_error(body)
        if syntax:
            raise JSONError(syntax) from None
    try:  # orjson refuses lone surrogates, which Go reads as U+FFFD
        return without_lone_surrogates(json.loads(body.decode("utf-8", "replace")))
    except ValueError:
        raise JSONError("unexpected end of JSON input") from None


def decode_object(body: bytes, content_type: str, kind: str = "", *,
                  protobuf: bool = True) -> dict[str, Any]:
    """A JSON or YAML object from a request body (400 when it is not one; 415 other types,
    and protobuf for a resource that has none). With ``kind`` (the kind the request is
    for), a body that does not decode is answered in kube's words for that kind."""
    return decode_strict(body, content_type, kind, protobuf=protobuf)[0]


def decode_strict(body: bytes, content_type: str, kind: str = "", *, protobuf: bool = True,
                  typed: bool = True, strict: bool = True) -> tuple[dict[str, Any], Findings]:
    """``decode_object``, and what kube's strict decoding finds in the body (duplicate
    fields, looked for only when ``strict``). A JSON body with duplicates decodes as Go's
    decoder does: the last value wins, objects merging when ``typed`` (a built-in kind)."""
    findings = Findings()
    if content_type == PROTOBUF:
        if not protobuf:
            raise status.unsupported_media_type(JSON_OR_YAML)
        return decode_body(body), findings
    if content_type in YAML_TYPES:
        try:
            obj, problem = yaml_load(body, strict=strict)
        except yaml.YAMLError as err:
            if kind:
                raise unrecognized(kind, yaml_syntax_error(err), body) from None
            raise status.bad_request(f"error converting YAML to JSON: {yaml_syntax_error(err)}") \
                from None
        if problem:
            findings.leading.append(problem)
    elif content_type in JSON_TYPES:
        try:
            obj = load_json(body)
        except JSONError as err:
            if kind:
                raise unrecognized(kind, f"couldn't get version/kind; json parse error: "
                                         f"{err}", body) from None
            raise status.bad_request(f"couldn't get version/kind; json parse error: {err}") \
                from None
        if may_have_duplicates(body, obj):  # rare: parsed once more, key by key
            obj, findings = json_pairs(body, merge=typed)
            if not strict:
                findings = Findings()
    else:
        raise status.unsupported_media_type()
    problem = _type_meta_error(obj) if obj is not None else ""
    if problem and kind:
        raise unrecognized(kind, f"couldn't get version/kind; json parse error: {problem}", body)
    if not isinstance(obj, dict):
        raise status.bad_request("the request body must be a JSON or YAML object")
    return obj, findings


def yaml_syntax_error(err: yaml.YAMLError) -> str:
    """A YAML syntax error in the shape of go-yaml's ("yaml: line N: problem"); the problem is
    PyYAML's description, which words some problems differently from go-yaml."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or "unknown problem parsing YAML content"
    return f"yaml: line {mark.line + 1}: {problem}" if mark is not None else f"yaml: {problem}"


#: metav1.DeleteOptions' fields and their Go types (Preconditions' under "preconditions").
_DELETE_OPTIONS: dict[str, Any] = {
    "kind": "string", "apiVersion": "string", "gracePeriodSeconds": "int64",
    "preconditions": {"uid": "types.UID", "resourceVersion": "string"},
    "orphanDependents": "bool", "propagationPolicy": "v1.DeletionPropagation",
    "dryRun": "[]string", "ignoreStoreReadErrorWithClusterBreakingPotential": "bool",
}
_INT64 = range(-(1 << 63), 1 << 63)


def _go_type_error(value: Any, go_type: Any, path: str) -> str:
    """Go's first UnmarshalTypeError for ``value`` decoded into a DeleteOptions field of
    ``go_type`` at ``path`` ("" when it fits; null fits anything, as Go leaves the field)."""
    if value is None:
        return ""
    found = json_kind(value)
    where = f"json: cannot unmarshal {{}} into Go struct field DeleteOptions.{path} of type "
    if isinstance(go_type, dict):
        if found != "object":
            return where.format(found) + "v1.Preconditions"
        for key, item in value.items():
            if key in go_type and (error := _go_type_error(item, go_type[key], f"{path}.{key}")):
                return error
        return ""
    if go_type == "[]string":
        if found != "array":
            return where.format(found) + go_type
        for item in value:
            if item is not None and not isinstance(item, str):
                return where.format(json_kind(item)) + "string"
        return ""
    if go_type == "int64":
        if found == "number" and isinstance(value, int) and value in _INT64:
            return ""
        shown = f"number {json.dumps(value)}" if found == "number" else found
        return where.format(shown) + go_type
    wanted = "bool" if go_type == "bool" else "string"
    return "" if found == wanted else where.format(found) + go_type


def delete_options_error(given: dict[str, Any]) -> str:
    """What kube's decoder says of a DeleteOptions body whose fields have the wrong JSON types:
    a wrong apiVersion or kind first (its version/kind probe), then the first field in the
    document that does not fit ("" when all fit). kube 1.32 answers these with a 500; kube
    1.35 with a 400 (kubernetes#133358), as the gateway does."""
    for key in ("apiVersion", "kind"):
        value = given.get(key)
        if value is not None and not isinstance(value, str):
            return (f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                    f"{json_kind(value)} into Go struct field .{key} of type string")
    for key, value in given.items():
        if key in _DELETE_OPTIONS and (error := _go_type_error(value, _DELETE_OPTIONS[key], key)):
            return error
    return ""


def dry_run_cause(values: list[str]) -> status.Cause | None:
    """metav1 ValidateDryRun: every value must be "All"; kube shows the list as the Go slice
    it is ([]string{"Sometimes"})."""
    if all(value == "All" for value in values):
        return None
    shown = "[]string{" + ", ".join(go_quote(v) for v in values) + "}"
    return status.Cause("FieldValueNotSupported",
                        f'Unsupported value: {shown}: supported values: "All"', "dryRun")


def int64_param(request: web.BaseRequest, name: str) -> int | None:
    """A query parameter read as kube's parameter codec reads it, with strconv.ParseInt
    (None when absent; present but empty is an error, as in Go); 400 with Go's error."""
    raw = request.query.get(name)
    if raw is None:
        return None
    value, error = parse_int(raw)
    if value is None:
        raise status.bad_request(error)
    return value
