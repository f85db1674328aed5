"""Admission webhooks on every write the gateway serves, not only built-in kinds: custom
resources and their status and scale subresources, CRDs and APIServices themselves. A real
HTTPS webhook server, configured and driven with kubectl as an operator's webhooks (kopf's
admission pattern: mutate, deny, warn, and a status validator) are."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.api import API, CM, configmap, expect_status
from tests.support.gateway import GatewayProcess, free_port
from tests.support.webhook import WebhookServer

GROUP = "admissionregistration.k8s.io"
VALIDATING = f"/apis/{GROUP}/v1/validatingwebhookconfigurations"
MUTATING = f"/apis/{GROUP}/v1/mutatingwebhookconfigurations"
WRITES = ("CREATE", "UPDATE", "DELETE")


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    with WebhookServer(tmp_path_factory.mktemp("webhook")) as server:
        yield server


@pytest.fixture(scope="module")
def widgets(gateway: GatewayProcess) -> str:
    """The group of a namespaced Widget CRD: v1 stored, v1beta1 served too, with the status
    and scale subresources."""
    group = f"w{uuid.uuid4().hex[:8]}.example.com"
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "string"}, "replicas": {"type": "integer"}}},
        "status": {"type": "object", "properties": {
            "ready": {"type": "boolean"}, "replicas": {"type": "integer"}}}}}
    version = {"served": True, "schema": {"openAPIV3Schema": schema},
               "subresources": {"status": {}, "scale": {
                   "specReplicasPath": ".spec.replicas",
                   "statusReplicasPath": ".status.replicas"}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "storage": True, **copy.deepcopy(version)},
                                 {"name": "v1beta1", "storage": False,
                                  **copy.deepcopy(version)}]}}
    gateway.kubectl("apply", "-f", "-", input=yaml.safe_dump(crd))
    gateway.kubectl("wait", "--for=condition=established", "--timeout=30s",
                    f"crd/widgets.{group}")
    return group


@pytest.fixture
def configure(api: API, hooks: WebhookServer) -> Iterator:
    """Create a webhook configuration; every one made is deleted after the test."""
    made: list[str] = []

    def create(kind: str, *webhooks: dict) -> dict:
        collection = VALIDATING if kind == "validating" else MUTATING
        name = f"{kind}-{uuid.uuid4().hex[:8]}"
        code, body = api.post(collection, {"metadata": {"name": name},
                                           "webhooks": list(webhooks)})
        assert code == 201, body
        made.append(f"{collection}/{name}")
        return body

    hooks.clear()
    yield create
    for path in made:
        api.delete(path)


def hook(hooks: WebhookServer, path: str, namespace: str, *, group: str,
         resources: tuple[str, ...] = ("widgets",), versions: tuple[str, ...] = ("*",),
         operations: tuple[str, ...] = WRITES, name: str = "", **extra: Any) -> dict:
    """A webhook called by URL, for ``resources`` of ``group`` in ``namespace`` only."""
    return {"name": name or f"{path.strip('/')}.webhooks.test",
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"url": f"https://127.0.0.1:{hooks.port}{path}",
                             "caBundle": hooks.ca_bundle},
            "namespaceSelector": {"matchLabels": {"hooked": namespace}},
            "rules": [{"operations": list(operations), "apiGroups": [group],
                       "apiVersions": list(versions), "resources": list(resources)}],
            **extra}


def widget(group: str, name: str, size: str = "small", version: str = "v1",
           replicas: int = 1) -> dict:
    return {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, "replicas": replicas}}


def widgets_path(group: str, namespace: str, version: str = "v1") -> str:
    return f"/apis/{group}/{version}/namespaces/{namespace}/widgets"


def denied(webhook_name: str, why: str = "no thanks") -> str:
    return f'admission webhook "{webhook_name}" denied the request: {why}'


def requests_of(hooks: WebhookServer, path: str) -> list[dict]:
    return [review["request"] for review in hooks.received(path)]


# -- the hole: a failing webhook refuses custom resources as it refuses ConfigMaps ---------------


def test_a_failing_webhook_refuses_custom_resources_as_configmaps(api, hooks, configure,
                                                                 hooked_ns, widgets):
    down = hook(hooks, "/allow", hooked_ns, group=widgets, name="down.webhooks.test")
    down["clientConfig"]["url"] = f"https://127.0.0.1:{free_port()}/allow"
    down["rules"].append({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": ["configmaps"]})
    configure("validating", down)
    failed = 'Internal error occurred: failed calling webhook "down.webhooks.test": '
    for path, body in ((CM.format(ns=hooked_ns), configmap("cm", k="v")),
                       (widgets_path(widgets, hooked_ns), widget(widgets, "w"))):
        answer = expect_status(api.post(path, body), 500, "InternalError")
        assert answer["message"].startswith(failed), answer
        assert api.get(f"{path}/{body['metadata']['name']}")[0] == 404


# -- kopf's admission pattern, driven with kubectl ---------------------------------------------


def test_mutate_deny_warn_and_a_status_validator_with_kubectl(api, hooks, configure, hooked_ns,
                                                              widgets, gateway):
    configure("mutating", hook(hooks, "/mutate", hooked_ns, group=widgets,
                               operations=("CREATE", "UPDATE")))
    configure("validating",
              hook(hooks, "/deny", hooked_ns, group=widgets, name="size.webhooks.test",
                   matchConditions=[{"name": "large",
                                     "expression": "object.spec.size == 'large'"}]),
              hook(hooks, "/warn", hooked_ns, group=widgets),
              hook(hooks, "/deny", hooked_ns, group=widgets, name="status.webhooks.test",
                   resources=("widgets/status",), operations=("UPDATE",),
                   matchConditions=[{"name": "not-ready", "expression":
                                     "'status' in object && 'ready' in object.status && "
                                     "!object.status.ready"}]))
    kind = f"widgets.{widgets}"

    def apply(obj: dict, check: bool = True) -> Any:
        return gateway.kubectl("apply", "-n", hooked_ns, "-f", "-", input=yaml.safe_dump(obj),
                               check=check)

    made = apply(widget(widgets, "small"))
    assert "Warning: configmaps are watched here" in made.stderr, made.stderr
    stored = json.loads(gateway.kubectl("get", kind, "small", "-n", hooked_ns,
                                        "-o", "json").stdout)
    assert stored["metadata"]["labels"] == {"mutated": "yes"}

    refused = apply(widget(widgets, "large", size="large"), check=False)
    assert refused.returncode != 0
    assert denied("size.webhooks.test") in refused.stderr, refused.stderr
    assert api.get(f"{widgets_path(widgets, hooked_ns)}/large")[0] == 404

    def patch_status(ready: bool, check: bool = True) -> Any:
        return gateway.kubectl("patch", kind, "small", "-n", hooked_ns, "--subresource=status",
                               "--type=merge", "-p", json.dumps({"status": {"ready": ready}}),
                               check=check)

    patch_status(True)
    refused = patch_status(False, check=False)
    assert refused.returncode != 0
    assert denied("status.webhooks.test") in refused.stderr, refused.stderr
    code, current = api.get(f"{widgets_path(widgets, hooked_ns)}/small")
    assert code == 200 and current["status"] == {"ready": True}

    status_reviews = [r for r in requests_of(hooks, "/deny") if r.get("subResource")]
    assert [(r["operation"], r["subResource"], r["object"]["status"]["ready"])
            for r in status_reviews] == [("UPDATE", "status", False)]
    (review,) = status_reviews
    assert review["kind"] == {"group": widgets, "version": "v1", "kind": "Widget"}
    assert review["resource"] == {"group": widgets, "version": "v1", "resource": "widgets"}
    assert review["oldObject"]["status"] == {"ready": True}
    # the status writes are not the main resource's: its webhooks were not called for them
    assert {(r["operation"], r.get("subResource")) for r in requests_of(hooks, "/mutate")} == {
        ("CREATE", None)}


def test_deleting_a_custom_resource_can_be_denied(api, hooks, configure, hooked_ns, widgets):
    path = widgets_path(widgets, hooked_ns)
    assert api.post(path, widget(widgets, "kept"))[0] == 201
    configure("validating", hook(hooks, "/deny", hooked_ns, group=widgets,
                                 operations=("DELETE",)))
    expect_status(api.delete(f"{path}/kept"), 403, "Forbidden",
                  message=denied("deny.webhooks.test"))
    assert api.get(f"{path}/kept")[0] == 200
    (review,) = requests_of(hooks, "/deny")
    assert (review["operation"], review["name"], review["object"]) == ("DELETE", "kept", None)
    assert review["oldObject"]["metadata"]["name"] == "kept"


# -- rules: subresources and wildcards ---------------------------------------------------------


def test_rules_choose_the_resource_and_its_subresources(api, hooks, configure, hooked_ns,
                                                        widgets):
    configure("validating",
              hook(hooks, "/allow-plural", hooked_ns, group=widgets, resources=("widgets",)),
              hook(hooks, "/allow-star", hooked_ns, group=widgets, resources=("*",)),
              hook(hooks, "/allow-all", hooked_ns, group=widgets, resources=("*/*",)),
              hook(hooks, "/allow-status", hooked_ns, group=widgets, resources=("*/status",)),
              hook(hooks, "/allow-scale", hooked_ns, group=widgets,
                   resources=("widgets/scale",)))
    path = widgets_path(widgets, hooked_ns)
    assert api.post(path, widget(widgets, "r"))[0] == 201
    merge = "application/merge-patch+json"
    assert api.patch(f"{path}/r/status", {"status": {"ready": True}}, merge)[0] == 200
    assert api.patch(f"{path}/r/scale", {"spec": {"replicas": 2}}, merge)[0] == 200

    def seen(where: str) -> list[str]:
        return [r.get("subResource", "") for r in requests_of(hooks, where)]

    assert seen("/allow-plural") == [""]
    assert seen("/allow-star") == [""]
    assert seen("/allow-all") == ["", "status", "scale"]
    assert seen("/allow-status") == ["status"]
    assert seen("/allow-scale") == ["scale"]


def test_the_scale_subresource_is_admitted_as_a_scale(api, hooks, configure, hooked_ns,
                                                      widgets, gateway):
    path = widgets_path(widgets, hooked_ns)
    assert api.post(path, widget(widgets, "s", replicas=2))[0] == 201
    configure("mutating", hook(hooks, "/cap-replicas", hooked_ns, group=widgets,
                               resources=("widgets/scale",), operations=("UPDATE",)))
    configure("validating", hook(hooks, "/allow", hooked_ns, group=widgets,
                                 resources=("widgets/scale",), operations=("UPDATE",)))
    out = gateway.kubectl("scale", f"widgets.{widgets}/s", "-n", hooked_ns,
                          "--replicas=10").stdout
    assert "scaled" in out, out
    code, obj = api.get(f"{path}/s")
    assert code == 200 and obj["spec"]["replicas"] == 3, obj
    assert obj["metadata"]["generation"] == 2
    (mutated,) = requests_of(hooks, "/cap-replicas")
    assert mutated["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert mutated["resource"] == {"group": widgets, "version": "v1", "resource": "widgets"}
    assert mutated["subResource"] == "scale"
    assert (mutated["object"]["kind"], mutated["object"]["spec"]) == ("Scale", {"replicas": 10})
    assert mutated["oldObject"]["spec"] == {"replicas": 2}
    # the validating webhook sees the Scale as the mutation left it
    (validated,) = requests_of(hooks, "/allow")
    assert (validated["object"]["kind"], validated["object"]["spec"]) == ("Scale",
                                                                           {"replicas": 3})


# -- matchPolicy: a webhook of one version guards every version --------------------------------


def test_a_webhook_of_one_version_is_called_for_another(api, hooks, configure, hooked_ns,
                                                        widgets):
    configure("validating", hook(hooks, "/deny", hooked_ns, group=widgets, versions=("v1",),
                                 name="v1-only.webhooks.test"))
    path = widgets_path(widgets, hooked_ns, "v1beta1")
    expect_status(api.post(path, widget(widgets, "other-version", version="v1beta1")), 403,
                  "Forbidden", message=denied("v1-only.webhooks.test"))
    assert api.get(f"{path}/other-version")[0] == 404
    (review,) = requests_of(hooks, "/deny")
    assert review["kind"] == {"group": widgets, "version": "v1", "kind": "Widget"}
    assert review["resource"]["version"] == "v1"
    assert review["requestKind"] == {"group": widgets, "version": "v1beta1", "kind": "Widget"}
    assert review["requestResource"]["version"] == "v1beta1"
    assert review["object"]["apiVersion"] == f"{widgets}/v1"


def test_a_mutation_at_another_version_is_converted_back(api, hooks, configure, hooked_ns,
                                                         widgets):
    configure("mutating", hook(hooks, "/mutate", hooked_ns, group=widgets, versions=("v1",)))
    path = widgets_path(widgets, hooked_ns, "v1beta1")
    code, made = api.post(path, widget(widgets, "converted", version="v1beta1"))
    assert code == 201, made
    assert made["apiVersion"] == f"{widgets}/v1beta1"
    assert made["metadata"]["labels"] == {"mutated": "yes"}


def test_an_exact_match_policy_is_not_called_for_another_version(api, hooks, configure,
                                                                 hooked_ns, widgets):
    configure("validating", hook(hooks, "/deny", hooked_ns, group=widgets, versions=("v1",),
                                 matchPolicy="Exact"))
    path = widgets_path(widgets, hooked_ns, "v1beta1")
    assert api.post(path, widget(widgets, "exact", version="v1beta1"))[0] == 201
    assert hooks.received("/deny") == []


# -- the apiextensions and aggregator servers' own objects -------------------------------------


def test_crds_and_apiservices_are_admitted(api, hooks, configure, hooked_ns):
    guard = {"guard": hooked_ns}
    configure("validating", {
        **hook(hooks, "/deny", hooked_ns, group="apiextensions.k8s.io",
               resources=("customresourcedefinitions",), operations=("CREATE",)),
        "namespaceSelector": {}, "objectSelector": {"matchLabels": guard},
    }, {
        **hook(hooks, "/deny", hooked_ns, group="apiregistration.k8s.io",
               resources=("apiservices",), operations=("CREATE",), name="apis.webhooks.test"),
        "namespaceSelector": {}, "objectSelector": {"matchLabels": guard},
    })
    group = f"guarded{uuid.uuid4().hex[:6]}.example.com"
    crd = {"metadata": {"name": f"things.{group}", "labels": guard},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object"}}}]}}
    expect_status(api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd),
                  403, "Forbidden", message=denied("deny.webhooks.test"))
    apiservice = {"metadata": {"name": f"v1.{group}", "labels": guard},
                  "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100,
                           "versionPriority": 10}}
    expect_status(api.post("/apis/apiregistration.k8s.io/v1/apiservices", apiservice),
                  403, "Forbidden", message=denied("apis.webhooks.test"))
    assert [r["resource"]["resource"] for r in requests_of(hooks, "/deny")] == [
        "customresourcedefinitions", "apiservices"]


# -- webhook configurations are defaulted as kube defaults them --------------------------------


def test_webhook_configuration_nulls_are_defaulted(api, hooks):
    name = f"nulls-{uuid.uuid4().hex[:8]}"
    webhook = {**hook(hooks, "/allow", "none", group="example.com"),
               "namespaceSelector": None, "objectSelector": None, "timeoutSeconds": None,
               "failurePolicy": None, "matchPolicy": None}
    webhook["clientConfig"] = {"service": {"namespace": "n", "name": "s", "port": None},
                               "caBundle": hooks.ca_bundle}
    webhook["rules"][0]["scope"] = None
    code, made = api.post(MUTATING, {"metadata": {"name": name}, "webhooks": [webhook]})
    assert code == 201, made
    try:
        (stored,) = made["webhooks"]
        assert (stored["namespaceSelector"], stored["objectSelector"], stored["timeoutSeconds"],
                stored["failurePolicy"], stored["matchPolicy"], stored["reinvocationPolicy"],
                stored["rules"][0]["scope"], stored["clientConfig"]["service"]["port"]) == (
            {}, {}, 10, "Fail", "Equivalent", "Never", "*", 443)
        patched = {**stored, "objectSelector": None, "timeoutSeconds": None}
        code, body = api.patch(f"{MUTATING}/{name}", {"webhooks": [patched]},
                               "application/merge-patch+json")
        assert code == 200, body
        (again,) = body["webhooks"]
        assert (again["objectSelector"], again["timeoutSeconds"]) == ({}, 10)
        assert api.get(f"{MUTATING}/{name}")[1]["webhooks"][0]["objectSelector"] == {}
    finally:
        api.delete(f"{MUTATING}/{name}")
