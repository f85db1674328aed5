"""/openapi/v2 as gnostic's protobuf (openapi.v2.Document): encoded, then decoded with the protobuf
runtime and the same descriptors, and turned back into JSON the way gnostic's types read; the
result must equal the JSON document. Also the wire details kubectl depends on (field numbers
of the messages it reads, extensions as YAML text, empty maps present)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from google.protobuf.message import Message

from gateway.apis.install import build_kube_core
from gateway.registry.options import StoreOptions
from gateway.server import openapi
from gateway.server.openapi import v2_document, v2_message, v2_protobuf
from gateway.storage.factory import StorageFactory
from gateway.storage.sqlite import SQLiteStorage
from tests.support import backend

# -- decoding back to JSON ----------------------------------------------------------------------


def _json_key(field: str) -> str:
    if field == "_ref":
        return "$ref"
    head, *rest = field.split("_")
    return head + "".join(w.title() for w in rest)


def to_json(message: Message) -> Any:
    """A decoded openapi.v2 message as the JSON it stands for (gnostic's reading)."""
    name = message.DESCRIPTOR.name
    fields = {f.name: v for f, v in message.ListFields()}
    if name == "Any":
        return yaml.safe_load(fields.get("yaml", ""))
    if name in ("TypeItem", "StringArray"):
        values = list(fields.get("value", []))
        return values[0] if name == "TypeItem" and len(values) == 1 else values
    if name == "ItemsItem":
        schemas = [to_json(s) for s in fields.get("schema", [])]
        return schemas[0] if len(schemas) == 1 else schemas
    if message.DESCRIPTOR.oneofs:  # a wrapper: its one member is the content
        (value,) = fields.values()
        return value if isinstance(value, bool) else to_json(value)
    if list(message.DESCRIPTOR.fields_by_name) == ["additional_properties"]:
        return {entry.name: _entry_value(entry) for entry in fields.get(
            "additional_properties", [])}
    out: dict[str, Any] = {}
    for field, value in fields.items():
        if field in ("vendor_extension", "path", "response_code"):
            for entry in value:
                out[entry.name] = _entry_value(entry)
            continue
        descriptor = message.DESCRIPTOR.fields_by_name[field]
        if descriptor.message_type is None:
            out[_json_key(field)] = list(value) if _repeated(descriptor) else value
        elif _repeated(descriptor):
            out[_json_key(field)] = [to_json(v) for v in value]
        else:
            out[_json_key(field)] = to_json(value)
    return out


def _repeated(descriptor: Any) -> bool:
    return bool(descriptor.is_repeated)


def _entry_value(entry: Message) -> Any:
    value = entry.value
    return value if isinstance(value, str) else to_json(value)


def without_empty_lists(value: Any) -> Any:
    """What survives the protobuf form: an empty repeated field is no field (the same in
    gnostic's own encoding); empty objects stay (they are messages)."""
    if isinstance(value, dict):
        return {k: without_empty_lists(v) for k, v in value.items() if v != []}
    if isinstance(value, list):
        return [without_empty_lists(v) for v in value]
    return value


def round_trip(document: dict[str, Any]) -> Any:
    decoded = v2_message("Document")()
    decoded.ParseFromString(v2_protobuf(document))
    return to_json(decoded)


# -- documents ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway_document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("openapi") / "state.db"
    core = build_kube_core(StoreOptions(StorageFactory(SQLiteStorage(path))),
                           min_request_timeout=1800, stopping=None)
    return v2_document([resource for resource, _ in core.served()])


EVERYTHING: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "T", "version": "v9", "description": "d", "termsOfService": "tos",
             "contact": {"name": "n", "url": "u", "email": "e"},
             "license": {"name": "Apache", "url": "l", "x-license": "yes"},
             "x-info": {"nested": [1, 2.5, "three", None, True]}},
    "host": "example.com", "basePath": "/base", "schemes": ["https"],
    "consumes": ["application/json"], "produces": ["application/json", "application/yaml"],
    "paths": {
        "/things/{name}": {
            "parameters": [{"$ref": "#/parameters/name"}],
            "get": {
                "tags": ["things"], "summary": "s", "description": "d", "operationId": "getThing",
                "externalDocs": {"url": "https://docs"},
                "parameters": [
                    {"name": "limit", "in": "query", "type": "integer", "format": "int32",
                     "maximum": 100, "minimum": 1.5, "exclusiveMaximum": True,
                     "uniqueItems": True, "enum": [1, 2], "default": 10,
                     "collectionFormat": "csv", "allowEmptyValue": True},
                    {"name": "X-Trace", "in": "header", "type": "string", "maxLength": 20,
                     "pattern": "^[a-z]+$", "required": True},
                    {"name": "file", "in": "formData", "type": "file"},
                    {"name": "name", "in": "path", "type": "array", "required": True,
                     "items": {"type": "string", "items": {"type": "integer"},
                               "x-item": "i"}},
                    {"name": "body", "in": "body", "required": True,
                     "schema": {"$ref": "#/definitions/Thing"}, "x-body": 1},
                ],
                "responses": {
                    "200": {"description": "OK", "schema": {"$ref": "#/definitions/Thing"},
                            "headers": {"X-Rate": {"type": "integer", "description": "r"}},
                            "examples": {"application/json": {"a": 1}}},
                    "201": {"description": "file", "schema": {"type": "file"}},
                    "default": {"$ref": "#/responses/Error"},
                    "x-responses": "ext",
                },
                "schemes": ["https"], "deprecated": True,
                "security": [{"key": []}, {"oauth": ["read", "write"]}],
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": {"group": "", "kind": "Thing",
                                                    "version": "v1"},
            },
            "x-path": "p",
        },
        "x-paths": {"a": "b"},
    },
    "definitions": {
        "Thing": {
            "type": "object", "required": ["spec"], "title": "Thing", "format": "f",
            "description": "A thing.", "discriminator": "kind", "readOnly": True,
            "maxProperties": 9, "minProperties": 1, "multipleOf": 0.5,
            "default": {"spec": {}}, "example": ["ex"],
            "externalDocs": {"description": "more", "url": "https://more"},
            "xml": {"name": "thing", "namespace": "ns", "prefix": "p", "attribute": True,
                    "wrapped": True},
            "properties": {
                "spec": {"type": "object", "additionalProperties": {"type": "string"}},
                "open": {"type": "object", "additionalProperties": True},
                "closed": {"type": "object", "additionalProperties": False},
                "empty": {"type": "object", "properties": {}},
                "list": {"type": "array", "items": {"$ref": "#/definitions/Other"},
                         "maxItems": 3, "minItems": 1, "uniqueItems": True,
                         "x-kubernetes-list-type": "map",
                         "x-kubernetes-list-map-keys": ["name"]},
                "tuple": {"type": "array", "items": [{"type": "string"},
                                                     {"type": "integer"}]},
                "either": {"type": ["string", "integer"]},
                "combined": {"allOf": [{"$ref": "#/definitions/Other"}, {"type": "object"}]},
                "choice": {"type": "string", "enum": ["a", "b", None],
                           "x-kubernetes-int-or-string": True},
                "big": {"type": "integer", "format": "int64", "maxLength": 2**40,
                        "minLength": 2, "maximum": 1e300, "exclusiveMinimum": True},
                "unicode": {"type": "string", "description": "naïve ☃ \"quoted\"\n"},
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Thing",
                                                 "version": "v1"}],
        },
        "Other": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
    "parameters": {
        "name": {"name": "name", "in": "path", "required": True, "type": "string"},
        "payload": {"name": "payload", "in": "body", "schema": {"type": "object"}},
    },
    "responses": {"Error": {"description": "failure", "schema": {"type": "object"}}},
    "security": [{"key": []}],
    "securityDefinitions": {
        "key": {"type": "apiKey", "name": "Authorization", "in": "header"},
        "basic": {"type": "basic", "description": "b"},
        "implicit": {"type": "oauth2", "flow": "implicit", "authorizationUrl": "https://a",
                     "scopes": {"read": "r"}},
        "password": {"type": "oauth2", "flow": "password", "tokenUrl": "https://t",
                     "scopes": {}},
        "app": {"type": "oauth2", "flow": "application", "tokenUrl": "https://t",
                "scopes": {"w": "write"}},
        "code": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "https://a",
                 "tokenUrl": "https://t", "scopes": {"x": "y"}, "x-oauth": 1},
    },
    "tags": [{"name": "things", "description": "Things.", "externalDocs": {"url": "u"},
              "x-tag": True}],
    "externalDocs": {"description": "all", "url": "https://all"},
    "x-document": {"k": "v"},
}


# -- tests --------------------------------------------------------------------------------------


def test_the_gateways_own_document_round_trips(gateway_document):
    assert "io.k8s.api.core.v1.ConfigMap" in gateway_document["definitions"]
    assert round_trip(gateway_document) == without_empty_lists(gateway_document)


def test_a_backends_document_round_trips():
    document = backend.openapi_v2()
    assert round_trip(document) == document


def test_every_openapi_v2_construct_round_trips():
    assert round_trip(copy.deepcopy(EVERYTHING)) == EVERYTHING


def test_wire_layout_kubectl_reads(gateway_document):
    """Field numbers as in gnostic's OpenAPIv2.proto, checked on the raw bytes: Document.paths
    is field 8, .definitions 9; a named entry is name=1, value=2."""
    data = v2_protobuf({"swagger": "2.0", "definitions": {"A": {"type": "object"}},
                        "paths": {"/a": {}}})
    assert data[:5] == b"\x0a\x032.0"  # field 1 (swagger), length 3
    assert b"\x42\x06\x12\x04\x0a\x02/a" in data  # field 8 → Paths.path (2) → name "/a"
    assert data.endswith(b"\x4a\x12\x0a\x10\x0a\x01A\x12\x0b\xb2\x01\x08\x0a\x06object")


def test_extensions_are_yaml_text():
    document = {"swagger": "2.0", "definitions": {"A": {
        "type": "object", "x-kubernetes-group-version-kind": [
            {"group": "", "kind": "A", "version": "v1"}]}}}
    decoded = v2_message("Document")()
    decoded.ParseFromString(v2_protobuf(document))
    (entry,) = decoded.definitions.additional_properties
    (extension,) = entry.value.vendor_extension
    assert extension.name == "x-kubernetes-group-version-kind"
    assert yaml.safe_load(extension.value.yaml) == [{"group": "", "kind": "A", "version": "v1"}]


def test_empty_properties_are_present():
    """``"properties": {}`` is an object with no fields, not a map: the message must be there
    (kube-openapi tells a kind from a map by it)."""
    document = {"swagger": "2.0", "definitions": {"A": {"type": "object", "properties": {}},
                                                  "B": {"type": "object"}}}
    decoded = v2_message("Document")()
    decoded.ParseFromString(v2_protobuf(document))
    a, b = decoded.definitions.additional_properties
    assert a.value.HasField("properties") and not b.value.HasField("properties")


def test_values_of_the_wrong_json_type_are_left_out():
    document = {"swagger": "2.0", "info": {"title": 5, "version": "v1"},
                "definitions": {"A": {"type": "integer", "maxLength": "long", "minimum": True,
                                      "required": ["a", 3], "unknownKeyword": 1}}}
    assert round_trip(document) == {
        "swagger": "2.0", "info": {"version": "v1"},
        "definitions": {"A": {"type": "integer", "required": ["a"]}}}


def test_numbers_out_of_range_are_left_out():
    document = {"swagger": "2.0", "definitions": {"A": {
        "type": "integer", "maxLength": 2**64, "minLength": -(2**63), "maximum": 10**400,
        "x-big": 2**70, "enum": [2**65]}}}
    assert round_trip(document) == {"swagger": "2.0", "definitions": {"A": {
        "type": "integer", "minLength": -(2**63), "x-big": 2**70, "enum": [2**65]}}}


def test_the_descriptor_matches_gnostics_message_names():
    names = set(openapi._V2_MESSAGES)
    for expected in ("Document", "Info", "Paths", "PathItem", "Operation", "Definitions",
                     "NamedSchema", "Schema", "NamedAny", "Any", "ParametersItem",
                     "QueryParameterSubSchema", "VendorExtension"):
        assert expected in names
    assert v2_message("Document").DESCRIPTOR.full_name == "openapi.v2.Document"
    assert v2_message("Schema").DESCRIPTOR.fields_by_name["vendor_extension"].number == 31
    assert v2_message("Operation").DESCRIPTOR.fields_by_name["parameters"].number == 8
