"""Custom resources in /openapi/v2 and /openapi/v3 as apiextensions-apiserver v1.32 publishes
them: a served CRD version's schema in its structural form with apiVersion, kind, metadata
and the group-version-kind added (its list beside it), converted for v2 (no junctors, no
nullable, no defaults); the paths of every verb with the CR's patch types, status and scale;
no dangling reference in either document, the protobuf form included; the documents follow a
CRD whose schema changes or whose version goes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

import gateway.schema.meta  # noqa: F401  (ObjectMeta, ListMeta, Status, ... in DEFINITIONS)
from gateway.apiextensions.customresource import resource_of, served_versions
from gateway.apimachinery.status import StatusError
from gateway.registry.resource import ResourceDef
from gateway.schema.dsl import DEFINITIONS
from gateway.server.genericapiserver import GenericAPIServer
from gateway.server.openapi import OpenAPI, v2_document, v3_document
from gateway.server.openapi_custom import (
    SCALE,
    structural,
    to_openapi_v2,
    unfold,
)
from gateway.server.openapi_paths import (
    operation_id_and_tags,
    resource_paths,
    valid_operation_id,
)
from tests.unit.test_openapi_protobuf import round_trip, without_empty_lists

GROUP = "stable.example.com"
NAME = "com.example.stable.v1.CronTab"
LIST = "com.example.stable.v1.CronTabList"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
V3_PREFIX = "#/components/schemas/"
GVK = [{"group": GROUP, "kind": "CronTab", "version": "v1"}]
CR_PATCH = ["application/json-patch+json", "application/merge-patch+json",
            "application/apply-patch+yaml"]


def crd(schema: dict[str, Any] | None = None, *, versions: tuple[str, ...] = ("v1",),
        scope: str = "Namespaced", list_kind: str = "CronTabList",
        subresources: dict[str, Any] | None = None,
        selectable: list[str] | None = None) -> dict[str, Any]:
    names = {"plural": "crontabs", "singular": "crontab", "kind": "CronTab",
             "listKind": list_kind}
    entries = []
    for index, version in enumerate(versions):
        entry: dict[str, Any] = {"name": version, "served": True, "storage": index == 0}
        if schema is not None:
            entry["schema"] = {"openAPIV3Schema": copy.deepcopy(schema)}
        if subresources is not None:
            entry["subresources"] = subresources
        if selectable is not None:
            entry["selectableFields"] = [{"jsonPath": p} for p in selectable]
        entries.append(entry)
    return {"metadata": {"name": f"crontabs.{GROUP}"},
            "spec": {"group": GROUP, "scope": scope, "names": names, "versions": entries},
            "status": {"acceptedNames": names}}


def resources(obj: dict[str, Any]) -> list[ResourceDef]:
    return [resource_of(served) for served in served_versions(obj)]


def resource(schema: dict[str, Any] | None = None, **kw: Any) -> ResourceDef:
    return resources(crd(schema, **kw))[0]


def definition(schema: dict[str, Any] | None, *, v2: bool, **kw: Any) -> dict[str, Any]:
    r = resource(schema, **kw)
    if v2:
        return v2_document([r])["definitions"][r.schema]
    return v3_document([r])["components"]["schemas"][r.schema]


def without_meta_descriptions(schema: dict[str, Any]) -> dict[str, Any]:
    """kube's builder tests compare after wiping the descriptions of apiVersion, kind and
    metadata (TypeMeta's and ObjectMeta's words)."""
    out = copy.deepcopy(schema)
    for name in ("apiVersion", "kind", "metadata"):
        if name in out.get("properties", {}):
            out["properties"][name].pop("description", None)
    return out


SPEC = {"type": "object", "properties": {"spec": {"type": "object"},
                                         "status": {"type": "object"}}}
TYPE_META = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}


# -- the kind's definition: kube's builder_test cases -----------------------------------------


@pytest.mark.parametrize("v2", [True, False])
def test_no_schema_is_an_object_with_its_gvk(v2):
    assert definition(None, v2=v2) == {
        "type": "object", "x-kubernetes-group-version-kind": GVK,
        "x-kubernetes-selectable-fields": []}


@pytest.mark.parametrize("v2, metadata", [
    (True, {"$ref": f"#/definitions/{META}.ObjectMeta"}),
    (False, {"allOf": [{"$ref": f"{V3_PREFIX}{META}.ObjectMeta"}]}),
])
def test_properties_get_type_meta_and_object_meta(v2, metadata):
    got = definition(SPEC, v2=v2)
    assert without_meta_descriptions(got) == {
        "type": "object",
        "properties": {"spec": {"type": "object"}, "status": {"type": "object"},
                       "metadata": metadata, **TYPE_META},
        "x-kubernetes-group-version-kind": GVK, "x-kubernetes-selectable-fields": []}
    assert got["properties"]["metadata"]["description"].startswith(
        "Standard object's metadata.")
    assert got["properties"]["apiVersion"]["description"]
    assert got["properties"]["kind"]["description"]


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"spec": {"type": "bug"}, "status": {"type": "object"}}},
    {"type": "object", "properties": {"foo": {"type": "array"}}},  # not structural: no items
    {"type": "object", "properties": {"foo": {"type": "string", "nullable": False,
                                              "$ref": "#/definitions/x"}}},
    {},  # no type at the root
])
@pytest.mark.parametrize("v2", [True, False])
def test_unusable_schemas_are_bare_objects(schema, v2):
    assert definition(schema, v2=v2) == {
        "type": "object", "x-kubernetes-group-version-kind": GVK,
        "x-kubernetes-selectable-fields": []}


def test_a_root_preserving_unknown_fields_is_bare_in_v2_only():
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
              "properties": {"foo": {"type": "string"}}}
    assert definition(schema, v2=True) == {
        "type": "object", "x-kubernetes-group-version-kind": GVK,
        "x-kubernetes-selectable-fields": []}
    v3 = definition(schema, v2=False)
    assert v3["x-kubernetes-preserve-unknown-fields"] is True
    assert set(v3["properties"]) == {"foo", "apiVersion", "kind", "metadata"}


def test_v2_drops_one_of_v3_keeps_it():
    schema = {"type": "object", "properties": {"foo": {
        "type": "string", "oneOf": [{"pattern": "a"}, {"pattern": "b"}]}}}
    assert definition(schema, v2=True)["properties"]["foo"] == {"type": "string"}
    assert definition(schema, v2=False)["properties"]["foo"] == {
        "type": "string", "oneOf": [{"pattern": "a"}, {"pattern": "b"}]}


def test_v3_keeps_nullable_and_defaults_v2_prunes_them():
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "nullable": True,
                 "properties": {"field": {"type": "string", "default": "foo"}}},
        "other": {"type": "object", "properties": {
            "field": {"type": "string", "default": "foo"},
            "many": {"type": "array", "default": [{"a": 1}],
                     "items": {"type": "object", "default": {"$ref": "x"},
                               "properties": {"a": {"type": "integer", "default": 2}}}}}}}}
    v3 = definition(schema, v2=False)["properties"]
    assert v3["spec"] == schema["properties"]["spec"]
    assert v3["other"] == schema["properties"]["other"]
    v2 = definition(schema, v2=True)["properties"]
    assert v2["spec"] == {}  # nullable: no type, no properties
    assert v2["other"] == {"type": "object", "properties": {
        "field": {"type": "string"},
        "many": {"type": "array", "items": {"type": "object", "properties": {
            "a": {"type": "integer"}}}}}}


def test_selectable_fields_are_listed_on_the_kind_and_the_list():
    r = resource(SPEC, selectable=[".spec.color", "spec.size"])
    want = [{"fieldPath": "spec.color"}, {"fieldPath": "spec.size"}]
    for document, key in ((v2_document([r]), "definitions"),
                          (v3_document([r]), "components")):
        schemas = document[key] if key == "definitions" else document[key]["schemas"]
        assert schemas[NAME]["x-kubernetes-selectable-fields"] == want
        assert schemas[LIST]["x-kubernetes-selectable-fields"] == want


# -- the structural form ---------------------------------------------------------------------------


def test_structural_keeps_what_a_structural_schema_has():
    schema = {
        "type": "object", "description": "d", "title": "", "example": {"a": 1},
        "externalDocs": {"url": "u"}, "nullable": False, "uniqueItems": False,
        "x-kubernetes-embedded-resource": False, "x-kubernetes-int-or-string": False,
        "x-kubernetes-list-map-keys": [], "enum": [], "required": [],
        "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "",
                                      "messageExpression": "'x'", "reason": None,
                                      "fieldPath": ".a"}],
        "x-kubernetes-map-type": "granular", "format": "", "pattern": "^a",
        "maxProperties": 0, "minProperties": 1, "properties": {},
        "additionalProperties": {"type": "number", "maximum": 3.0, "minimum": 0.5,
                                 "exclusiveMaximum": True, "multipleOf": 2.0},
        "allOf": [{"properties": {"a": {"maximum": 1}},
                   "additionalProperties": {"maximum": 2}, "nullable": True}],
        "not": {"required": ["b"]}, "anyOf": [],
    }
    assert structural(schema) == {
        "type": "object", "description": "d",
        "x-kubernetes-validations": [{"rule": "self.a > 0", "messageExpression": "'x'",
                                      "fieldPath": ".a"}],
        "x-kubernetes-map-type": "granular", "pattern": "^a", "maxProperties": 0,
        "minProperties": 1,
        "additionalProperties": {"type": "number", "maximum": 3, "minimum": 0.5,
                                 "exclusiveMaximum": True, "multipleOf": 2},
        # a nested value validation writes no additionalProperties back
        "allOf": [{"properties": {"a": {"maximum": 1}}, "nullable": True}],
        "not": {"required": ["b"]},
    }


def test_additional_properties_false_and_true_stay():
    assert structural({"type": "object", "additionalProperties": False}) == {
        "type": "object", "additionalProperties": False}
    assert structural({"type": "object", "additionalProperties": True}) == {
        "type": "object", "additionalProperties": True}


@pytest.mark.parametrize("schema, unfolded", [
    ({"x-kubernetes-int-or-string": True},
     {"x-kubernetes-int-or-string": True,
      "anyOf": [{"type": "integer"}, {"type": "string"}]}),
    # already the pattern: left alone
    ({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
     {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ({"x-kubernetes-int-or-string": True,
      "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "a"}]},
     {"x-kubernetes-int-or-string": True,
      "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "a"}]}),
    # an anyOf of its own: the pattern goes first in allOf
    ({"x-kubernetes-int-or-string": True, "anyOf": [{"maximum": 3}, {"pattern": "a"}],
      "allOf": [{"minimum": 1}]},
     {"x-kubernetes-int-or-string": True, "anyOf": [{"maximum": 3}, {"pattern": "a"}],
      "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"minimum": 1}]}),
])
def test_unfold_int_or_string(schema, unfolded):
    wrapped = {"type": "object", "properties": {"port": schema}}
    unfold(wrapped)
    assert wrapped["properties"]["port"] == unfolded


def test_int_or_string_in_both_documents():
    schema = {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True}}}
    assert definition(schema, v2=False)["properties"]["port"] == {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert definition(schema, v2=True)["properties"]["port"] == {
        "x-kubernetes-int-or-string": True}


def test_to_openapi_v2_rules():
    schema = {
        "type": "object", "required": ["a", "b", "c"],
        "allOf": [{"required": ["a"]}], "anyOf": [{"required": ["b"]}],
        "oneOf": [{"required": ["c"]}], "not": {"required": ["d"]},
        "properties": {
            "a": {"type": "string", "nullable": True},
            "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                  "properties": {"x": {"type": "string"}}},
            "c": {"type": "array", "x-kubernetes-preserve-unknown-fields": True,
                  "items": {"type": "string"}},
            "d": {"type": "array", "nullable": True, "items": {"type": "string"}},
            "e": {"type": "object", "required": ["k"],
                  "additionalProperties": {"type": "string", "nullable": True}},
            "f": {"type": "object", "nullable": True,
                  "additionalProperties": {"type": "string"}},
        },
    }
    to_openapi_v2(schema)
    assert schema == {
        "type": "object", "required": ["b", "c"],
        "properties": {
            "a": {},
            "b": {"x-kubernetes-preserve-unknown-fields": True},
            "c": {"x-kubernetes-preserve-unknown-fields": True},
            "d": {},
            "e": {"type": "object", "additionalProperties": {}},
            "f": {"additionalProperties": {"type": "string"}},
        },
    }


def test_embedded_resources_get_type_meta_and_metadata():
    schema = {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                     "required": ["spec"], "properties": {"spec": {"type": "object"}}},
        "raw": {"type": "object", "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True},
    }}
    v3 = definition(schema, v2=False)["properties"]
    assert set(v3["template"]["properties"]) == {"spec", "apiVersion", "kind", "metadata"}
    assert v3["template"]["required"] == ["spec", "kind", "apiVersion"]
    assert v3["template"]["properties"]["metadata"]["allOf"] == [
        {"$ref": f"{V3_PREFIX}{META}.ObjectMeta"}]
    assert v3["template"]["properties"]["kind"]["description"].startswith(
        "kind is a string value")
    assert set(v3["raw"]["properties"]) == {"apiVersion", "kind", "metadata"}
    v2 = definition(schema, v2=True)["properties"]
    assert v2["template"]["properties"]["metadata"]["$ref"] == \
        f"#/definitions/{META}.ObjectMeta"
    assert v2["template"]["required"] == ["spec", "kind", "apiVersion"]
    # v2, unknown fields preserved: nothing added (kubectl would refuse the unknown ones)
    assert v2["raw"] == {"x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True}


# -- the list and the paths -------------------------------------------------------------------


def test_the_list_is_named_by_the_list_kind():
    r = resource(SPEC, list_kind="CronTabCollection")
    schemas = v3_document([r])["components"]["schemas"]
    listed = schemas["com.example.stable.v1.CronTabCollection"]
    assert LIST not in schemas
    assert listed["required"] == ["items"]
    assert listed["properties"]["items"] == {
        "type": "array", "items": {"$ref": f"{V3_PREFIX}{NAME}"},
        "description": "List of crontabs. More info: "
                       "https://git.k8s.io/community/contributors/devel/sig-architecture/"
                       "api-conventions.md"}
    assert listed["properties"]["metadata"]["allOf"] == [{"$ref": f"{V3_PREFIX}{META}.ListMeta"}]
    assert listed["x-kubernetes-group-version-kind"] == [
        {"group": GROUP, "kind": "CronTabCollection", "version": "v1"}]
    assert listed["description"] == "CronTabCollection is a list of CronTab"
    get = v3_document([r])["paths"][f"/apis/{GROUP}/v1/namespaces/{{namespace}}/crontabs"]["get"]
    assert get["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": f"{V3_PREFIX}com.example.stable.v1.CronTabCollection"}


def test_paths_of_every_verb_with_status_and_scale():
    r = resource(SPEC, subresources={"status": {}, "scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}})
    paths = v3_document([r])["paths"]
    base = f"/apis/{GROUP}/v1"
    collection = f"{base}/namespaces/{{namespace}}/crontabs"
    item = collection + "/{name}"
    assert sorted(paths) == sorted([f"{base}/crontabs", collection, item, item + "/status",
                                    item + "/scale"])
    ids = {(path, method): op["operationId"] for path, ops in paths.items()
           for method, op in ops.items() if method != "parameters"}
    assert ids == {
        (f"{base}/crontabs", "get"): "listStableExampleComV1CronTabForAllNamespaces",
        (collection, "get"): "listStableExampleComV1NamespacedCronTab",
        (collection, "post"): "createStableExampleComV1NamespacedCronTab",
        (collection, "delete"): "deleteStableExampleComV1CollectionNamespacedCronTab",
        (item, "get"): "readStableExampleComV1NamespacedCronTab",
        (item, "put"): "replaceStableExampleComV1NamespacedCronTab",
        (item, "patch"): "patchStableExampleComV1NamespacedCronTab",
        (item, "delete"): "deleteStableExampleComV1NamespacedCronTab",
        (item + "/status", "get"): "readStableExampleComV1NamespacedCronTabStatus",
        (item + "/status", "put"): "replaceStableExampleComV1NamespacedCronTabStatus",
        (item + "/status", "patch"): "patchStableExampleComV1NamespacedCronTabStatus",
        (item + "/scale", "get"): "readStableExampleComV1NamespacedCronTabScale",
        (item + "/scale", "put"): "replaceStableExampleComV1NamespacedCronTabScale",
        (item + "/scale", "patch"): "patchStableExampleComV1NamespacedCronTabScale",
    }
    for ops in paths.values():
        for method, op in ops.items():
            if method == "parameters":
                continue
            assert op["tags"] == ["stableExampleCom_v1"]
            assert op["x-kubernetes-group-version-kind"] == GVK[0]
            if method == "patch":
                assert list(op["requestBody"]["content"]) == CR_PATCH
                assert "fieldValidation" in [p["name"] for p in op["parameters"]]
    scale = paths[item + "/scale"]
    assert scale["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": f"{V3_PREFIX}{SCALE}"}
    assert scale["put"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": f"{V3_PREFIX}{SCALE}"}
    status = paths[item + "/status"]["put"]
    assert status["requestBody"]["content"]["application/yaml"]["schema"] == {
        "$ref": f"{V3_PREFIX}{NAME}"}
    v2_paths = v2_document([r])["paths"]
    assert v2_paths[item]["patch"]["consumes"] == CR_PATCH
    assert v2_paths[item + "/scale"]["get"]["responses"]["200"]["schema"] == {
        "$ref": f"#/definitions/{SCALE}"}


def test_scale_is_kubes_autoscaling_v1_scale():
    scale = DEFINITIONS[SCALE]
    assert scale["x-kubernetes-group-version-kind"] == [
        {"group": "autoscaling", "kind": "Scale", "version": "v1"}]
    assert set(scale["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert DEFINITIONS[f"{SCALE}Spec"]["properties"]["replicas"]["format"] == "int32"
    status = DEFINITIONS[f"{SCALE}Status"]
    assert set(status["properties"]) == {"replicas", "selector"}
    assert status["required"] == ["replicas"]


def test_a_cluster_scoped_kind_has_no_namespace_paths():
    r = resource(SPEC, scope="Cluster")
    paths = v3_document([r])["paths"]
    assert sorted(paths) == [f"/apis/{GROUP}/v1/crontabs", f"/apis/{GROUP}/v1/crontabs/{{name}}"]
    assert paths[f"/apis/{GROUP}/v1/crontabs"]["get"]["operationId"] == \
        "listStableExampleComV1CronTab"


@pytest.mark.parametrize("operation, path, expected", [
    ("listNamespacedConfigMap", "/api/v1/namespaces/{namespace}/configmaps",
     ("listCoreV1NamespacedConfigMap", ["core_v1"])),
    ("deletecollectionNamespacedConfigMap", "/api/v1/namespaces/{namespace}/configmaps",
     ("deleteCoreV1CollectionNamespacedConfigMap", ["core_v1"])),
    ("readClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
     ("readRbacAuthorizationV1ClusterRole", ["rbacAuthorization_v1"])),
    ("patchFlowSchemaStatus",
     "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{name}/status",
     ("patchFlowcontrolApiserverV1FlowSchemaStatus", ["flowcontrolApiserver_v1"])),
    ("createNamespacedFoo", "/apis/my-group.example.com/v1alpha1/namespaces/{namespace}/foos",
     ("createMyGroupExampleComV1alpha1NamespacedFoo", ["myGroupExampleCom_v1alpha1"])),
])
def test_operation_ids_are_kubes(operation, path, expected):
    assert operation_id_and_tags(operation, path) == expected


def test_valid_operation_id():
    assert valid_operation_id("1abc-def.x_y9", True) == "AbcDefX_y9"
    assert valid_operation_id("abc", False) == "abc"


# -- whole documents ----------------------------------------------------------------------------


def _schema_refs(schema: Any, out: list[str]) -> None:
    """The references a schema makes, where a schema can make them (never inside default,
    enum or example values)."""
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("$ref"), str):
        out.append(schema["$ref"])
    for key in ("items", "additionalProperties", "not"):
        _schema_refs(schema.get(key), out)
    for key in ("allOf", "anyOf", "oneOf"):
        for clause in schema.get(key) or []:
            _schema_refs(clause, out)
    for prop in (schema.get("properties") or {}).values():
        _schema_refs(prop, out)


def _path_refs(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "schema":
                _schema_refs(value, out)
            else:
                _path_refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _path_refs(value, out)


def dangling(document: dict[str, Any]) -> list[str]:
    prefix, schemas = ("#/definitions/", document["definitions"]) if "definitions" in \
        document else (V3_PREFIX, document["components"]["schemas"])
    refs: list[str] = []
    _path_refs(document["paths"], refs)
    for schema in schemas.values():
        _schema_refs(schema, refs)
    return sorted({r for r in refs if not r.startswith(prefix) or
                   r[len(prefix):] not in schemas})


TRICKY = {"type": "object", "properties": {"spec": {
    "type": "object",
    "properties": {
        "$ref": {"type": "string", "default": "#/definitions/nothing",
                 "enum": ["#/definitions/nothing", "b"]},
        "x-kubernetes-like": {"type": "object", "default": {"$ref": "nothing"},
                              "x-kubernetes-preserve-unknown-fields": True},
        "mixed": {"x-kubernetes-int-or-string": True, "enum": [1, "two", 3.5],
                  "default": 1},
        "rules": {"type": "array", "items": {"type": "string", "format": "byte"},
                  "x-kubernetes-list-type": "set", "maxItems": 4,
                  "x-kubernetes-validations": [{"rule": "self.size() > 0",
                                                "message": "not empty"}]},
    }}}}


def test_documents_have_no_dangling_references():
    with_scale = crd(TRICKY, versions=("v1", "v1beta1"), subresources={
        "status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                "statusReplicasPath": ".status.replicas"}})
    served = resources(with_scale)
    v2 = v2_document(served)
    v3 = v3_document(served)
    assert dangling(v2) == [] and dangling(v3) == []
    for version in ("v1", "v1beta1"):
        name = f"com.example.stable.{version}.CronTab"
        assert name in v2["definitions"] and name + "List" in v2["definitions"]
        assert name in v3["components"]["schemas"]
    for name in (f"{META}.ObjectMeta", f"{META}.ListMeta", f"{META}.Status",
                 f"{META}.DeleteOptions", f"{META}.Patch", SCALE, f"{SCALE}Spec",
                 f"{SCALE}Status"):
        assert name in v2["definitions"] and name in v3["components"]["schemas"], name
    # a property named $ref, and $ref-looking values, are what the CRD says
    spec = v3["components"]["schemas"][NAME]["properties"]["spec"]["properties"]
    assert spec["$ref"] == {"type": "string", "default": "#/definitions/nothing",
                            "enum": ["#/definitions/nothing", "b"]}
    assert spec["x-kubernetes-like"]["default"] == {"$ref": "nothing"}
    assert spec["mixed"]["enum"] == [1, "two", 3.5]
    assert spec["rules"]["x-kubernetes-validations"] == [
        {"rule": "self.size() > 0", "message": "not empty"}]


def test_the_protobuf_form_carries_custom_resources():
    served = resources(crd(TRICKY, subresources={"scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}))
    document = v2_document(served)
    decoded = round_trip(document)
    assert without_empty_lists(decoded) == without_empty_lists(json.loads(json.dumps(document)))
    assert decoded["definitions"][NAME]["x-kubernetes-selectable-fields"] == []
    spec = decoded["definitions"][NAME]["properties"]["spec"]["properties"]
    assert spec["$ref"] == {"type": "string", "enum": ["#/definitions/nothing", "b"]}
    assert spec["mixed"] == {"x-kubernetes-int-or-string": True, "enum": [1, "two", 3.5]}
    assert spec["rules"]["x-kubernetes-list-type"] == "set"
    kind = decoded["definitions"][NAME]
    assert kind["x-kubernetes-group-version-kind"] == GVK
    assert kind["properties"]["metadata"]["$ref"] == f"#/definitions/{META}.ObjectMeta"


# -- following the CRD ------------------------------------------------------------------------


async def _noop(*_: Any) -> Any:
    return None


def _index(openapi: OpenAPI) -> dict[str, str]:
    return {gv: entry["serverRelativeURL"] for gv, entry in openapi.v3_paths().items()}


async def _document(openapi: OpenAPI, url: str) -> tuple[int, Any]:
    try:
        response = await openapi.v3_group_version(make_mocked_request("GET", url))
    except StatusError as err:
        return err.code, None
    if response.status != 200:
        return response.status, response.headers.get("Location")
    return 200, json.loads(response.body)


async def test_documents_follow_schema_changes_and_unserved_versions():
    server = GenericAPIServer("apiextensions")
    openapi = OpenAPI(lambda: server.api_resources)
    server.on_change(openapi.invalidate)
    first = crd(SPEC, versions=("v1", "v1beta1"))
    for r in resources(first):
        server.install_api(r, _noop)
    index = _index(openapi)
    old_url = index[f"apis/{GROUP}/v1"]
    assert f"apis/{GROUP}/v1beta1" in index
    code, document = await _document(openapi, old_url)
    assert code == 200 and "color" not in \
        document["components"]["schemas"][NAME]["properties"]["spec"].get("properties", {})
    v2_before = openapi.v2_spec()

    changed = copy.deepcopy(SPEC)
    changed["properties"]["spec"]["properties"] = {"color": {"type": "string"}}
    second = crd(changed, versions=("v1", "v1beta1"))
    second["spec"]["versions"][1]["served"] = False
    server.install_api(resources(second)[0], _noop)  # re-installed: a new ResourceDef
    server.uninstall_api(resources(first)[1])

    index = _index(openapi)
    assert f"apis/{GROUP}/v1beta1" not in index
    new_url = index[f"apis/{GROUP}/v1"]
    assert new_url != old_url
    code, location = await _document(openapi, old_url)
    assert (code, location) == (301, new_url)
    code, document = await _document(openapi, new_url)
    assert document["components"]["schemas"][NAME]["properties"]["spec"]["properties"] == {
        "color": {"type": "string"}}
    assert await _document(openapi, f"/openapi/v3/apis/{GROUP}/v1beta1") == (404, None)
    v2 = openapi.v2_spec()
    assert v2 is not v2_before and v2.etag != v2_before.etag
    assert "com.example.stable.v1beta1.CronTab" not in v2.document["definitions"]
    assert v2.document["definitions"][NAME]["properties"]["spec"]["properties"] == {
        "color": {"type": "string"}}


@pytest.mark.parametrize("v3", [False, True])
def test_only_the_verbs_a_resource_serves_are_published(v3: bool) -> None:
    """A review is create-only: kube publishes its POST and nothing else (no by-name path, no
    list); an ordinary namespaced resource has every operation and its all-namespaces list.
    Found by fuzzing the documents: every other operation answered 405."""
    from gateway.apis.authentication.reviews import TOKEN_REVIEWS

    reviews = resource_paths(TOKEN_REVIEWS, v3)
    assert {path: sorted(set(ops) - {"parameters"}) for path, ops in reviews.items()} == {
        "/apis/authentication.k8s.io/v1/tokenreviews": ["post"]}
    lease = ResourceDef(group="coordination.k8s.io", version="v1", kind="Lease",
                        plural="leases", singular="lease", namespaced=True,
                        schema="io.k8s.api.coordination.v1.Lease")
    leases = resource_paths(lease, v3)
    base = "/apis/coordination.k8s.io/v1"
    assert {path: sorted(set(ops) - {"parameters"}) for path, ops in leases.items()} == {
        f"{base}/namespaces/{{namespace}}/leases": ["delete", "get", "post"],
        f"{base}/namespaces/{{namespace}}/leases/{{name}}": ["delete", "get", "patch", "put"],
        f"{base}/leases": ["get"]}
