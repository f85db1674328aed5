"""CustomResourceDefinition validation with apiextensions-apiserver v1.32's rules, paths and
messages: the spec, the structural schema rules, the schema's own rules, subresources,
columns, selectable fields, conversion, approval, status, and what an update relaxes."""

from __future__ import annotations

import base64
import copy
import datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.apiextensions.defaults import default_crd
from gateway.apiextensions.validation import (
    validate_crd,
    validate_crd_status,
    validate_crd_update,
)
from gateway.apimachinery.status import Cause

DATA = Path(__file__).parents[2] / "data" / "crds"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
V = "spec.validation.openAPIV3Schema"
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. "
           "'my-name',  or 'abc-123', regex used for validation is "
           "'[a-z]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
             "characters, '-' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
VERSIONS = "[]apiextensions.CustomResourceDefinitionVersion{...}"
FORM = "; desired format: https://host[/path]"
APPROVAL = "metadata.annotations[api-approved.kubernetes.io]"
PR = "see https://github.com/kubernetes/enhancements/pull/1111"
SPEC_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}


def version(name: str = "v1", schema: dict | None = None, *, storage: bool = True,
            **fields) -> dict:
    out = {"name": name, "served": True, "storage": storage, **fields}
    if schema is not False:
        out["schema"] = {"openAPIV3Schema": copy.deepcopy(schema or SPEC_SCHEMA)}
    return out


def crd(schema: dict | None = None, *, versions: list | None = None, meta: dict | None = None,
        status: dict | None = None, **spec) -> dict:
    base = {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "listKind": "WidgetList"},
            "versions": versions if versions is not None else [version(schema=schema)],
            "conversion": {"strategy": "None"}}
    base.update(spec)
    name = f"{base['names'].get('plural', '')}.{base['group']}"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name, **(meta or {})}, "spec": base,
            "status": {"storedVersions": ["v1"]} if status is None else status}


def props(**properties: dict) -> dict:
    return {"type": "object", "properties": properties}


def triples(causes: list[Cause]) -> list[tuple[str, str, str]]:
    return [(c.field, c.reason, c.message) for c in causes]


def causes(obj: dict, **hooks) -> list[tuple[str, str, str]]:
    return triples(validate_crd(obj, **hooks))


def inv(path: str, message: str) -> tuple[str, str, str]:
    return (path, "FieldValueInvalid", f"Invalid value: {message}")


def req(path: str, detail: str = "") -> tuple[str, str, str]:
    return (path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def forb(path: str, detail: str) -> tuple[str, str, str]:
    return (path, "FieldValueForbidden", f"Forbidden: {detail}")


def unsup(path: str, value: str, *supported: str) -> tuple[str, str, str]:
    listed = ", ".join(f'"{s}"' for s in supported)
    return (path, "FieldValueNotSupported",
            f'Unsupported value: "{value}": supported values: {listed}')


# -- the object and its spec -------------------------------------------------------------------


def test_a_valid_crd_has_no_causes():
    assert causes(crd()) == []
    assert causes(crd(scope="Cluster", versions=[
        version("v1beta1", storage=False, deprecated=True, deprecationWarning="use v1"),
        version("v1", props(spec={"type": "object"}))],
        status={"storedVersions": ["v1beta1", "v1"]})) == []


def test_the_name_is_plural_dot_group():
    obj = crd(meta={"generateName": "w-"})
    obj["metadata"]["name"] = "gadgets.example.com"
    detail = 'must be spec.names.plural+"."+spec.group'
    assert causes(obj) == [inv("metadata.generateName", f'"w-": {detail}'),
                           inv("metadata.name", f'"gadgets.example.com": {detail}')]


@pytest.mark.parametrize("group, expected", [
    ("", [req("spec.group")]),
    ("Example.com", [inv("spec.group", f'"Example.com": {SUBDOMAIN}')]),
    ("example", [inv("spec.group", '"example": should be a domain with at least one dot')]),
])
def test_group(group, expected):
    assert causes(crd(group=group)) == expected


@pytest.mark.parametrize("scope, expected", [
    ("", [req("spec.scope")]),
    ("Global", [unsup("spec.scope", "Global", "Cluster", "Namespaced")]),
])
def test_scope(scope, expected):
    assert causes(crd(scope=scope)) == expected


def test_names():
    long_kind = "W" + "a" * 63
    names = {"plural": "Widgets", "kind": "Wid_get", "listKind": "Wid_get",
             "shortNames": ["w", "W2"], "categories": ["all", "my_cat"]}
    mixed = "may have mixed case, but should otherwise match: "
    assert causes(crd(names=names)) == [
        req("spec.names.singular"),
        inv("spec.names.plural", f'"Widgets": {DNS1035}'),
        inv("spec.names.kind", f'"Wid_get": {mixed}{DNS1035}'),
        inv("spec.names.listKind", f'"Wid_get": {mixed}{DNS1035}'),
        inv("spec.names.shortNames[1]", f'"W2": {DNS1035}'),
        inv("spec.names.listKind", '"Wid_get": kind and listKind may not be the same'),
        inv("spec.names.categories[1]", f'"my_cat": {DNS1035}'),
    ]
    too_long = "must be no more than 63 characters"
    assert causes(crd(names={"plural": "widgets", "singular": "widget", "kind": long_kind,
                             "listKind": long_kind + "List"})) == [
        inv("spec.names.kind", f'"{long_kind}": {mixed}{too_long}'),
        inv("spec.names.listKind", f'"{long_kind}List": {mixed}{too_long}'),
    ]
    assert causes(crd(names={"plural": "widgets"})) == [
        req("spec.names.singular"), req("spec.names.kind"), req("spec.names.listKind")]


def test_versions():
    assert causes(crd(versions=[version(), version(storage=False)])) == [
        inv("spec.versions", f"{VERSIONS}: must contain unique version names")]
    exactly_one = inv("spec.versions", f"{VERSIONS}: must have exactly one version marked as "
                      "storage version")
    assert causes(crd(versions=[version("v1", storage=False), version("v2", storage=False)])) \
        == [exactly_one]
    assert causes(crd(versions=[version("v1"), version("v2")],
                      status={"storedVersions": ["v1", "v2"]})) == [exactly_one]
    # the internal spec.version is the first version's name: it is reported twice
    assert causes(crd(versions=[version("V1")], status={"storedVersions": ["V1"]})) == [
        inv("spec.versions[0].name", f'"V1": {DNS1035}'),
        inv("spec.version", f'"V1": {DNS1035}'),
    ]
    assert causes(crd(versions=[])) == [
        exactly_one, inv("status.storedVersions[0]", '"v1": must appear in spec.versions')]


def test_every_version_needs_a_schema():
    assert causes(crd(versions=[version("v1", False), version("v2", False, storage=False)])) \
        == [req("spec.versions[0].schema.openAPIV3Schema", "schemas are required"),
            req("spec.versions[1].schema.openAPIV3Schema", "schemas are required")]
    assert causes(crd(versions=[version("v1"), version("v2", False, storage=False)])) == [
        req("spec.versions[1].schema.openAPIV3Schema", "schemas are required")]


def test_deprecation_warning():
    def warning(**fields):
        return causes(crd(versions=[version(**fields)]))
    path = "spec.versions[0].deprecationWarning"
    assert warning(deprecationWarning="old") == [
        inv(path, '"old": can only be set for deprecated versions')]
    assert warning(deprecated=True, deprecationWarning="") == [
        inv(path, '"": must not be an empty string')]
    assert warning(deprecated=True, deprecationWarning="a\tb") == [
        inv(path, '"a\\tb": must only contain printable UTF-8 characters; non-printable '
                  'character found at index 1')]
    assert warning(deprecated=True, deprecationWarning="é\u200b") == [
        inv(path, '"é\\u200b": must only contain printable UTF-8 characters; non-printable '
                  'character found at index 2')]
    assert warning(deprecated=True, deprecationWarning="x" * 257) == [
        inv(path, f'"{"x" * 257}": must be <= 256 characters long')]


# -- structural schemas ------------------------------------------------------------------------


@pytest.mark.parametrize("schema, expected", [
    (props(spec={"properties": {"a": {"type": "string"}}}),
     [req(f"{V}.properties[spec].type", "must not be empty for specified object fields")]),
    ({"type": "string"}, [inv(f"{V}.type", '"string": must be object at the root')]),
    ({"properties": {}}, [req(f"{V}.type", "must not be empty at the root")]),
    (props(a={"type": "array"}), [req(f"{V}.properties[a].items", "must be specified")]),
    (props(a={"type": "array", "items": {}}),
     [req(f"{V}.properties[a].items.type", "must not be empty for specified array items")]),
    # sorted by their text, not in the schema's order
    (props(b={}, a={"type": "array"}),
     [req(f"{V}.properties[a].items", "must be specified"),
      req(f"{V}.properties[b].type", "must not be empty for specified object fields")]),
    ({"type": "object", "additionalProperties": {"type": "string"}},
     [forb(f"{V}.additionalProperties", "must not be used at the root")]),
    ({"type": "object", "additionalProperties": False},
     [forb(f"{V}.additionalProperties", "must not be used at the root")]),
])
def test_structural_types(schema, expected):
    assert causes(crd(schema)) == expected


def test_metadata_at_the_root_only_restricts_name_and_generate_name():
    name = {"type": "string", "maxLength": 63, "pattern": "^[a-z]+$"}
    assert causes(crd(props(metadata={"type": "object", "properties": {
        "name": name, "generateName": {"type": "string"}}}))) == []
    implicit = forb(f"{V}.properties[metadata]", "must not specify anything other than name "
                    "and generateName, but metadata is implicitly specified")
    assert causes(crd(props(metadata={"type": "object", "properties": {
        "name": name, "labels": {"type": "object"}}}))) == [implicit]
    assert causes(crd(props(metadata={"type": "object", "description": "meta"}))) == [
        implicit]
    assert causes(crd(props(metadata={"type": "string"}))) == [
        inv(f"{V}.properties[metadata].type", '"string": must be object')]
    assert causes(crd(props(kind={"type": "integer"}))) == [
        inv(f"{V}.properties[kind].type", '"integer": must be string')]


def test_logical_junctors_hold_value_validations_only():
    schema = props(a={"type": "string"})
    schema["anyOf"] = [{"type": "string", "properties": {"a": {"description": "x",
                                                               "default": "y"}}}]
    assert causes(crd(schema)) == [
        forb(f"{V}.anyOf[0].properties[a].default", "must be undefined to be structural"),
        forb(f"{V}.anyOf[0].properties[a].description", "must be empty to be structural"),
        forb(f"{V}.anyOf[0].type", "must be empty to be structural"),
    ]
    schema = props(a={"type": "object", "properties": {"b": {"type": "string"}}, "not": {
        "properties": {"metadata": {}}, "nullable": True, "x-kubernetes-list-type": "set",
        "x-kubernetes-validations": [{"rule": "true"}], "additionalProperties": True}})
    assert causes(crd(schema)) == [
        forb(f"{V}.properties[a].not.additionalProperties", "must be undefined to be "
             "structural"),
        forb(f"{V}.properties[a].not.nullable", "must be false to be structural"),
        forb(f"{V}.properties[a].not.properties[metadata]",
             "must not be specified in a nested context"),
        forb(f"{V}.properties[a].not.x-kubernetes-list-type", "must be undefined to be "
             "structural"),
        forb(f"{V}.properties[a].not.x-kubernetes-validations", "must be empty to be "
             "structural"),
        # the schema rules, which come after the structural ones, walk the junctors too
        req(f"{V}.properties[a].not.type", "must be array if x-kubernetes-list-type is "
            "specified"),
    ]


def test_int_or_string():
    any_of = [{"type": "integer"}, {"type": "string"}]
    assert causes(crd(props(a={"x-kubernetes-int-or-string": True, "anyOf": any_of}))) == []
    assert causes(crd(props(a={"x-kubernetes-int-or-string": True, "allOf": [
        {"anyOf": any_of}, {"pattern": "^[0-9]+%?$"}]}))) == []
    # the anyOf pattern is never held against the schema, but it does not give it a type
    assert causes(crd(props(a={"anyOf": any_of}))) == [
        req(f"{V}.properties[a].type", "must not be empty for specified object fields")]
    assert causes(crd(props(a={"x-kubernetes-int-or-string": True,
                               "x-kubernetes-preserve-unknown-fields": True}))) == [
        inv(f"{V}.properties[a].x-kubernetes-preserve-unknown-fields",
            "true: must be false if x-kubernetes-int-or-string is true")]


def test_embedded_resources():
    assert causes(crd(props(a={"x-kubernetes-embedded-resource": True,
                               "x-kubernetes-preserve-unknown-fields": True}))) == [
        req(f"{V}.properties[a].type", "must be object if x-kubernetes-embedded-resource is "
            "true")]
    assert causes(crd(props(a={"type": "object", "x-kubernetes-embedded-resource": True}))) \
        == [req(f"{V}.properties[a].properties", "must not be empty if "
                "x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields")]
    assert causes(crd(props(a={"type": "object", "x-kubernetes-embedded-resource": True,
                               "x-kubernetes-preserve-unknown-fields": True}))) == []


def test_what_the_root_junctors_say_must_be_said_structurally():
    schema = props(a={"type": "string"})
    schema["oneOf"] = [{"required": ["a"]}, {"properties": {"b": {"minLength": 1}}}]
    assert causes(crd(schema)) == [
        req(f"{V}.properties[b]", f"because it is defined in {V}.oneOf[1].properties[b]")]


@pytest.mark.parametrize("pattern, error", [
    ("(a", "missing closing ): `(a`"),
    ("a)", "unexpected ): `a)`"),
    ("[a", "missing closing ]: `[a`"),
    ("*a", "missing argument to repetition operator: `*`"),
    ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
    ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
    (r"(a)\1", r"invalid escape sequence: `\1`"),
])
def test_patterns_are_go_regular_expressions(pattern, error):
    quoted = pattern.replace("\\", "\\\\")
    assert causes(crd(props(a={"type": "string", "pattern": pattern}))) == [
        inv(f"{V}.properties[a].pattern", f'"{quoted}": must be a valid regular expression, '
            f"but isn't: error parsing regexp: {error}")]


def test_go_only_pattern_syntax_is_accepted():
    assert causes(crd(props(a={"type": "string", "pattern": r"^\p{L}+[[:digit:]]\z"}))) == []


def test_fields_structural_schemas_have_no_place_for():
    assert causes(crd({"type": "object", "$schema": "http://json-schema.org/schema#"})) == [
        inv(V, "\"\": OpenAPIV3Schema 'schema' is not supported")]
    # when the schema rules find something, what NewStructural said is not shown
    assert causes(crd(props(a={"$ref": "#/definitions/a"}))) == [
        forb(f"{V}.properties[a].$ref", "$ref is not supported")]
    assert causes(crd(props(a={"type": "object",
                               "x-kubernetes-preserve-unknown-fields": False}))) == [
        inv(f"{V}.properties[a].x-kubernetes-preserve-unknown-fields",
            "false: must be true or undefined")]
    assert causes(crd(props(a={"type": "array", "items": [{"type": "string"}]}))) == [
        forb(f"{V}.properties[a].items", "items must be a schema object and not an array")]


# -- the schema's own rules --------------------------------------------------------------------


@pytest.mark.parametrize("schema, expected", [
    (props(a={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
     [forb(f"{V}.properties[a].uniqueItems", "uniqueItems cannot be set to true since the "
           "runtime complexity becomes quadratic")]),
    (props(a={"type": "object", "properties": {"x": {"type": "string"}},
              "additionalProperties": {"type": "string"}}),
     [forb(f"{V}.properties[a].additionalProperties",
           "additionalProperties and properties are mutual exclusive")]),
    (props(a={"type": "object", "properties": {"x": {"type": "string"}},
              "additionalProperties": True}), []),
    (props(metadata={"type": "object", "default": {}}),
     [forb(f"{V}.properties[metadata].default", "must not be set in top-level metadata")]),
    (props(a={"type": "null"}),
     [unsup(f"{V}.properties[a].type", "null", "array", "boolean", "integer", "number",
            "object", "string"),
      forb(f"{V}.properties[a].type", "type cannot be set to null, use nullable as an "
           "alternative")]),
    ({"type": "object", "nullable": True},
     [forb(f"{V}.nullable", "nullable cannot be true at the root")]),
    (props(a={"type": "string", "x-kubernetes-list-type": "set"}),
     [inv(f"{V}.properties[a].type", '"string": must be array if x-kubernetes-list-type is '
          "specified")]),
    (props(a={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}),
     [unsup(f"{V}.properties[a].x-kubernetes-list-type", "bag", "atomic", "set", "map")]),
    (props(a={"type": "object", "x-kubernetes-map-type": "weird"}),
     [unsup(f"{V}.properties[a].x-kubernetes-map-type", "weird", "atomic", "granular")]),
    (props(a={"type": "array", "x-kubernetes-list-type": "set",
              "items": {"type": "object", "properties": {"x": {"type": "string"}}}}),
     [inv(f"{V}.properties[a].items.x-kubernetes-map-type", "null: must be atomic as item of "
          "a list with x-kubernetes-list-type=set")]),
    (props(a={"type": "array", "items": {"type": "string"},
              "x-kubernetes-list-map-keys": ["k"]}),
     [req(f"{V}.properties[a].x-kubernetes-list-type", "must be map if "
          "x-kubernetes-list-map-keys is non-empty")]),
])
def test_schema_rules(schema, expected):
    assert causes(crd(schema)) == expected


def test_list_maps():
    item = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "port": {"type": "object"},
                           "id": {"type": "string", "nullable": True}}}
    schema = props(a={"type": "array", "x-kubernetes-list-type": "map", "items": item,
                      "x-kubernetes-list-map-keys": ["name", "name", "nope", "port", "id"]})
    keys = '[]string{"name", "name", "nope", "port", "id"}'
    at = f"{V}.properties[a]"
    assert causes(crd(schema)) == [
        inv(f"{at}.x-kubernetes-list-map-keys", f"{keys}: must not contain duplicate entries"),
        inv(f"{at}.x-kubernetes-list-map-keys",
            f"{keys}: entries must all be names of item properties"),
        # kube shows the items' type here, not the key's
        inv(f"{at}.items.properties[port].type", '"object": must be a scalar type if parent '
            "array's x-kubernetes-list-type is map"),
        req(f"{at}.items.properties[port].default", "this property is in "
            "x-kubernetes-list-map-keys, so it must have a default or be a required property"),
        req(f"{at}.items.properties[id].default", "this property is in "
            "x-kubernetes-list-map-keys, so it must have a default or be a required property"),
        forb(f"{at}.items.properties[id].nullable", "this property is in "
             "x-kubernetes-list-map-keys, so it cannot be nullable"),
    ]
    assert causes(crd(props(a={"type": "array", "x-kubernetes-list-type": "map",
                               "items": {"type": "string"}}))) == [
        req(f"{at}.x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type "
            "is map"),
        inv(f"{at}.items.type", '"string": must be object if parent array\'s '
            "x-kubernetes-list-type is map"),
    ]


def test_validation_rules_form():
    rules = [{"rule": " "}, {"rule": "self.a\n> 1"}, {"rule": "true", "message": "a\nb"},
             {"rule": "true", "reason": "Bad"}, {"rule": "true", "fieldPath": ".nope"},
             {"rule": "true", "messageExpression": "  "},
             {"rule": "true", "fieldPath": ".spec.size"}]
    schema = copy.deepcopy(SPEC_SCHEMA) | {"x-kubernetes-validations": rules}
    at = f"{V}.x-kubernetes-validations"
    calls: list[str] = []
    assert causes(crd(schema), cel_compile=lambda s, p: calls.append(p) or []) == [
        req(f"{at}[0].rule", "rule is not specified"),
        req(f"{at}[1].message", "message must be specified if rule contains line breaks"),
        inv(f"{at}[2].message", '"a\\nb": message must not contain line breaks'),
        unsup(f"{at}[3].reason", "Bad", "FieldValueDuplicate", "FieldValueForbidden",
              "FieldValueInvalid", "FieldValueRequired"),
        inv(f"{at}[4].fieldPath", '".nope": fieldPath must be a valid path'),
        req(f"{at}[5].messageExpression", "messageExpression must be non-empty if specified"),
    ]
    assert calls == []  # CEL is not compiled for a schema with errors


def test_the_status_subresource_restricts_the_root():
    schema = copy.deepcopy(SPEC_SCHEMA) | {"anyOf": [{"required": ["spec"]}]}
    assert causes(crd(schema)) == []
    fields = ("Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum "
              "MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required "
              "Items Properties ExternalDocs Example XPreserveUnknownFields XValidations")
    status = {"status": {}}
    assert causes(crd(versions=[version(schema=schema, subresources=status)])) == [
        inv(V, f"apiextensions.JSONSchemaProps{{...}}: only [{fields}] fields are allowed at "
            "the root of the schema if the status subresource is enabled")]
    allowed = copy.deepcopy(SPEC_SCHEMA) | {
        "description": "d", "required": ["spec"], "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-validations": [{"rule": "true"}], "example": {"spec": {}}}
    assert causes(crd(versions=[version(schema=allowed, subresources=status)])) == []


# -- subresources, columns, selectable fields --------------------------------------------------


def test_scale_paths():
    scale = {"specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas",
             "labelSelectorPath": ".metadata.labels"}
    at = "spec.subresources.scale"
    assert causes(crd(versions=[version(subresources={"scale": scale})])) == [
        inv(f"{at}.specReplicasPath", '"spec.replicas": must be a simple json path starting '
            "with ."),
        inv(f"{at}.statusReplicasPath", '".spec.replicas": should be a json path under '
            ".status"),
        inv(f"{at}.labelSelectorPath", '".metadata.labels": should be a json path under '
            "either .spec or .status"),
    ]
    assert causes(crd(versions=[version(subresources={"scale": {}})])) == [
        req(f"{at}.specReplicasPath"), req(f"{at}.statusReplicasPath")]
    good = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}
    assert causes(crd(versions=[version(subresources={"scale": good, "status": {}})])) == []


def test_printer_columns():
    column = {"name": "", "type": "int", "format": "uint", "jsonPath": "spec.size",
              "priority": -1}
    at = "spec.additionalPrinterColumns[0]"
    types = "must be one of boolean,date,integer,number,string"
    assert causes(crd(versions=[version(additionalPrinterColumns=[column])])) == [
        req(f"{at}.name"),
        inv(f"{at}.type", f'"int": {types}'),
        inv(f"{at}.format", '"uint": must be one of byte,date,date-time,double,float,int32,'
            "int64,password"),
        inv(f"{at}.JSONPath", '"spec.size": must be a simple json path starting with .'),
    ]
    assert causes(crd(versions=[version(additionalPrinterColumns=[{"name": "A"}])])) == [
        req(f"{at}.type", types), req(f"{at}.JSONPath")]


def test_per_version_parts_keep_per_version_paths():
    bad = {"name": "Size", "type": "int", "jsonPath": ".spec.size"}
    good = {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
    versions = [version("v1", additionalPrinterColumns=[good]),
                version("v2", props(spec={}), storage=False, additionalPrinterColumns=[bad])]
    types = "must be one of boolean,date,integer,number,string"
    assert causes(crd(versions=versions)) == [
        req("spec.versions[1].schema.openAPIV3Schema.properties[spec].type",
            "must not be empty for specified object fields"),
        inv("spec.versions[1].additionalPrinterColumns[0].type", f'"int": {types}'),
    ]


def test_selectable_fields():
    schema = props(
        metadata={"type": "object", "properties": {"name": {"type": "string"}}},
        spec={"type": "object", "properties": {
            "color": {"type": "string", "enum": ["red"]}, "tags": {"type": "array",
                                                              "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}})
    paths = [".spec.color", ".spec.tags", ".metadata.name", "spec.color", ".spec.color",
             ".spec['color']", ".spec.nope", "", ".spec.labels.team"]
    fields = [{"jsonPath": p} for p in paths]
    at = "spec.selectableFields"
    assert causes(crd(versions=[version(schema=schema, selectableFields=fields)])) == [
        inv(f"{at}[1].jsonPath", '".spec.tags": must point to a field of type string, boolean '
            "or integer. Enum string fields and strings with formats are allowed."),
        inv(f"{at}[2].jsonPath", '".metadata.name": must not point to fields in metadata'),
        inv(f"{at}[3].jsonPath", '"spec.color": is an invalid path: expected [ or . but got: '
            "spec"),
        (f"{at}[4].jsonPath", "FieldValueDuplicate", 'Duplicate value: ".spec.color"'),
        inv(f"{at}[5].jsonPath", "\".spec['color']\": is an invalid path: array notation is "
            "not allowed"),
        inv(f"{at}[6].jsonPath", '".spec.nope": is an invalid path: does not refer to a valid '
            "field"),
        req(f"{at}[7].jsonPath"),
    ]
    many = props(spec=props(**{f"f{i}": {"type": "integer"} for i in range(9)}))
    fields = [{"jsonPath": f".spec.f{i}"} for i in range(9)]
    assert causes(crd(versions=[version(schema=many, selectableFields=fields)])) == [
        (at, "FieldValueTooMany", "Too many: 9: must have at most 8 items")]


# -- conversion --------------------------------------------------------------------------------


def webhook(**client) -> dict:
    return {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1", "v1beta1"],
                                               "clientConfig": client}}


SERVICE = {"name": "conv", "namespace": "ns", "port": 443, "path": "/convert"}


def test_conversion():
    at = "spec.conversion"
    assert causes(crd(conversion=webhook(service=SERVICE))) == []
    assert causes(crd(conversion=webhook(url="https://conv.example.com:8443/x"))) == []
    assert causes(crd(conversion={"strategy": "Foo"})) == [
        unsup(f"{at}.strategy", "Foo", "None", "Webhook")]
    assert causes(crd(conversion={"strategy": "Webhook"})) == [
        req(f"{at}.webhookClientConfig", "required when strategy is set to Webhook"),
        req(f"{at}.conversionReviewVersions")]
    assert causes(crd(conversion=webhook(url="https://x", service=SERVICE))) == [
        req(f"{at}.webhookClientConfig", "exactly one of url or service is required")]
    not_webhook = "should not be set when strategy is not set to Webhook"
    none = webhook(url="https://x") | {"strategy": "None"}
    assert causes(crd(conversion=none)) == [
        forb(f"{at}.webhookClientConfig", not_webhook),
        forb(f"{at}.conversionReviewVersions", not_webhook)]


def test_webhook_url_service_and_review_versions():
    at = "spec.conversion.webhookClientConfig"
    conversion = webhook(url="http://user@host/convert?x=1#f")
    conversion["webhook"]["conversionReviewVersions"] = ["v2", "v2", "V3"]
    assert causes(crd(conversion=conversion)) == [
        inv(f"{at}.url", f"\"http\": 'https' is the only allowed URL scheme{FORM}"),
        inv(f"{at}.url", '"user": user information is not permitted in the URL'),
        inv(f"{at}.url", '"f": fragments are not permitted in the URL'),
        inv(f"{at}.url", '"x=1": query parameters are not permitted in the URL'),
        inv("spec.conversion.conversionReviewVersions[1]", '"v2": duplicate version'),
        inv("spec.conversion.conversionReviewVersions[2]", f'"V3": {DNS1035}'),
        inv("spec.conversion.conversionReviewVersions", '[]string{"v2", "v2", "V3"}: must '
            "include at least one of v1, v1beta1"),
    ]
    assert causes(crd(conversion=webhook(url="https:///x"))) == [
        inv(f"{at}.url", f'"": host must be specified{FORM}')]
    assert causes(crd(conversion=webhook(url="https://host:port/"))) == [
        req(f"{at}.url", 'url must be a valid URL: parse "https://host:port/": invalid port '
            f'":port" after host{FORM}')]
    service = {"name": "", "namespace": "ns", "port": 0, "path": "convert//x"}
    assert causes(crd(conversion=webhook(service=service))) == [
        req(f"{at}.service.name", "service name is required"),
        inv(f"{at}.service.port", "0: port is not valid: must be between 1 and 65535, "
            "inclusive"),
        inv(f"{at}.service.path", "\"convert//x\": must start with a '/'"),
        # kube drops the first character whatever it is before splitting the segments
        inv(f"{at}.service.path", '"convert//x": segment[1] may not be empty'),
    ]
    assert causes(crd(conversion=webhook(service=SERVICE | {"path": "/a/B_"}))) == [
        inv(f"{at}.service.path", f'"/a/B_": segment[1]: {SUBDOMAIN}')]


def test_webhook_conversion_needs_pruning():
    obj = crd(conversion=webhook(service=SERVICE), preserveUnknownFields=True)
    assert causes(obj) == [
        inv("spec.conversion.strategy", '"Webhook": must be None if '
            "spec.preserveUnknownFields is true"),
        inv("spec.preserveUnknownFields", "true: cannot set to true, set "
            "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"),
    ]


def ca_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def established(obj: dict) -> dict:
    obj["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    return obj


@pytest.mark.parametrize("bundle, error", [
    (b"hello", "unable to parse bytes as PEM block"),
    (b"-----BEGIN FOO-----\naGVsbG8=\n-----END FOO-----\n",
     "no valid certificate authority data seen"),
    (b"-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
     "failed to parse certificate: x509: malformed certificate"),
])
def test_ca_bundles_are_checked_once_established(bundle, error):
    old = established(crd(conversion=webhook(service=SERVICE)))
    new = copy.deepcopy(old)
    new["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = \
        base64.b64encode(bundle).decode()
    # on create, and while not established, any bundle goes
    assert causes(new) == []
    assert validate_crd_update(new, crd(conversion=webhook(service=SERVICE))) == []
    shown = "[]byte{" + ", ".join(f"0x{b:x}" for b in bundle) + "}"
    assert triples(validate_crd_update(new, old)) == [
        inv("spec.conversion.webhookClientConfig.caBundle",
            f"{shown}: unable to load root certificates: {error}")]
    # an invalid bundle may stay invalid
    assert validate_crd_update(new, copy.deepcopy(new)) == []
    good = copy.deepcopy(new)
    good["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = \
        base64.b64encode(b"junk\n" + ca_pem()).decode()
    assert validate_crd_update(good, old) == []


# -- approval, stored versions, preserveUnknownFields ------------------------------------------


@pytest.mark.parametrize("annotation, expected", [
    (None, [req(APPROVAL, 'protected groups must have approval annotation '
                f'"api-approved.kubernetes.io", {PR}')]),
    ("yes", [inv(APPROVAL, '"yes": protected groups must have approval annotation '
                 '"api-approved.kubernetes.io" with either a URL or a reason starting with '
                 f'"unapproved", {PR}')]),
    ("unapproved, experimental", []),
    ("https://github.com/kubernetes/enhancements/pull/1111", []),
])
def test_protected_groups_need_approval(annotation, expected):
    meta = {"annotations": {"api-approved.kubernetes.io": annotation}} if annotation else None
    assert causes(crd(group="widgets.k8s.io", meta=meta)) == expected
    assert causes(crd(group="x.kubernetes.io", meta=meta)) == expected
    assert causes(crd(group="k8s.io.example.com", meta=meta)) == []


def test_approval_on_update_is_only_checked_when_it_changes():
    old, new = crd(group="widgets.k8s.io"), crd(group="widgets.k8s.io")
    assert validate_crd_update(new, old) == []
    old["metadata"]["annotations"] = {"api-approved.kubernetes.io": "https://x.io/pr/1"}
    assert triples(validate_crd_update(new, old)) == [
        req(APPROVAL, f'protected groups must have approval annotation '
            f'"api-approved.kubernetes.io", {PR}')]


@pytest.mark.parametrize("status, expected", [
    ({}, [inv("status.storedVersions", "[]string(nil): must have at least one stored "
              "version")]),
    ({"storedVersions": []}, [inv("status.storedVersions", "[]string{}: must have at least "
                                  "one stored version")]),
    ({"storedVersions": ["v0", "v1", "v9"]},
     [inv("status.storedVersions[0]", '"v0": must appear in spec.versions'),
      inv("status.storedVersions[2]", '"v9": must appear in spec.versions')]),
    ({"storedVersions": ["v0"]},
     [inv("status.storedVersions", '[]string{"v0"}: must have the storage version v1'),
      inv("status.storedVersions[0]", '"v0": must appear in spec.versions')]),
])
def test_stored_versions(status, expected):
    assert causes(crd(status=status)) == expected


def test_preserve_unknown_fields_may_stay_true_but_never_become_true():
    obj = crd(preserveUnknownFields=True)
    cannot = inv("spec.preserveUnknownFields", "true: cannot set to true, set "
                 "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema "
                 "instead")
    assert causes(obj) == [cannot]
    assert triples(validate_crd_update(obj, crd())) == [cannot]
    assert validate_crd_update(obj, copy.deepcopy(obj)) == []
    with_default = crd(props(a={"type": "string", "default": "x"}), preserveUnknownFields=True)
    assert triples(validate_crd_update(with_default, obj)) == [
        inv("spec.preserveUnknownFields", "true: must be false in order to use defaults in "
            "the schema")]


# -- defaults and the hooks --------------------------------------------------------------------


def test_defaults_must_not_have_unknown_fields():
    schema = props(spec={"type": "object", "default": {"a": 1, "b": "x"},
                         "properties": {"a": {"type": "integer"}}})
    assert causes(crd(schema)) == [
        inv(f"{V}.properties[spec].default",
            'map[string]interface {}{"a":1, "b":"x"}: must not have unknown fields')]
    kept = props(spec={"type": "object", "default": {"a": 1, "b": "x"},
                       "x-kubernetes-preserve-unknown-fields": True,
                       "properties": {"a": {"type": "integer"}}})
    assert causes(crd(kept)) == []
    nested = props(spec={"type": "array", "default": [{"a": {"z": None}}], "items": {
        "type": "object", "properties": {"a": {"type": "object"}}}})
    assert causes(crd(nested)) == [
        inv(f"{V}.properties[spec].default", '[]interface {}{map[string]interface {}{"a":'
            'map[string]interface {}{"z":interface {}(nil)}}}: must not have unknown fields')]


def test_default_check_sees_every_default_with_its_schema():
    seen: list[tuple] = []

    def check(value, schema, path):
        seen.append((value, schema.get("type"), path))
        return [Cause("FieldValueInvalid", "Invalid value: \"x\": bad", path)] if value == "x" \
            else []
    schema = props(a={"type": "string", "default": "x"},
                   b={"type": "array", "items": {"type": "integer", "default": 1}})
    cel: list[str] = []
    result = causes(crd(schema), default_check=check,
                    cel_compile=lambda s, p: cel.append(p) or [])
    assert seen == [("x", "string", f"{V}.properties[a].default"),
                    (1, "integer", f"{V}.properties[b].items.default")]
    assert result == [inv(f"{V}.properties[a].default", '"x": bad')]
    assert cel == []  # nor is CEL compiled when a default is bad


def test_cel_compile_is_called_once_per_schema_kube_compiles():
    calls: list[tuple[str, dict]] = []

    def compile_(schema, path):
        calls.append((path, schema))
        return [Cause("FieldValueInvalid", "Invalid value: ...: compilation failed",
                      f"{path}.x-kubernetes-validations[0].rule")]
    obj = crd(versions=[version("v1"), version("v2", storage=False)])
    assert causes(obj, cel_compile=compile_) == [
        inv(f"{V}.x-kubernetes-validations[0].rule", "...: compilation failed")]
    assert calls == [(V, SPEC_SCHEMA)]
    calls.clear()
    other = props(spec={"type": "object"})
    validate_crd(crd(versions=[version("v1"), version("v2", other, storage=False)]),
                 cel_compile=compile_)
    assert calls == [("spec.versions[0].schema.openAPIV3Schema", SPEC_SCHEMA),
                     ("spec.versions[1].schema.openAPIV3Schema", other)]
    calls.clear()
    validate_crd(crd(props(a={})), cel_compile=compile_)
    assert calls == []


# -- updates and status ------------------------------------------------------------------------


def test_what_may_not_change():
    old = crd()
    new = crd(group="example.org", names={"plural": "gadgets", "singular": "widget",
                                           "kind": "Gadget", "listKind": "GadgetList"},
              scope="Cluster")
    assert triples(validate_crd_update(new, old)) == [
        inv("spec.group", '"example.org": field is immutable'),
        inv("spec.names.plural", '"gadgets": field is immutable')]
    assert triples(validate_crd_update(new, established(old))) == [
        inv("spec.scope", '"Cluster": field is immutable'),
        inv("spec.names.kind", '"Gadget": field is immutable'),
        inv("spec.group", '"example.org": field is immutable'),
        inv("spec.names.plural", '"gadgets": field is immutable')]


def test_updates_keep_what_the_old_object_already_broke():
    legacy = crd(props(a={"type": "foo"}))
    unsupported = unsup(f"{V}.properties[a].type", "foo", "array", "boolean", "integer",
                        "number", "object", "string")
    assert causes(legacy) == [unsupported]
    assert validate_crd_update(legacy, legacy) == []
    assert triples(validate_crd_update(legacy, crd())) == [unsupported]
    # structural schemas are always required once unknown fields are pruned
    nested = crd(props(a={}))
    assert triples(validate_crd_update(nested, nested)) == [
        req(f"{V}.properties[a].type", "must not be empty for specified object fields")]
    conversion = webhook(service=SERVICE)
    conversion["webhook"]["conversionReviewVersions"] = ["v2"]
    old_webhook = crd(conversion=conversion)
    assert validate_crd_update(old_webhook, old_webhook) == []
    assert triples(validate_crd_update(old_webhook, crd())) == [
        inv("spec.conversion.conversionReviewVersions",
            '[]string{"v2"}: must include at least one of v1, v1beta1')]
    schemaless = crd(versions=[version(schema=False), version("v2", schema=False,
                                                               storage=False, served=False)])
    assert triples(validate_crd_update(schemaless, schemaless)) == [
        req("spec.versions[0].schema.openAPIV3Schema", "because otherwise all fields are "
            "pruned")]


def test_status_updates_check_the_accepted_names():
    new = crd(status={"storedVersions": [], "acceptedNames": {
        "plural": "Widgets", "kind": "Widget", "listKind": "Widget"}})
    assert triples(validate_crd_status(new, crd())) == [
        inv("status.acceptedNames.plural", f'"Widgets": {DNS1035}'),
        inv("status.acceptedNames.listKind", '"Widget": kind and listKind may not be the '
            "same")]
    assert validate_crd_status(crd(), crd()) == []


# -- real manifests ----------------------------------------------------------------------------


def manifest(name: str) -> dict:
    obj = yaml.load((DATA / name).read_text(), Loader=LOADER)
    obj.pop("status", None)
    default_crd(obj)
    return obj


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.yaml")))
def test_real_manifests_are_valid(name):
    obj = manifest(name)
    calls: list[str] = []
    assert causes(obj, cel_compile=lambda s, p: calls.append(p) or []) == []
    assert calls == [V]  # every version of these shares one schema
    assert validate_crd_update(obj, established(copy.deepcopy(obj))) == []


def test_httproute_without_its_approval():
    obj = manifest("gateway.networking.k8s.io_httproutes.yaml")
    del obj["metadata"]["annotations"]["api-approved.kubernetes.io"]
    assert causes(obj) == [req(APPROVAL, 'protected groups must have approval annotation '
                               f'"api-approved.kubernetes.io", {PR}')]


def test_a_broken_real_manifest():
    obj = manifest("monitoring.coreos.com_servicemonitors.yaml")
    spec = obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["endpoints"]["items"]["type"]
    assert causes(obj) == [
        req(f"{V}.properties[spec].properties[endpoints].items.type",
            "must not be empty for specified array items")]
