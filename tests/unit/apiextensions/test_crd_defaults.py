"""CRD defaults as kube's v1 SetDefaults give them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gateway.apiextensions.defaults import default_crd

DATA = Path(__file__).parents[2] / "data" / "crds"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd(**spec) -> dict:
    base = {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1beta1", "served": True, "storage": False},
                         {"name": "v1", "served": True, "storage": True}]}
    return {"metadata": {"name": "widgets.example.com"}, "spec": {**base, **spec}}


def test_names_conversion_and_stored_versions():
    obj = crd()
    default_crd(obj)
    assert obj["spec"]["names"] == {"plural": "widgets", "kind": "Widget",
                                    "singular": "widget", "listKind": "WidgetList"}
    assert obj["spec"]["conversion"] == {"strategy": "None"}
    assert obj["status"] == {"storedVersions": ["v1"]}


def test_given_values_are_kept():
    obj = crd(names={"plural": "widgets", "kind": "Widget", "singular": "gadget",
                     "listKind": "Widgets"},
              conversion={"strategy": "Webhook", "webhook": {
                  "conversionReviewVersions": ["v1"],
                  "clientConfig": {"service": {"name": "s", "namespace": "n", "port": 8443}}}})
    obj["status"] = {"storedVersions": ["v1beta1"]}
    kept = copy.deepcopy(obj)
    default_crd(obj)
    assert obj == kept


def test_webhook_service_port_is_443():
    obj = crd(conversion={"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/convert"}}}})
    default_crd(obj)
    service = obj["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
    assert service == {"name": "s", "namespace": "n", "path": "/convert", "port": 443}


@pytest.mark.parametrize("conversion", [
    {"strategy": "Webhook"},
    {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}},
    {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x/convert"}}},
])
def test_a_webhook_without_a_service_gets_no_port(conversion):
    obj = crd(conversion=copy.deepcopy(conversion))
    default_crd(obj)
    assert obj["spec"]["conversion"] == conversion


def test_singular_is_the_lowercase_kind_and_nothing_comes_from_no_kind():
    obj = crd(names={"plural": "widgets", "kind": "HTTPRoute"})
    default_crd(obj)
    assert obj["spec"]["names"]["singular"] == "httproute"
    assert obj["spec"]["names"]["listKind"] == "HTTPRouteList"
    obj = crd(names={"plural": "widgets"})
    default_crd(obj)
    assert obj["spec"]["names"] == {"plural": "widgets"}


def test_no_storage_version_means_no_stored_versions():
    obj = crd(versions=[{"name": "v1", "served": True, "storage": False}])
    default_crd(obj)
    assert "status" not in obj
    obj = crd()
    obj["status"] = {"storedVersions": [], "acceptedNames": {"plural": "", "kind": ""}}
    default_crd(obj)
    assert obj["status"]["storedVersions"] == ["v1"]


def test_an_empty_object_gets_a_spec_with_conversion():
    obj: dict = {}
    default_crd(obj)
    assert obj == {"spec": {"conversion": {"strategy": "None"}}}


@pytest.mark.parametrize("name, names", [
    ("cert-manager.io_certificates.yaml",
     {"categories": ["cert-manager"], "kind": "Certificate", "listKind": "CertificateList",
      "plural": "certificates", "shortNames": ["cert", "certs"], "singular": "certificate"}),
    ("gateway.networking.k8s.io_httproutes.yaml",
     {"categories": ["gateway-api"], "kind": "HTTPRoute", "listKind": "HTTPRouteList",
      "plural": "httproutes", "singular": "httproute"}),
    ("monitoring.coreos.com_servicemonitors.yaml",
     {"categories": ["prometheus-operator"], "kind": "ServiceMonitor",
      "listKind": "ServiceMonitorList", "plural": "servicemonitors", "shortNames": ["smon"],
      "singular": "servicemonitor"}),
])
def test_real_manifests_only_gain_conversion_and_stored_versions(name, names):
    obj = yaml.load((DATA / name).read_text(), Loader=LOADER)
    before = copy.deepcopy(obj)
    default_crd(obj)
    assert obj["spec"]["names"] == names
    assert obj["spec"]["conversion"] == {"strategy": "None"}
    del obj["spec"]["conversion"]
    status, before_status = obj.pop("status"), before.pop("status", {})
    assert status["storedVersions"] == ["v1"]
    assert {k: v for k, v in status.items() if k != "storedVersions"} == {
        k: v for k, v in before_status.items() if k != "storedVersions"}
    assert obj == before
