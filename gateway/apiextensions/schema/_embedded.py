"""x-kubernetes-embedded-resource objects: their TypeMeta and ObjectMeta.

Validation follows apiextensions-apiserver's schema/objectmeta/validation.go (apiVersion and
kind required and well formed, metadata valid as ObjectMeta with a path-segment name);
coercion follows objectmeta/algorithm.go and coerce.go (the metadata is read into a
metav1.ObjectMeta and written back, so unknown fields go and empty ones are dropped).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from gateway.apiextensions.schema._gofmt import go_json_float, go_kind, go_v, is_int
from gateway.apiextensions.schema._paths import child, index, key
from gateway.apimachinery.labels import label_value_errors, qualified_name_errors
from gateway.apimachinery.status import Cause
from gateway.registry.validation import (
    dns1035_label_errors,
    dns1123_label_errors,
    go_value,
    required,
    too_long,
)

EMBEDDED = "x-kubernetes-embedded-resource"

#: metav1.ObjectMeta's JSON fields and their Go types (as json's errors name them).
_META_FIELDS = {
    "name": "string", "generateName": "string", "namespace": "string", "selfLink": "string",
    "uid": "types.UID", "resourceVersion": "string", "generation": "int64",
    "creationTimestamp": "time", "deletionTimestamp": "time",
    "deletionGracePeriodSeconds": "int64", "labels": "map[string]string",
    "annotations": "map[string]string", "ownerReferences": "[]v1.OwnerReference",
    "finalizers": "[]string", "managedFields": "[]v1.ManagedFieldsEntry",
}
#: Fields written back even when empty (no omitempty): OwnerReference's four.
_OWNER_FIELDS = {"apiVersion": "string", "kind": "string", "name": "string", "uid": "types.UID",
                 "controller": "bool", "blockOwnerDeletion": "bool"}
_MANAGED_FIELDS = {"manager": "string", "operation": "v1.ManagedFieldsOperationType",
                   "apiVersion": "string", "time": "time", "fieldsType": "string",
                   "fieldsV1": "raw", "subresource": "string"}
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})",
                      re.ASCII)
_ANNOTATIONS_LIMIT = 256 * 1024


def walk(schema: Any, obj: Any, path: str) -> Iterator[tuple[str, dict]]:
    """Every embedded resource in ``obj`` with its field.Path, following properties,
    additionalProperties (keys in brackets) and items."""
    if not isinstance(schema, dict):
        return
    if isinstance(obj, dict):
        if schema.get(EMBEDDED) is True:
            yield path, obj
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        additional = schema.get("additionalProperties")
        for name in sorted(obj):
            if name in properties:
                yield from walk(properties[name], obj[name], child(path, name))
            elif additional is not None:
                yield from walk(additional, obj[name], key(path, name))
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from walk(schema.get("items"), item, index(path, i))


# -- reading metadata as ObjectMeta --------------------------------------------------------------


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return {"string": "string", "slice": "array", "map": "object"}.get(go_kind(value), "null")


def _type_error(value: Any, struct: str, name: str, go_type: str) -> str:
    shown = _json_kind(value)
    if shown == "number" and go_type == "int64":
        shown = f"number {go_json_float(float(value)) if not is_int(value) else value}"
    return f"json: cannot unmarshal {shown} into Go struct field {struct}.{name} of type {go_type}"


def _check(value: Any, go_type: str) -> bool:
    """Whether encoding/json fills a field of ``go_type`` from ``value`` (null always)."""
    if value is None or go_type == "raw":
        return True
    if go_type in ("string", "types.UID", "v1.ManagedFieldsOperationType", "time"):
        return isinstance(value, str)
    if go_type == "bool":
        return isinstance(value, bool)
    if go_type == "int64":
        return is_int(value) or (go_kind(value) == "float64" and value == int(value)
                                 and is_int(int(value)))
    if go_type == "map[string]string":
        return isinstance(value, dict) and all(isinstance(v, str | None) for v in value.values())
    if go_type == "[]string":
        return isinstance(value, list) and all(isinstance(v, str | None) for v in value)
    return isinstance(value, list) and all(isinstance(v, dict | None) for v in value)


def _time_error(value: str) -> str | None:
    match = _RFC3339.fullmatch(value)
    if match and 1 <= int(match[2]) <= 12 and 1 <= int(match[3]) <= 31 and int(match[4]) < 24 \
            and int(match[5]) < 60 and int(match[6]) < 60:
        return None
    return f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" ' \
           'as "2006"'


def _struct_error(obj: dict, fields: dict[str, str], struct: str, prefix: str) -> str | None:
    for name, go_type in fields.items():
        if name not in obj:
            continue
        value = obj[name]
        if not _check(value, go_type):
            return _type_error(value, struct, prefix + name,
                               "string" if go_type == "time" else go_type)
        if go_type == "time" and isinstance(value, str) and (error := _time_error(value)):
            return error
    return None


def meta_error(meta: Any) -> str | None:
    """The error json.Unmarshal gives for the metadata as a metav1.ObjectMeta, or None."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return f"json: cannot unmarshal {_json_kind(meta)} into Go value of type v1.ObjectMeta"
    if error := _struct_error(meta, _META_FIELDS, "ObjectMeta", ""):
        return error
    for item in meta.get("ownerReferences") or []:
        if item and (error := _struct_error(item, _OWNER_FIELDS, "OwnerReference",
                                            "ownerReferences.")):
            return error
    for item in meta.get("managedFields") or []:
        if item and (error := _struct_error(item, _MANAGED_FIELDS, "ManagedFieldsEntry",
                                            "managedFields.")):
            return error
    return None


# -- validation --------------------------------------------------------------------------------


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {go_v(value)}: {detail}", path)


def _path_segment_errors(name: str, prefix: bool) -> list[str]:
    """path.ValidatePathSegmentName: not "." or "..", no "/" and no "%"."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def _namespace_errors(name: str) -> list[str]:
    """validation.IsDNS1123Label, which says "must not contain dots" of a subdomain."""
    errors = dns1123_label_errors(name)
    subdomain = re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                             name)
    if subdomain and len(errors) and errors[-1].startswith("a lowercase RFC 1123 label"):
        errors[-1] = "must not contain dots"
    return errors


def _each(path: str, values: list[str], check: Callable[[str], list[str]]) -> list[Cause]:
    return [_invalid(path, value, error) for value in values for error in check(value)]


def _owner_causes(owners: list, path: str) -> list[Cause]:
    causes = []
    controllers = []
    for owner in owners:
        owner = owner or {}
        api_version = owner.get("apiVersion") or ""
        version = api_version.rpartition("/")[2] if api_version.count("/") <= 1 else ""
        for name, bad, detail in (("apiVersion", not version, "version must not be empty"),
                                  ("kind", not owner.get("kind"), "kind must not be empty"),
                                  ("name", not owner.get("name"), "name must not be empty"),
                                  ("uid", not owner.get("uid"), "uid must not be empty")):
            if bad:
                causes.append(_invalid(child(path, name), owner.get(name) or "", detail))
        if owner.get("controller") is True:
            controllers.append(f"{owner.get('kind') or ''}/{owner.get('name') or ''}")
            if len(controllers) > 1:
                causes.append(_invalid(path, owners, "Only one reference can have Controller set "
                                       f'to true. Found "true" in references for {controllers[0]}'
                                       f" and {controllers[-1]}"))
    return causes


def _finalizer_causes(finalizers: list, path: str) -> list[Cause]:
    names = [f or "" for f in finalizers]
    causes = _each(path, names, qualified_name_errors)
    if "orphan" in names and "foregroundDeletion" in names:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {go_value(names)}: finalizer "
                            "orphan and foregroundDeletion cannot be both set", path))
    return causes


def _manager_causes(manager: str, path: str) -> list[Cause]:
    """ValidateFieldManager: at most 128 bytes, printable characters only (%#U, byte offset)."""
    causes = [too_long(path, 128)] if len(manager.encode()) > 128 else []
    offset = 0
    for char in manager:
        if not char.isprintable() and char != " ":
            causes.append(_invalid(path, manager, f"invalid character U+{ord(char):04X} "
                                   f"(at position {offset})"))
        offset += len(char.encode("utf-8", "surrogatepass"))
    return causes


def _managed_causes(entries: list, path: str) -> list[Cause]:
    causes = []
    for i, entry in enumerate(entries):
        entry, at = entry or {}, index(path, i)
        if entry.get("operation") not in ("Apply", "Update"):
            causes.append(_invalid(child(at, "operation"), entry.get("operation") or "",
                                   "must be `Apply` or `Update`"))
        if entry.get("fieldsType") and entry["fieldsType"] != "FieldsV1":
            causes.append(_invalid(child(at, "fieldsType"), entry["fieldsType"],
                                   "must be `FieldsV1`"))
        causes += _manager_causes(entry.get("manager") or "", child(at, "manager"))
        if len((entry.get("subresource") or "").encode()) > 256:
            causes.append(too_long(child(at, "subresource"), 256))
    return causes


def object_meta_causes(meta: dict, path: str) -> list[Cause]:
    """ValidateObjectMeta with path.ValidatePathSegmentName, an empty name taken as
    "fakename", and a namespace checked only when one is set."""
    causes = []
    if generate_name := meta.get("generateName") or "":
        causes += _each(child(path, "generateName"), [generate_name],
                        lambda n: _path_segment_errors(n, True))
    causes += _each(child(path, "name"), [meta.get("name") or "fakename"],
                    lambda n: _path_segment_errors(n, False))
    if namespace := meta.get("namespace") or "":
        causes += _each(child(path, "namespace"), [namespace], _namespace_errors)
    generation = int(meta.get("generation") or 0)
    if generation < 0:
        causes.append(_invalid(child(path, "generation"), generation,
                               "must be greater than or equal to 0"))
    labels = meta.get("labels") or {}
    for name in sorted(labels):
        causes += _each(child(path, "labels"), [name], qualified_name_errors)
        causes += _each(child(path, "labels"), [labels[name] or ""], label_value_errors)
    annotations = meta.get("annotations") or {}
    for name in sorted(annotations):
        causes += [_invalid(child(path, "annotations"), name, error)
                   for error in qualified_name_errors(name.lower())]
    if sum(len(k.encode()) + len((v or "").encode()) for k, v in annotations.items()) > \
            _ANNOTATIONS_LIMIT:
        causes.append(too_long(child(path, "annotations"), _ANNOTATIONS_LIMIT))
    causes += _owner_causes(meta.get("ownerReferences") or [], child(path, "ownerReferences"))
    causes += _finalizer_causes(meta.get("finalizers") or [], child(path, "finalizers"))
    causes += _managed_causes(meta.get("managedFields") or [], child(path, "managedFields"))
    return causes


def _api_version_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    return f"unexpected GroupVersion string: {value}" if value.count("/") > 1 else None


def _kind_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    errors = dns1035_label_errors(value.lower())
    return "may have mixed case, but should otherwise match: " + ",".join(errors) \
        if errors else None


def resource_causes(obj: dict, path: str) -> list[Cause]:
    """validateEmbeddedResource: apiVersion and kind required (metadata is not)."""
    causes = [required(child(path, name), "must not be empty")
              for name in ("apiVersion", "kind") if name not in obj]
    for name, check in (("apiVersion", _api_version_error), ("kind", _kind_error)):
        if name in obj and (error := check(obj[name])):
            causes.append(_invalid(child(path, name), obj[name], error))
    if "metadata" in obj:
        meta = obj["metadata"]
        if error := meta_error(meta):
            causes.append(_invalid(child(path, "metadata"), meta, error))
        else:
            causes += object_meta_causes(meta or {}, child(path, "metadata"))
    return causes


def embedded_causes(schema: Any, obj: Any, path: str = "") -> list[Cause]:
    """schemaobjectmeta.Validate(path, obj, schema, false): every object the schema marks as
    an embedded resource (the root is not one unless its schema says so)."""
    causes = []
    for at, resource in walk(schema, obj, path):
        causes += resource_causes(resource, at)
    return causes
