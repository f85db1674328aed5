"""The built-in type schemas: references resolve, kinds are tagged, list metadata is kube's."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.schema import (
    admissionregistration,
    authentication,
    authorization,
    coordination,
    core,
    discovery,
    meta,
    rbac,
)
from gateway.schema.dsl import DEFINITIONS

MODULES = (meta, core, discovery, coordination, admissionregistration, rbac, authentication,
           authorization)

KINDS = {
    "io.k8s.api.core.v1.ConfigMap": ("", "v1", "ConfigMap"),
    "io.k8s.api.core.v1.Secret": ("", "v1", "Secret"),
    "io.k8s.api.core.v1.Namespace": ("", "v1", "Namespace"),
    "io.k8s.api.core.v1.ServiceAccount": ("", "v1", "ServiceAccount"),
    "io.k8s.api.core.v1.Service": ("", "v1", "Service"),
    "io.k8s.api.core.v1.Endpoints": ("", "v1", "Endpoints"),
    "io.k8s.api.core.v1.Event": ("", "v1", "Event"),
    "io.k8s.api.discovery.v1.EndpointSlice": ("discovery.k8s.io", "v1", "EndpointSlice"),
    "io.k8s.api.coordination.v1.Lease": ("coordination.k8s.io", "v1", "Lease"),
    "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration": (
        "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
    "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration": (
        "admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        # a string: JSONSchemaProps has a *property* named "$ref", whose value is a schema
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        for value in node.values():
            found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def _prop(definition: str, *path: str) -> dict[str, Any]:
    node = DEFINITIONS[definition]
    for name in path:
        node = node["properties"][name]
    return node


def test_modules_define_their_types() -> None:
    assert all(module.__name__.startswith("gateway.schema.") for module in MODULES)
    for name in KINDS:
        assert name in DEFINITIONS
        assert f"{name}List" in DEFINITIONS


def test_every_ref_resolves() -> None:
    dangling = sorted(
        f"{name} -> {ref}"
        for name, schema in DEFINITIONS.items()
        for ref in _refs(schema)
        if ref not in DEFINITIONS
    )
    assert dangling == []


@pytest.mark.parametrize("name", sorted(KINDS))
def test_kinds_and_lists_carry_gvk(name: str) -> None:
    group, version, kind = KINDS[name]
    assert DEFINITIONS[name]["x-kubernetes-group-version-kind"] == [
        {"group": group, "kind": kind, "version": version}]
    assert DEFINITIONS[f"{name}List"]["x-kubernetes-group-version-kind"] == [
        {"group": group, "kind": f"{kind}List", "version": version}]
    assert {"apiVersion", "kind", "metadata"} <= set(DEFINITIONS[name]["properties"])


def test_every_type_and_field_is_described() -> None:
    ours = [n for n in DEFINITIONS if n.startswith("io.k8s.api.")]
    assert ours
    for name in ours:
        schema = DEFINITIONS[name]
        assert schema.get("description"), name
        for field, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{field}"


def test_service_ports_list_metadata() -> None:
    ports = _prop("io.k8s.api.core.v1.ServiceSpec", "ports")
    assert ports["x-kubernetes-list-type"] == "map"
    assert ports["x-kubernetes-list-map-keys"] == ["port", "protocol"]
    assert ports["x-kubernetes-patch-strategy"] == "merge"
    assert ports["x-kubernetes-patch-merge-key"] == "port"
    assert ports["items"] == {"$ref": "io.k8s.api.core.v1.ServicePort"}
    port = DEFINITIONS["io.k8s.api.core.v1.ServicePort"]
    assert port["required"] == ["port"]
    assert port["properties"]["protocol"]["default"] == "TCP"
    assert port["properties"]["targetPort"]["$ref"] == (
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString")
    selector = _prop("io.k8s.api.core.v1.ServiceSpec", "selector")
    assert selector["x-kubernetes-map-type"] == "atomic"


@pytest.mark.parametrize("kind", ["ValidatingWebhook", "MutatingWebhook"])
def test_webhook_list_metadata(kind: str) -> None:
    prefix = "io.k8s.api.admissionregistration.v1"
    webhooks = _prop(f"{prefix}.{kind}Configuration", "webhooks")
    assert webhooks["items"] == {"$ref": f"{prefix}.{kind}"}
    assert webhooks["x-kubernetes-patch-merge-key"] == "name"
    assert webhooks["x-kubernetes-patch-strategy"] == "merge"
    assert webhooks["x-kubernetes-list-type"] == "map"
    assert webhooks["x-kubernetes-list-map-keys"] == ["name"]
    conditions = _prop(f"{prefix}.{kind}", "matchConditions")
    assert conditions["x-kubernetes-patch-merge-key"] == "name"
    assert conditions["x-kubernetes-list-map-keys"] == ["name"]
    assert DEFINITIONS[f"{prefix}.{kind}"]["required"] == [
        "name", "clientConfig", "sideEffects", "admissionReviewVersions"]
    assert _prop(f"{prefix}.WebhookClientConfig", "caBundle")["format"] == "byte"


def test_owner_references_merge_on_uid() -> None:
    owners = _prop("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences")
    assert owners["x-kubernetes-patch-merge-key"] == "uid"
    assert owners["x-kubernetes-patch-strategy"] == "merge"
    assert owners["x-kubernetes-list-type"] == "map"
    assert owners["x-kubernetes-list-map-keys"] == ["uid"]


def test_other_list_metadata() -> None:
    secrets = _prop("io.k8s.api.core.v1.ServiceAccount", "secrets")
    assert (secrets["x-kubernetes-patch-merge-key"], secrets["x-kubernetes-list-type"]) == (
        "name", "map")
    for definition in ("io.k8s.api.core.v1.NamespaceStatus", "io.k8s.api.core.v1.ServiceStatus"):
        conditions = _prop(definition, "conditions")
        assert conditions["x-kubernetes-patch-merge-key"] == "type"
        assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    addresses = _prop("io.k8s.api.discovery.v1.Endpoint", "addresses")
    assert addresses["x-kubernetes-list-type"] == "set"
    for atomic in ("io.k8s.api.core.v1.ObjectReference", "io.k8s.api.core.v1.EndpointAddress",
                   "io.k8s.api.discovery.v1.EndpointPort"):
        assert DEFINITIONS[atomic]["x-kubernetes-map-type"] == "atomic"


def test_required_fields_and_formats() -> None:
    assert DEFINITIONS["io.k8s.api.core.v1.Event"]["required"] == [
        "metadata", "involvedObject"]
    assert DEFINITIONS["io.k8s.api.discovery.v1.EndpointSlice"]["required"] == [
        "addressType", "endpoints"]
    assert _prop("io.k8s.api.core.v1.Event", "eventTime")["$ref"].endswith(".MicroTime")
    spec = "io.k8s.api.coordination.v1.LeaseSpec"
    assert _prop(spec, "renewTime")["$ref"].endswith(".MicroTime")
    assert _prop(spec, "leaseDurationSeconds")["format"] == "int32"
    binary = _prop("io.k8s.api.core.v1.ConfigMap", "binaryData")
    assert binary["additionalProperties"] == {"type": "string", "format": "byte"}
    data = _prop("io.k8s.api.core.v1.Secret", "data")
    assert data["additionalProperties"]["format"] == "byte"
