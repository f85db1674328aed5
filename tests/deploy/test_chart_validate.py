"""Every object the chart renders, for every documented combination, validated strictly:
Kubernetes' kinds against the v1.32 OpenAPI schemas (kubernetes-validate, strict: unknown
fields are errors), the APIServices the registration job applies into the gateway likewise,
and cert-manager's Issuer and Certificate (kinds kubernetes-validate does not know) against
cert-manager's own CRD schemas, kept in tests/data/cert-manager, made strict the same way."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy import helm

COMBINATIONS = helm.combinations()
KUBE_VERSION = helm.KUBE_VERSION.removeprefix("v")
CERT_MANAGER_CRDS = Path(__file__).resolve().parents[1] / "data" / "cert-manager"

# kubernetes-validate reads its schema files (the definitions alone are megabytes of JSON) on
# every call; they never change, so read each once.
kubernetes_validate.utils.schema_contents = functools.cache(  # type: ignore[method-assign]
    kubernetes_validate.utils.schema_contents)


def _strict(schema: Any) -> Any:
    """A CRD's structural schema with unknown fields refused: kube prunes them, a strict
    validation reports them (as kubectl's --validate=strict does)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


@functools.cache
def cert_manager_schemas() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> a JSON schema of the whole object."""
    schemas = {}
    for path in CERT_MANAGER_CRDS.glob("cert-manager.io_*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
            # the apiserver owns metadata's schema; the CRD leaves it open
            schema["properties"]["metadata"] = {"type": "object"}
            schemas[(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])] \
                = _strict(schema)
    return schemas


def validate(obj: dict[str, Any]) -> None:
    """Raise when ``obj`` is not a valid object of its kind."""
    schema = cert_manager_schemas().get((obj["apiVersion"], obj["kind"]))
    if schema is not None:
        jsonschema.Draft4Validator(schema).validate(obj)
        return
    kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = helm.render(values)
    return manifests + helm.embedded_objects(manifests) + helm.render(values, upgrade=True)


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_rendered_object_is_valid(name: str) -> None:
    rendered = objects(COMBINATIONS[name])
    problems = []
    for obj in rendered:
        try:
            validate(obj)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError,
                jsonschema.ValidationError) as err:
            problems.append(f"{obj['kind']} {obj['metadata']['name']}: {err}")
    assert problems == []
    assert rendered


def test_cert_manager_objects_are_checked_against_its_crds() -> None:
    rendered = objects(COMBINATIONS["certmanager-etcd"])
    kinds = {(o["apiVersion"], o["kind"]) for o in rendered}
    assert {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")} <= kinds
    assert set(cert_manager_schemas()) >= {("cert-manager.io/v1", "Issuer"),
                                           ("cert-manager.io/v1", "Certificate")}


def test_the_validation_is_strict() -> None:
    """An unknown field, a wrong type and an unknown kind are all reported."""
    manifests = helm.render({"tls": {"mode": "cert-manager"}})
    deployment = helm.one(manifests, "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    service = helm.one(manifests, "Service")
    service["spec"]["ports"][0]["port"] = "https"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(service)
    certificate = helm.one(manifests, "Certificate", "gw-gateway-tls")
    certificate["spec"]["dnsName"] = ["typo"]
    with pytest.raises(jsonschema.ValidationError):
        validate(certificate)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate({**certificate, "apiVersion": "example.com/v1"},
                                     KUBE_VERSION, strict=True)
