"""The published schema of CustomResourceDefinition (apiextensions.k8s.io/v1): real CRD
manifests pass the generic field checker whole, and it still finds fields no CRD has."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gateway.schema import apiextensions as crd_schema
from gateway.schema.dsl import DEFINITIONS
from gateway.schema.walk import check, list_type, property_schema, resolve

DATA = Path(__file__).parents[2] / "data" / "crds"
MANIFESTS = sorted(p.name for p in DATA.glob("*.yaml"))
V1 = crd_schema.V1
CRD = {"$ref": f"{V1}.CustomResourceDefinition"}


def load(name: str) -> dict:
    return yaml.load((DATA / name).read_text(), Loader=getattr(yaml, "CSafeLoader",
                                                                yaml.SafeLoader))


def test_three_manifests_are_there():
    assert MANIFESTS == ["cert-manager.io_certificates.yaml",
                         "gateway.networking.k8s.io_httproutes.yaml",
                         "monitoring.coreos.com_servicemonitors.yaml"]


@pytest.mark.parametrize("name", MANIFESTS)
def test_real_manifests_have_no_unknown_fields_and_no_type_errors(name):
    manifest = load(name)
    kept = copy.deepcopy(manifest)
    result = check(manifest, CRD)
    assert (result.unknown, result.errors) == ([], [])
    assert manifest == kept  # nothing dropped, nothing rewritten


def minimal(schema: dict, **version) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}, **version}]}}


def test_json_values_of_any_type_are_kept():
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "default": 3, "enum": [1, 2, 3], "example": 2},
        "b": {"type": "object", "default": {"x": [1, "y", None, True]},
              "additionalProperties": True},
        "c": {"type": "object", "additionalProperties": {"type": "string", "default": "z"}},
        "d": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"},
                                                            {"type": "string"}]},
        "e": {"type": "array", "items": {"type": "boolean", "default": False},
              "default": [True], "example": [False]},
        "f": {"type": "string", "enum": ["a", None], "nullable": True, "default": None},
        "g": {"type": "number", "maximum": 1.5, "minimum": 0, "multipleOf": 0.5,
              "exclusiveMaximum": True},
    }, "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "positive",
                                     "reason": "FieldValueForbidden", "fieldPath": ".a",
                                     "optionalOldSelf": True, "messageExpression": "'x'"}]}
    obj = minimal(schema, additionalPrinterColumns=[{"name": "A", "type": "integer",
                                                     "jsonPath": ".a", "priority": 1,
                                                     "format": "int32",
                                                     "description": "a"}],
                  selectableFields=[{"jsonPath": ".a"}],
                  subresources={"status": {}, "scale": {"specReplicasPath": ".spec.r",
                                                        "statusReplicasPath": ".status.r",
                                                        "labelSelectorPath": ".status.s"}})
    obj["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://x", "caBundle": "aGVsbG8=",
                         "service": {"name": "s", "namespace": "n", "path": "/c",
                                     "port": 8443}}}}
    obj["status"] = {"acceptedNames": {"plural": "widgets", "kind": "Widget"},
                     "storedVersions": ["v1"],
                     "conditions": [{"type": "Established", "status": "True",
                                     "lastTransitionTime": "2024-01-01T00:00:00Z",
                                     "reason": "InitialNamesAccepted", "message": "ok"}]}
    kept = copy.deepcopy(obj)
    result = check(obj, CRD)
    assert (result.unknown, result.errors) == ([], [])
    assert obj == kept


def test_unknown_fields_are_found_and_dropped():
    obj = minimal({"type": "object", "typo": 1,
                   "properties": {"a": {"type": "string", "maxlength": 3}}}, servd=True)
    obj["spec"]["names"]["kindd"] = "W"
    obj["spec"]["conversion"] = {"strategy": "None", "webhook": {"clientconfig": {}}}
    result = check(obj, CRD)
    assert sorted(result.unknown) == [
        "spec.conversion.webhook.clientconfig",
        "spec.names.kindd",
        "spec.versions[0].schema.openAPIV3Schema.properties.a.maxlength",
        "spec.versions[0].schema.openAPIV3Schema.typo",
        "spec.versions[0].servd",
    ]
    assert "typo" not in obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert result.errors == []


def test_wrong_json_types_are_errors():
    obj = minimal({"type": "object", "maxLength": "3", "required": "a"}, served="yes")
    result = check(obj, CRD)
    assert result.errors == [
        "spec.versions[0].served: expected boolean, got string",
        "spec.versions[0].schema.openAPIV3Schema.maxLength: expected integer, got string",
        "spec.versions[0].schema.openAPIV3Schema.required: expected array, got string",
    ]


def test_definitions_and_their_list_types():
    names = sorted(n.rsplit(".", 1)[1] for n in DEFINITIONS if n.startswith(V1 + "."))
    assert names == sorted([
        "CustomResourceColumnDefinition", "CustomResourceConversion",
        "CustomResourceDefinition", "CustomResourceDefinitionCondition",
        "CustomResourceDefinitionList", "CustomResourceDefinitionNames",
        "CustomResourceDefinitionSpec", "CustomResourceDefinitionStatus",
        "CustomResourceDefinitionVersion", "CustomResourceSubresourceScale",
        "CustomResourceSubresourceStatus", "CustomResourceSubresources",
        "CustomResourceValidation", "ExternalDocumentation", "JSON", "JSONSchemaProps",
        "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool", "JSONSchemaPropsOrStringArray",
        "SelectableField", "ServiceReference", "ValidationRule", "WebhookClientConfig",
        "WebhookConversion"])
    crd = DEFINITIONS[f"{V1}.CustomResourceDefinition"]
    assert crd["x-kubernetes-group-version-kind"] == [
        {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition", "version": "v1"}]
    assert crd["required"] == ["spec"]
    spec = resolve(property_schema(crd, "spec"))
    assert spec["required"] == ["group", "names", "scope", "versions"]
    assert list_type(property_schema(spec, "versions")) == "atomic"
    status = resolve(property_schema(crd, "status"))
    conditions = property_schema(status, "conditions")
    assert (list_type(conditions), conditions["x-kubernetes-list-map-keys"]) == ("map", ["type"])
    props = DEFINITIONS[f"{V1}.JSONSchemaProps"]
    rules = props["properties"]["x-kubernetes-validations"]
    assert (rules["x-kubernetes-list-type"], rules["x-kubernetes-list-map-keys"],
            rules["x-kubernetes-patch-merge-key"]) == ("map", ["rule"], "rule")
    # the any-JSON helpers are published with no type, as kube publishes them
    for name in ("JSON", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool",
                 "JSONSchemaPropsOrStringArray"):
        assert set(DEFINITIONS[f"{V1}.{name}"]) == {"description"}
