"""Small builders for OpenAPI schemas, so type definitions read like the Go types they mirror.

Schemas are OpenAPI v3 style dicts. A reference to another definition is ``{"$ref": NAME}``
with the bare definition name (``io.k8s.api.core.v1.ConfigMap``); gateway.schema.openapi
rewrites it for the document it is rendered into.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Schema = dict[str, Any]

#: Every named definition, by its kube name; filled as type modules are imported.
DEFINITIONS: dict[str, Schema] = {}

META = "io.k8s.apimachinery.pkg.apis.meta.v1"


def _described(schema: Schema, description: str) -> Schema:
    if description:
        schema["description"] = description
    return schema


def string(description: str = "", *, format: str | None = None,
           enum: list[str] | None = None, default: str | None = None) -> Schema:
    schema: Schema = {"type": "string"}
    if format:
        schema["format"] = format
    if enum:
        schema["enum"] = enum
    if default is not None:
        schema["default"] = default
    return _described(schema, description)


def integer(description: str = "", *, format: str = "int32", default: int | None = None) -> Schema:
    schema: Schema = {"type": "integer", "format": format}
    if default is not None:
        schema["default"] = default
    return _described(schema, description)


def boolean(description: str = "", *, default: bool | None = None) -> Schema:
    schema: Schema = {"type": "boolean"}
    if default is not None:
        schema["default"] = default
    return _described(schema, description)


def int_or_string(description: str = "") -> Schema:
    return _described({"$ref": "io.k8s.apimachinery.pkg.util.intstr.IntOrString"}, description)


def ref(name: str, description: str = "") -> Schema:
    return _described({"$ref": name}, description)


def meta_ref(name: str, description: str = "") -> Schema:
    return ref(f"{META}.{name}", description)


def map_of(values: Schema, description: str = "") -> Schema:
    return _described({"type": "object", "additionalProperties": values}, description)


def array(items: Schema, description: str = "", *, list_type: str | None = None,
          map_keys: list[str] | None = None, patch_strategy: str | None = None,
          merge_key: str | None = None) -> Schema:
    """A list; list_type is SSA's (atomic, set, map); patch_* is strategic merge patch's."""
    schema: Schema = {"type": "array", "items": items}
    if list_type:
        schema["x-kubernetes-list-type"] = list_type
    if map_keys:
        schema["x-kubernetes-list-map-keys"] = map_keys
    if patch_strategy:
        schema["x-kubernetes-patch-strategy"] = patch_strategy
    if merge_key:
        schema["x-kubernetes-patch-merge-key"] = merge_key
    return _described(schema, description)


def obj(description: str, fields: Mapping[str, Schema] | None = None, *,
        required: tuple[str, ...] = (), map_type: str | None = None,
        **properties: Schema) -> Schema:
    """An object's schema; ``fields`` are properties given as a mapping (made by a helper, or
    named what a Python keyword argument cannot be), first, then ``properties``."""
    if fields:
        properties = {**fields, **properties}
    schema: Schema = {"type": "object", "description": description}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    if map_type:
        schema["x-kubernetes-map-type"] = map_type
    return schema


def define(name: str, schema: Schema, *, gvk: tuple[str, str, str] | None = None) -> str:
    """Register ``schema`` as definition ``name`` (optionally a top-level kind)."""
    if gvk is not None:
        group, version, kind = gvk
        schema["x-kubernetes-group-version-kind"] = [
            {"group": group, "kind": kind, "version": version}
        ]
    DEFINITIONS[name] = schema
    return name


def kind_fields(kind_doc: str = "") -> dict[str, Schema]:
    """apiVersion and kind, as every top-level object has them."""
    return {
        "apiVersion": string("The API group and version the object is written in."),
        "kind": string("The kind of the object, in CamelCase." + (
            f" {kind_doc}" if kind_doc else "")),
    }


def define_kind(name: str, group: str, version: str, kind: str, description: str, *,
                required: tuple[str, ...] = (), **properties: Schema) -> str:
    """A top-level kind with apiVersion, kind and metadata, plus its List."""
    fields = {**kind_fields(), "metadata": meta_ref(
        "ObjectMeta", "The object's identity and bookkeeping."), **properties}
    define(name, obj(description, fields, required=required), gvk=(group, version, kind))
    list_fields = {
        **kind_fields(),
        "items": array(ref(name), f"Items is a list of {kind} objects."),
        "metadata": meta_ref("ListMeta", "The list's bookkeeping."),
    }
    define(f"{name}List", obj(f"{kind}List is a list of {kind} objects.", list_fields,
                              required=("items",)), gvk=(group, version, f"{kind}List"))
    return name
