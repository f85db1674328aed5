"""Custom resources in /openapi/v2 and /openapi/v3, as apiextensions-apiserver v1.32 publishes
them (pkg/controller/openapi/builder, pkg/controller/openapi/v2 and pkg/apiserver/schema).

A served CRD version's ``openAPIV3Schema`` (``ResourceDef.definition``) becomes two definitions
named after the group reversed, the version and the kind (and the list kind):

- the schema as its structural form writes it back (``ToKubeOpenAPI``): only what a
  structural schema keeps (no ``example``, no ``externalDocs``; false, empty and null values
  left out; nested value validations without ``additionalProperties``), with
  ``x-kubernetes-int-or-string`` unfolded into its ``anyOf`` of integer and string, then
  ``apiVersion`` and ``kind`` (TypeMeta's), ``metadata`` as a reference to ObjectMeta, the
  same three in every ``x-kubernetes-embedded-resource`` object, and the extensions
  ``x-kubernetes-group-version-kind`` and ``x-kubernetes-selectable-fields``. A version with
  no schema, or one that is not structural, is ``{"type": "object"}`` with those extensions.
- for /openapi/v2 the schema first goes through ``ToStructuralOpenAPIV2``: no ``allOf``,
  ``anyOf``, ``oneOf`` or ``not``; a nullable value loses its type, items and properties (and
  its name leaves its parent's ``required``); a value that preserves unknown fields loses its
  items and properties (and type object); an array left without items loses its type. A root
  that preserves unknown fields is published as ``{"type": "object"}`` alone, and every
  ``default`` is pruned from the v2 definitions.
- the list: ``items`` (required) referencing the kind, ``metadata`` referencing ListMeta,
  ``apiVersion`` and ``kind``.

Definitions come out rendered for the document (refs with its prefix, v3 refs with siblings
wrapped in ``allOf``); they are never walked for references, so a ``default``, ``enum`` or
property named ``$ref`` inside a CRD schema stays what it is.
"""

from __future__ import annotations

import copy
from typing import Any

from gateway.registry.resource import ResourceDef
from gateway.schema.dsl import DEFINITIONS, META, define, kind_fields, meta_ref, obj, ref, string

Schema = dict[str, Any]

OBJECT_META = f"{META}.ObjectMeta"
LIST_META = f"{META}.ListMeta"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
#: kube's descriptions of a custom resource's metadata and its list's (PartialObjectMetadata's).
METADATA_DOC = f"Standard object's metadata. More info: {CONVENTIONS}#metadata"
LIST_METADATA_DOC = f"Standard list metadata. More info: {CONVENTIONS}#types-kinds"
EMBEDDED_API_VERSION_DOC = ("apiVersion defines the versioned schema of this representation of "
                            f"an object. More info: {CONVENTIONS}#resources")
EMBEDDED_KIND_DOC = ("kind is a string value representing the type of this object. In "
                     f"CamelCase. More info: {CONVENTIONS}#types-kinds")
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


# -- autoscaling/v1 Scale (what a CRD's scale subresource reads and writes) -----------------------

if SCALE not in DEFINITIONS:
    define(f"{SCALE}Spec", obj(
        "The desired size of a scalable resource.",
        replicas={"type": "integer", "format": "int32",
                  "description": "How many instances the scaled object should have."}))
    define(f"{SCALE}Status", obj(
        "The observed size of a scalable resource.", required=("replicas",),
        replicas={"type": "integer", "format": "int32",
                  "description": "How many instances of the scaled object were observed."},
        selector=string("The label selector of the pods counted in replicas, in the query "
                        "parameter form (a=b,c in (d))."),
    ))
    define(SCALE, obj(
        "A request to resize a resource, and what its size is.", kind_fields(),
        metadata=meta_ref("ObjectMeta", "The object's identity and bookkeeping."),
        spec=ref(f"{SCALE}Spec", "The size wanted."),
        status=ref(f"{SCALE}Status", "The size observed. Read-only."),
    ), gvk=("autoscaling", "v1", "Scale"))


# -- which resources, which names ---------------------------------------------------------------


def is_custom(resource: ResourceDef) -> bool:
    """A kind whose schema a CRD gives (not in the process-wide table of definitions)."""
    return resource.definition is not None or (
        bool(resource.schema) and resource.schema not in DEFINITIONS)


def list_definition_name(resource: ResourceDef) -> str:
    """The list's definition: a CRD's is named after its list kind (kube's
    ``<group reversed>.<version>.<listKind>``), a built-in's is ``<kind's name>List``."""
    if is_custom(resource):
        return f"{resource.schema.rpartition('.')[0]}.{resource.list_kind}"
    return resource.schema + "List"


def referenced(resource: ResourceDef) -> list[str]:
    """The table's definitions a custom resource's definitions and paths refer to."""
    names = [OBJECT_META, LIST_META]
    if "scale" in resource.subresources:
        names.append(SCALE)
    return names


def definitions(resource: ResourceDef, *, v2: bool) -> dict[str, Schema]:
    """The kind's and its list's definitions, ready for the v2 or v3 document."""
    prefix = "#/definitions/" if v2 else "#/components/schemas/"
    kind = _kind_schema(resource, v2, prefix)
    listed = _list_schema(resource, v2, prefix)
    if v2:
        _prune_defaults(kind)
    return {resource.schema: kind, list_definition_name(resource): listed}


def _selectable_fields(resource: ResourceDef) -> list[dict[str, str]]:
    """x-kubernetes-selectable-fields: kube 1.32 writes it on every custom resource's
    definitions, empty when the version names none."""
    served = getattr(resource.strategy, "served", None)
    paths = getattr(served, "selectable_fields", None)
    if paths is None:
        paths = resource.strategy.selectable_fields
    return [{"fieldPath": path.removeprefix(".")} for path in paths]


def _gvk(resource: ResourceDef, kind: str) -> list[dict[str, str]]:
    return [{"group": resource.group, "kind": kind, "version": resource.version}]


def _ref(name: str, prefix: str, v2: bool, description: str) -> Schema:
    if v2:
        return {"$ref": prefix + name, "description": description}
    return {"allOf": [{"$ref": prefix + name}], "description": description}


def _type_meta() -> dict[str, Schema]:
    return kind_fields()


def _kind_schema(resource: ResourceDef, v2: bool, prefix: str) -> Schema:
    schema = resource.definition if resource.publish_definition else None
    if schema is None or (v2 and schema.get("x-kubernetes-preserve-unknown-fields") is True):
        # kubectl would take anything beyond these as all there is
        out: Schema = {"type": "object"}
    else:
        out = structural(schema)
        unfold(out)
        if v2:
            to_openapi_v2(out)
        properties = out.setdefault("properties", {})
        properties["metadata"] = _ref(OBJECT_META, prefix, v2, METADATA_DOC)
        properties.update(_type_meta())
        _embedded(out, v2, prefix)
    out["x-kubernetes-group-version-kind"] = _gvk(resource, resource.kind)
    out["x-kubernetes-selectable-fields"] = _selectable_fields(resource)
    return out


def _list_schema(resource: ResourceDef, v2: bool, prefix: str) -> Schema:
    return {
        "type": "object",
        "description": f"{resource.list_kind} is a list of {resource.kind}",
        "required": ["items"],
        "properties": {
            "items": {"type": "array", "items": {"$ref": prefix + resource.schema},
                      "description": f"List of {resource.plural}. More info: {CONVENTIONS}"},
            "metadata": _ref(LIST_META, prefix, v2, LIST_METADATA_DOC),
            **_type_meta(),
        },
        "x-kubernetes-group-version-kind": _gvk(resource, resource.list_kind),
        "x-kubernetes-selectable-fields": _selectable_fields(resource),
    }


# -- the structural form of a schema ------------------------------------------------------------


_STRINGS = frozenset({"type", "description", "title", "format", "pattern"})
_TRUE_ONLY = frozenset({"nullable", "exclusiveMaximum", "exclusiveMinimum", "uniqueItems",
                        "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                        "x-kubernetes-int-or-string"})
_NUMBERS = frozenset({"maximum", "minimum", "multipleOf"})
_COUNTS = frozenset({"maxLength", "minLength", "maxItems", "minItems", "maxProperties",
                     "minProperties"})
_LISTS = frozenset({"enum", "required", "x-kubernetes-list-map-keys"})
_POINTERS = frozenset({"x-kubernetes-list-type", "x-kubernetes-map-type"})
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_RULE_FIELDS = ("rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf")


def _scalar(key: str, value: Any) -> tuple[bool, Any]:
    """Whether the structural schema keeps ``key: value``, and as what."""
    if key in _STRINGS:
        return isinstance(value, str) and value != "", value
    if key in _TRUE_ONLY:
        return value is True, value
    if key in _NUMBERS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        return True, int(value) if isinstance(value, float) and value.is_integer() else value
    if key in _COUNTS:
        return isinstance(value, int) and not isinstance(value, bool), value
    if key in _LISTS:
        return isinstance(value, list) and bool(value), copy.deepcopy(value)
    if key in _POINTERS:
        return isinstance(value, str), value
    if key == "default":
        return value is not None, copy.deepcopy(value)
    if key == "x-kubernetes-validations":
        rules = [_rule(r) for r in value if isinstance(r, dict)] if isinstance(value, list) \
            else []
        return bool(rules), rules
    return False, value


def _rule(rule: Schema) -> Schema:
    out = {"rule": rule.get("rule", "")}
    for key in _RULE_FIELDS[1:]:
        value = rule.get(key)
        if value is not None and value != "":
            out[key] = value
    return out


def _junctors(schema: Schema, out: Schema) -> None:
    for key in _JUNCTORS:
        clauses = schema.get(key)
        if isinstance(clauses, list) and clauses:
            out[key] = [_nested(c) for c in clauses if isinstance(c, dict)]
    if isinstance(schema.get("not"), dict):
        out["not"] = _nested(schema["not"])


def structural(schema: Schema) -> Schema:
    """``schema`` as kube's structural schema writes it back (NewStructural, then
    ToKubeOpenAPI)."""
    out: Schema = {}
    for key, value in schema.items():
        if key == "items":
            if isinstance(value, dict):
                out[key] = structural(value)
        elif key == "properties":
            if isinstance(value, dict) and value:
                out[key] = {name: structural(v) for name, v in value.items()
                            if isinstance(v, dict)}
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out[key] = structural(value)
            elif isinstance(value, bool):
                out[key] = value
        elif key in _JUNCTORS or key == "not":
            continue
        else:
            keep, kept = _scalar(key, value)
            if keep:
                out[key] = kept
    _junctors(schema, out)
    return out


def _nested(schema: Schema) -> Schema:
    """A clause of allOf/anyOf/oneOf/not (a NestedValueValidation: no additionalProperties
    written back)."""
    out: Schema = {}
    for key, value in schema.items():
        if key == "items":
            if isinstance(value, dict):
                out[key] = _nested(value)
        elif key == "properties":
            if isinstance(value, dict) and value:
                out[key] = {name: _nested(v) for name, v in value.items()
                            if isinstance(v, dict)}
        elif key in _JUNCTORS or key in ("not", "additionalProperties"):
            continue
        else:
            keep, kept = _scalar(key, value)
            if keep:
                out[key] = kept
    _junctors(schema, out)
    return out


def _children(schema: Schema) -> list[Schema]:
    """The structural schemas right below ``schema``: items, properties,
    additionalProperties (the visitor's order)."""
    below = []
    if isinstance(schema.get("items"), dict):
        below.append(schema["items"])
    below.extend(v for v in (schema.get("properties") or {}).values() if isinstance(v, dict))
    if isinstance(schema.get("additionalProperties"), dict):
        below.append(schema["additionalProperties"])
    return below


def unfold(schema: Schema) -> None:
    """Unfold: an ``x-kubernetes-int-or-string`` value gets ``anyOf: [integer, string]``
    (in a first ``allOf`` clause when it has an anyOf of its own), unless it has that
    already."""
    if schema.get("x-kubernetes-int-or-string") is True:
        any_of = schema.get("anyOf")
        all_of = schema.get("allOf") or []
        if any_of != INT_OR_STRING and not (all_of and all_of[0].get("anyOf") == INT_OR_STRING):
            if not any_of:
                schema["anyOf"] = copy.deepcopy(INT_OR_STRING)
            else:
                schema["allOf"] = [{"anyOf": copy.deepcopy(INT_OR_STRING)}, *all_of]
    for child in _children(schema):
        unfold(child)


def to_openapi_v2(schema: Schema) -> None:
    """ToStructuralOpenAPIV2, in place (each value before the values below it)."""
    for key in (*_JUNCTORS, "not"):
        schema.pop(key, None)
    if schema.get("nullable") is True:
        for key in ("type", "nullable", "items", "properties"):
            schema.pop(key, None)
    preserves = schema.get("x-kubernetes-preserve-unknown-fields") is True
    if preserves:
        schema.pop("items", None)
        schema.pop("properties", None)
    if "items" not in schema and schema.get("type") == "array":
        del schema["type"]
    if preserves and schema.get("type") == "object":
        del schema["type"]
    required = schema.get("required")
    if required:
        nullable = {name for name, prop in (schema.get("properties") or {}).items()
                    if prop.get("nullable") is True}
        required = [name for name in required if name not in nullable]
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict) and additional.get("nullable") is True:
            required = []
        if required:
            schema["required"] = required
        else:
            del schema["required"]
    for child in _children(schema):
        to_openapi_v2(child)


def _embedded(schema: Schema, v2: bool, prefix: str) -> None:
    """addEmbeddedProperties: every embedded resource gets apiVersion, kind and metadata
    (and requires kind and apiVersion); in v2 not where unknown fields are preserved."""
    for child in _children(schema):
        _embedded(child, v2, prefix)
    if v2 and schema.get("x-kubernetes-preserve-unknown-fields") is True:
        return
    if schema.get("x-kubernetes-embedded-resource") is True:
        properties = schema.setdefault("properties", {})
        type_meta = _type_meta()
        properties["apiVersion"] = {**type_meta["apiVersion"],
                                    "description": EMBEDDED_API_VERSION_DOC}
        properties["kind"] = {**type_meta["kind"], "description": EMBEDDED_KIND_DOC}
        properties["metadata"] = _ref(OBJECT_META, prefix, v2, METADATA_DOC)
        required = list(schema.get("required") or [])
        for name in ("kind", "apiVersion"):
            if name not in required:
                required.append(name)
        schema["required"] = required


def _prune_defaults(schema: Any) -> None:
    """PruneDefaults: no ``default`` anywhere in a v2 definition."""
    if not isinstance(schema, dict):
        return
    schema.pop("default", None)
    for key in ("items", "not", "additionalProperties"):
        _prune_defaults(schema.get(key))
    for key in _JUNCTORS:
        for clause in schema.get(key) or []:
            _prune_defaults(clause)
    for prop in (schema.get("properties") or {}).values():
        _prune_defaults(prop)
