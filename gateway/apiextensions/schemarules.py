"""The rules a CRD's openAPIV3Schema must follow beyond being structural, as
apiextensions-apiserver v1.32 checks them (pkg/apis/apiextensions/validation/validation.go:
validateCustomResourceDefinitionValidation, ValidateCustomResourceDefinitionOpenAPISchema,
specStandardValidatorV3), with the structural checks (structural.py) and the checks of
defaults (schemadefaults.py) where kube runs them.

Schemas are the v1 JSON form (plain dicts). Paths and messages are kube's. Where kube's
message shows a whole Go struct (%#v, with pointer addresses), the struct is shown as
``Type{...}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gateway.apiextensions.schemadefaults import DefaultCheck, default_causes
from gateway.apiextensions.structural import (
    FieldPathError,
    Schema,
    item_schema,
    props,
    schema_has,
    structural_error,
    valid_field_path,
    validate_structural,
)
from gateway.apimachinery.status import Cause
from gateway.registry.validation import forbidden, invalid, not_supported, required

#: cel_compile(schema, path): causes for the CEL rules of a schema rooted at path.
CelCompile = Callable[[Schema, str], list[Cause]]

OPENAPI_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
VALIDATION_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                      "FieldValueRequired"]
_META_FIELDS = ("metadata", "kind", "apiVersion")
_NEWLINES = re.compile(r"[\n\r]+")
_GIVEN_COUNTS = ("additionalItems", "dependencies", "$ref")


@dataclass(frozen=True)
class Options:
    """validationOptions: what a create requires; an update relaxes what the old object
    already broke (so that stored objects stay writable)."""

    allow_defaults: bool = True
    require_valid_property_type: bool = True
    require_structural: bool = True
    require_pruned_defaults: bool = True
    require_atomic_set_type: bool = True
    require_map_list_keys_map_set: bool = True


@dataclass(frozen=True)
class _Walk:
    """specStandardValidatorV3's state along the walk."""

    allow_defaults: bool = True
    defaults_reason: str = ""
    inside_meta: bool = False

    def no_defaults(self, reason: str) -> _Walk:
        return replace(self, allow_defaults=False, defaults_reason=reason)


def _struct_invalid(path: str, type_name: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: apiextensions.{type_name}{{...}}: "
                 f"{detail}", path)


# -- the schema of a version (or the shared one) -----------------------------------------------


def validation_causes(validation: Any, status_enabled: bool, opts: Options, path: str, *,
                      cel_compile: CelCompile | None = None,
                      default_check: DefaultCheck | None = None) -> list[Cause]:
    """validateCustomResourceDefinitionValidation of a CustomResourceValidation at ``path``
    (spec.validation or spec.versions[i].schema)."""
    schema = validation.get("openAPIV3Schema") if isinstance(validation, dict) else None
    if not isinstance(schema, dict):
        return []
    root = f"{path}.openAPIV3Schema"
    causes = _status_root_causes(schema, path) if status_enabled else []
    if schema.get("nullable") is True:
        causes.append(forbidden(f"{root}.nullable", "nullable cannot be true at the root"))
    init: list[Cause] = []
    cel_ready = False
    if opts.require_structural:
        if error := structural_error(schema):
            init.append(invalid(root, "", error))
        else:
            errors = validate_structural(schema, root) or default_causes(
                schema, root, opts.require_pruned_defaults, default_check)
            causes += errors
            cel_ready = not errors
    schema_causes = openapi_causes(schema, root, _Walk(opts.allow_defaults), True, opts)
    causes += schema_causes
    if cel_ready and not schema_causes and cel_compile is not None:
        causes += cel_compile(schema, root)
    return causes or init


_ROOT_FIELDS = (
    ("id", "ID"), ("$schema", "Schema"), ("$ref", "Ref"), ("description", "Description"),
    ("type", "Type"), ("nullable", "Nullable"), ("format", "Format"), ("title", "Title"),
    ("default", "Default"), ("maximum", "Maximum"), ("exclusiveMaximum", "ExclusiveMaximum"),
    ("minimum", "Minimum"), ("exclusiveMinimum", "ExclusiveMinimum"),
    ("maxLength", "MaxLength"), ("minLength", "MinLength"), ("pattern", "Pattern"),
    ("maxItems", "MaxItems"), ("minItems", "MinItems"), ("uniqueItems", "UniqueItems"),
    ("multipleOf", "MultipleOf"), ("enum", "Enum"), ("maxProperties", "MaxProperties"),
    ("minProperties", "MinProperties"), ("required", "Required"), ("items", "Items"),
    ("allOf", "AllOf"), ("oneOf", "OneOf"), ("anyOf", "AnyOf"), ("not", "Not"),
    ("properties", "Properties"), ("additionalProperties", "AdditionalProperties"),
    ("patternProperties", "PatternProperties"), ("dependencies", "Dependencies"),
    ("additionalItems", "AdditionalItems"), ("definitions", "Definitions"),
    ("externalDocs", "ExternalDocs"), ("example", "Example"),
    ("x-kubernetes-preserve-unknown-fields", "XPreserveUnknownFields"),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource"),
    ("x-kubernetes-int-or-string", "XIntOrString"),
    ("x-kubernetes-list-map-keys", "XListMapKeys"), ("x-kubernetes-list-type", "XListType"),
    ("x-kubernetes-map-type", "XMapType"), ("x-kubernetes-validations", "XValidations"),
)
ROOT_FIELDS_WITH_STATUS = ["Description", "Type", "Format", "Title", "Maximum",
                           "ExclusiveMaximum", "Minimum", "ExclusiveMinimum", "MaxLength",
                           "MinLength", "Pattern", "MaxItems", "MinItems", "UniqueItems",
                           "MultipleOf", "Required", "Items", "Properties", "ExternalDocs",
                           "Example", "XPreserveUnknownFields", "XValidations"]
_POINTER_STRINGS = ("$ref", "x-kubernetes-list-type", "x-kubernetes-map-type")


def _is_zero(key: str, value: Any) -> bool:
    """The Go field is its zero value (an empty list is not: Go keeps it non-nil)."""
    return value is None or value is False or (value == "" and key not in _POINTER_STRINGS)


def _status_root_causes(schema: Schema, path: str) -> list[Cause]:
    """With a status subresource, status is cut out of the root as properties[status]: only
    fields that survive that may be at the root, and the root must be an object."""
    for key, go_name in _ROOT_FIELDS:
        if _is_zero(key, schema.get(key)):
            continue
        if go_name == "Type":
            if schema["type"] != "object":
                return [invalid(f"{path}.openAPIV3Schema.type", schema["type"],
                                'only "object" is allowed as the type at the root of the '
                                "schema if the status subresource is enabled")]
            continue
        if go_name not in ROOT_FIELDS_WITH_STATUS:
            fields = " ".join(ROOT_FIELDS_WITH_STATUS)
            return [_struct_invalid(f"{path}.openAPIV3Schema", "JSONSchemaProps",
                                    f"only [{fields}] fields are allowed at the root of the "
                                    "schema if the status subresource is enabled")]
    return []


# -- ValidateCustomResourceDefinitionOpenAPISchema ----------------------------------------------


def openapi_causes(schema: Any, path: str, walk: _Walk, is_root: bool,
                   opts: Options) -> list[Cause]:
    """Every node's own rules, then its children's, then its list and map extensions."""
    if not isinstance(schema, dict):
        return []
    causes = _node_causes(schema, path, walk, opts)
    if schema.get("uniqueItems") is True:
        causes.append(forbidden(f"{path}.uniqueItems", "uniqueItems cannot be set to true "
                                "since the runtime complexity becomes quadratic"))
    causes += _children_causes(schema, path, walk, is_root, opts)
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        causes.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False,
                              "must be true or undefined"))
    causes += _map_type_causes(schema, path)
    causes += _list_type_causes(schema, path, opts)
    if opts.require_map_list_keys_map_set:
        causes += map_list_keys_causes(schema, path)
    causes += _rule_causes(schema, path)
    return causes


def _node_causes(schema: Schema, path: str, walk: _Walk, opts: Options) -> list[Cause]:
    """specStandardValidatorV3.validate: what OpenAPI v3 allows but CRDs do not."""
    causes: list[Cause] = []
    kind = schema.get("type") or ""
    if opts.require_valid_property_type and kind and kind not in OPENAPI_TYPES:
        causes.append(not_supported(f"{path}.type", kind, OPENAPI_TYPES))
    if schema.get("default") is not None and not walk.allow_defaults:
        detail = "must not be set" + (f" {walk.defaults_reason}" if walk.defaults_reason
                                      else "")
        causes.append(forbidden(f"{path}.default", detail))
    for key in ("id", "additionalItems", "patternProperties", "definitions", "dependencies",
                "$ref"):
        # id, patternProperties and definitions count when non-empty; the others (Go
        # pointers and a map Go keeps when empty) whenever given
        value = schema.get(key)
        if value or (value is not None and key in _GIVEN_COUNTS):
            causes.append(forbidden(f"{path}.{key}", f"{key} is not supported"))
    if kind == "null":
        causes.append(forbidden(f"{path}.type", "type cannot be set to null, use nullable as "
                                "an alternative"))
    if isinstance(schema.get("items"), list) and schema["items"]:
        causes.append(forbidden(f"{path}.items", "items must be a schema object and not an "
                                "array"))
    if walk.inside_meta and schema.get("x-kubernetes-embedded-resource") is True:
        causes.append(forbidden(f"{path}.x-kubernetes-embedded-resource",
                                "must not be used inside of resource meta"))
    return causes


def _children_causes(schema: Schema, path: str, walk: _Walk, is_root: bool,
                     opts: Options) -> list[Cause]:
    causes: list[Cause] = []
    extra = schema.get("additionalProperties")
    if extra is not None:
        if props(schema) and (extra is not True):
            causes.append(forbidden(f"{path}.additionalProperties",
                                    "additionalProperties and properties are mutual exclusive"))
        sub = walk.no_defaults("inside additionalProperties applying to object metadata") \
            if walk.inside_meta else walk
        causes += openapi_causes(extra, f"{path}.additionalProperties", sub, False, opts)
    embedded = schema.get("x-kubernetes-embedded-resource") is True
    for key, sub_schema in props(schema).items():
        sub = walk
        if (is_root or embedded) and key in _META_FIELDS:
            sub = replace(sub, inside_meta=True)
            if is_root:
                sub = sub.no_defaults(f"in top-level {key}")
        causes += openapi_causes(sub_schema, f"{path}.properties[{key}]", sub, False, opts)
    causes += openapi_causes(schema.get("not"), f"{path}.not", walk, False, opts)
    for junctor in ("allOf", "oneOf", "anyOf"):
        for i, clause in enumerate(schema.get(junctor) or []):
            causes += openapi_causes(clause, f"{path}.{junctor}[{i}]", walk, False, opts)
    for key, sub_schema in (schema.get("definitions") or {}).items():
        causes += openapi_causes(sub_schema, f"{path}.definitions[{key}]", walk, False, opts)
    items = schema.get("items")
    if isinstance(items, dict):
        causes += openapi_causes(items, f"{path}.items", walk, False, opts)
    elif isinstance(items, list):
        for i, clause in enumerate(items):
            causes += openapi_causes(clause, f"{path}.items[{i}]", walk, False, opts)
    for key, dependency in (schema.get("dependencies") or {}).items():
        causes += openapi_causes(dependency, f"{path}.dependencies[{key}]", walk, False, opts)
    return causes


def _map_type_causes(schema: Schema, path: str) -> list[Cause]:
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is None:
        return []
    causes: list[Cause] = []
    kind = schema.get("type") or ""
    if kind != "object":
        detail = "must be object if x-kubernetes-map-type is specified"
        causes.append(required(f"{path}.type", detail) if not kind
                      else invalid(f"{path}.type", kind, detail))
    if map_type not in ("atomic", "granular"):
        causes.append(not_supported(f"{path}.x-kubernetes-map-type", map_type,
                                    ["atomic", "granular"]))
    return causes


def _list_type_causes(schema: Schema, path: str, opts: Options) -> list[Cause]:
    causes: list[Cause] = []
    list_type = schema.get("x-kubernetes-list-type")
    kind = schema.get("type") or ""
    items = item_schema(schema)
    if list_type is not None and kind != "array":
        detail = "must be array if x-kubernetes-list-type is specified"
        causes.append(required(f"{path}.type", detail) if not kind
                      else invalid(f"{path}.type", kind, detail))
    elif opts.require_atomic_set_type and list_type == "set" and items is not None:
        causes += _set_item_causes(items, path)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        causes.append(not_supported(f"{path}.x-kubernetes-list-type", list_type,
                                    ["atomic", "set", "map"]))
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if keys:
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            causes.append(required(f"{path}.x-kubernetes-list-type", detail))
        elif list_type != "map":
            causes.append(invalid(f"{path}.x-kubernetes-list-type", list_type, detail))
    if list_type == "map":
        causes += _list_map_causes(schema, keys, path)
    return causes


def _set_item_causes(items: Schema, path: str) -> list[Cause]:
    """Items of a set are compared whole: they must be atomic."""
    detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
    item_list_type = items.get("x-kubernetes-list-type")
    if items.get("type") == "array" and item_list_type not in (None, "atomic"):
        return [invalid(f"{path}.items.x-kubernetes-list-type", item_list_type, detail)]
    if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
        # kube shows the items' list type here, which objects do not have: null
        return [invalid(f"{path}.items.x-kubernetes-map-type", item_list_type, detail)]
    return []


def _list_map_causes(schema: Schema, keys: list[str], path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not keys:
        causes.append(required(f"{path}.x-kubernetes-list-map-keys",
                               "must not be empty if x-kubernetes-list-type is map"))
    items = schema.get("items")
    if items is None:
        causes.append(required(f"{path}.items", "must have a schema if x-kubernetes-list-type "
                               "is map"))
        return causes
    if not isinstance(items, dict):
        return [*causes, _struct_invalid(f"{path}.items", "JSONSchemaPropsOrArray",
                                         "must only have a single schema if "
                                         "x-kubernetes-list-type is map")]
    item_type = items.get("type") or ""
    if item_type != "object":
        return [*causes, invalid(f"{path}.items.type", item_type,
                                 "must be object if parent array's x-kubernetes-list-type is "
                                 "map")]
    seen: set[str] = set()
    for key in keys:
        if key in props(items):
            if props(items)[key].get("type") in ("array", "object"):
                causes.append(invalid(f"{path}.items.properties[{key}].type", item_type,
                                      "must be a scalar type if parent array's "
                                      "x-kubernetes-list-type is map"))
        else:
            causes.append(invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                  "entries must all be names of item properties"))
        if key in seen:
            causes.append(invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                  "must not contain duplicate entries"))
        seen.add(key)
    return causes


def map_list_keys_causes(schema: Schema, path: str) -> list[Cause]:
    """validateMapListKeysMapSet: items of sets and maps, and map keys, are never null, and
    map keys are always there (required, or defaulted)."""
    items = item_schema(schema)
    list_type = schema.get("x-kubernetes-list-type")
    if items is None or list_type not in ("set", "map"):
        return []
    causes: list[Cause] = []
    if items.get("nullable") is True:
        causes.append(forbidden(f"{path}.items.nullable",
                                f"cannot be nullable when x-kubernetes-list-type is {list_type}"))
    if list_type != "map":
        return causes
    required_keys = set(items.get("required") or [])
    for key in schema.get("x-kubernetes-list-map-keys") or []:
        prop = props(items).get(key)
        if prop is None:
            continue
        where = f"{path}.items.properties[{key}]"
        if key not in required_keys and prop.get("default") is None:
            causes.append(required(f"{where}.default", "this property is in "
                                   "x-kubernetes-list-map-keys, so it must have a default or "
                                   "be a required property"))
        if prop.get("nullable") is True:
            causes.append(forbidden(f"{where}.nullable", "this property is in "
                                    "x-kubernetes-list-map-keys, so it cannot be nullable"))
    return causes


def _rule_causes(schema: Schema, path: str) -> list[Cause]:
    """The form of x-kubernetes-validations rules (compiling them is cel_compile's job)."""
    causes: list[Cause] = []
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        if isinstance(rule, dict):
            causes += _one_rule_causes(rule, schema, f"{path}.x-kubernetes-validations[{i}]")
    return causes


def _one_rule_causes(rule: dict, schema: Schema, path: str) -> list[Cause]:
    causes: list[Cause] = []
    text, message = rule.get("rule") or "", rule.get("message") or ""
    expression, field_path = rule.get("messageExpression") or "", rule.get("fieldPath") or ""
    if not text.strip():
        causes.append(required(f"{path}.rule", "rule is not specified"))
    elif message and not message.strip():
        causes.append(invalid(f"{path}.message", message, "message must be non-empty if "
                              "specified"))
    elif _NEWLINES.search(message.strip()):
        causes.append(invalid(f"{path}.message", message, "message must not contain line "
                              "breaks"))
    elif _NEWLINES.search(text.strip()) and not message.strip():
        causes.append(required(f"{path}.message", "message must be specified if rule "
                               "contains line breaks"))
    if expression and not expression.strip():
        causes.append(required(f"{path}.messageExpression", "messageExpression must be "
                               "non-empty if specified"))
    reason = rule.get("reason")
    if reason is not None and reason not in VALIDATION_REASONS:
        causes.append(not_supported(f"{path}.reason", reason, VALIDATION_REASONS))
    if field_path and not field_path.strip():
        causes.append(invalid(f"{path}.fieldPath", field_path, "fieldPath must be non-empty "
                              "if specified"))
    if _NEWLINES.search(field_path):
        causes.append(invalid(f"{path}.fieldPath", field_path, "fieldPath must not contain "
                              "line breaks"))
    if field_path and not _path_valid(schema, field_path):
        causes.append(invalid(f"{path}.fieldPath", field_path, "fieldPath must be a valid "
                              "path"))
    return causes


def _path_valid(schema: Schema, text: str) -> bool:
    if structural_error(schema):
        return True
    try:
        valid_field_path(text, schema)
    except FieldPathError:
        return False
    return True


# -- what a whole spec's schemas have (the update rules ask this of the old object) -------------


def has_kubernetes_extensions(schema: Any) -> bool:
    return schema_has(schema, lambda s: s.get("x-kubernetes-embedded-resource") is True
                      or s.get("x-kubernetes-preserve-unknown-fields") is not None
                      or s.get("x-kubernetes-int-or-string") is True
                      or bool(s.get("x-kubernetes-list-map-keys"))
                      or s.get("x-kubernetes-list-type") is not None
                      or bool(s.get("x-kubernetes-validations")))


def has_invalid_types(schema: Any) -> bool:
    return schema_has(schema, lambda s: bool(s.get("type")) and s["type"] not in OPENAPI_TYPES)


def has_non_atomic_set_type(schema: Any) -> bool:
    return schema_has(schema, lambda s: s.get("x-kubernetes-list-type") == "set"
                      and (items := item_schema(s)) is not None
                      and bool(_set_item_causes(items, "")))


def has_invalid_map_list_keys(schema: Any) -> bool:
    return schema_has(schema, lambda s: bool(map_list_keys_causes(s, "")))


