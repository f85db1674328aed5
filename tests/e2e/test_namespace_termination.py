"""A terminating namespace says, in its status conditions, what holds it up, as kube's
namespace controller writes them; once the content's finalizers go, the namespace goes.
Driven with kubectl."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.gateway import GatewayProcess
from tests.support.namespaces import OK, conditions, namespace, wait_for_conditions
from tests.support.wait import eventually
from tests.support.webhook import WebhookServer

pytestmark = pytest.mark.slow

HOLD = "example.com/hold"
OTHER = "example.com/other"
WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "listKind": "WidgetList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def apply(gw: GatewayProcess, *objects: dict[str, Any]) -> None:
    gw.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def held_configmap(ns: str, name: str, *finalizers: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "finalizers": list(finalizers)},
            "data": {"k": "v"}}


def release(gw: GatewayProcess, ns: str, kind: str, name: str) -> None:
    gw.kubectl("-n", ns, "patch", kind, name, "--type=json",
               "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')


def new_namespace(gw: GatewayProcess) -> str:
    name = f"term-{uuid.uuid4().hex[:8]}"
    gw.kubectl("create", "ns", name)
    return name


def test_a_finalizer_holds_the_namespace_and_the_conditions_say_so(gateway):
    ns = new_namespace(gateway)
    apply(gateway, held_configmap(ns, "held", HOLD))
    gateway.kubectl("delete", "ns", ns, "--wait=false")

    stuck = wait_for_conditions(gateway, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 1 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource "
            "instances"),
    })
    assert stuck["status"]["phase"] == "Terminating"
    # kube's order, each with a transition time
    assert [c["type"] for c in stuck["status"]["conditions"]] == list(OK)
    assert all(c["lastTransitionTime"].endswith("Z") for c in stuck["status"]["conditions"])
    # everything else in it was deleted (the default ServiceAccount and the root CA too)
    left = json.loads(gateway.kubectl("-n", ns, "get", "configmaps,serviceaccounts",
                                      "-o", "json").stdout)
    assert [o["metadata"]["name"] for o in left["items"]] == ["held"]

    release(gateway, ns, "configmap", "held")
    gateway.kubectl("wait", "--for=delete", f"ns/{ns}", "--timeout=60s")
    assert namespace(gateway, ns) is None


def test_custom_resources_count_under_their_resource_name(gateway):
    apply(gateway, WIDGETS_CRD)
    gateway.kubectl("wait", "--for", "condition=established", "--timeout=30s",
                    "crd/widgets.example.com")
    ns = new_namespace(gateway)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "w", "namespace": ns, "finalizers": [HOLD, OTHER]}}
    apply(gateway, held_configmap(ns, "held", HOLD), widget)
    gateway.kubectl("delete", "ns", ns, "--wait=false")

    wait_for_conditions(gateway, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 1 resource instances, "
            "widgets.example.com has 1 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 2 resource "
            f"instances, {OTHER} in 1 resource instances"),
    })

    release(gateway, ns, "widget", "w")
    wait_for_conditions(gateway, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 1 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource "
            "instances"),
    })
    release(gateway, ns, "configmap", "held")
    gateway.kubectl("wait", "--for=delete", f"ns/{ns}", "--timeout=60s")


def test_transition_times_move_only_when_a_status_changes(gateway):
    """A namespace kept by a finalizer of its own outlives its content: the conditions then
    read False, and only those whose status changed got a new lastTransitionTime."""
    ns = f"term-{uuid.uuid4().hex[:8]}"
    apply(gateway, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                    "spec": {"finalizers": [OTHER]}})
    apply(gateway, held_configmap(ns, "a", HOLD), held_configmap(ns, "b", HOLD))
    gateway.kubectl("delete", "ns", ns, "--wait=false")
    first = wait_for_conditions(gateway, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 2 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 2 resource "
            "instances"),
    })
    times = {c["type"]: c["lastTransitionTime"] for c in first["status"]["conditions"]}
    time.sleep(1.1)  # timestamps have second precision: a new one would differ now

    release(gateway, ns, "configmap", "a")  # the messages change, the statuses do not
    second = wait_for_conditions(gateway, ns, {
        **OK,
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 1 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource "
            "instances"),
    })
    assert {c["type"]: c["lastTransitionTime"] for c in second["status"]["conditions"]} == times
    time.sleep(1.1)

    release(gateway, ns, "configmap", "b")  # now two statuses turn False
    third = wait_for_conditions(gateway, ns, OK)
    moved = {c["type"] for c in third["status"]["conditions"]
             if c["lastTransitionTime"] != times[c["type"]]}
    assert moved == {"NamespaceContentRemaining", "NamespaceFinalizersRemaining"}
    # the controller removed its own finalizer; the namespace waits for the other one
    assert third["spec"]["finalizers"] == [OTHER]
    assert third["status"]["phase"] == "Terminating"

    code, body = gateway.request("PUT", f"/api/v1/namespaces/{ns}/finalize", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
        "spec": {"finalizers": []}})
    assert code == 200, body
    gateway.kubectl("wait", "--for=delete", f"ns/{ns}", "--timeout=60s")


def test_the_conditions_are_written_by_kube_controller_manager(gateway):
    ns = new_namespace(gateway)
    apply(gateway, held_configmap(ns, "held", HOLD))
    gateway.kubectl("delete", "ns", ns, "--wait=false")
    eventually(lambda: conditions(namespace(gateway, ns) or {}).get(
        "NamespaceFinalizersRemaining", ("",))[0] == "True", what="the conditions")
    shown = json.loads(gateway.kubectl("get", "ns", ns, "-o", "json",
                                       "--show-managed-fields").stdout)
    status_writers = {(m["manager"], m["operation"]) for m in shown["metadata"]["managedFields"]
                      if m.get("subresource") == "status"}
    assert status_writers == {("kube-controller-manager", "Update")}
    release(gateway, ns, "configmap", "held")
    gateway.kubectl("wait", "--for=delete", f"ns/{ns}", "--timeout=60s")


def test_a_refused_deletion_is_a_content_failure(gateway, tmp_path: Path):
    """A webhook that refuses to let configmaps go: the pass reports the refusal (and, as kube
    does, counts nothing left of a resource whose deletion failed)."""
    ns = f"term-{uuid.uuid4().hex[:8]}"
    apply(gateway, {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"refuse": ns}}})
    apply(gateway, {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "kept", "namespace": ns}})
    with WebhookServer(tmp_path) as hooks:
        config = f"refuse-{ns}"
        apply(gateway, {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": config},
            "webhooks": [{
                "name": "refuse.example.com", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "namespaceSelector": {"matchLabels": {"refuse": ns}},
                "clientConfig": {"url": f"https://localhost:{hooks.port}/deny",
                                 "caBundle": hooks.ca_bundle},
                "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["configmaps"]}]}]})
        gateway.kubectl("delete", "ns", ns, "--wait=false")
        wait_for_conditions(gateway, ns, {
            **OK,
            "NamespaceDeletionContentFailure": (
                "True", "ContentDeletionFailed",
                "Failed to delete all resource types, 1 remaining: admission webhook "
                '"refuse.example.com" denied the request: no thanks'),
        })
        refused = hooks.received("/deny")[0]["request"]
        assert refused["userInfo"]["username"] == \
            "system:serviceaccount:kube-system:namespace-controller"
        gateway.kubectl("delete", "validatingwebhookconfiguration", config)
    gateway.kubectl("wait", "--for=delete", f"ns/{ns}", "--timeout=60s")
