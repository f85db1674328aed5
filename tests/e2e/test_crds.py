"""CustomResourceDefinitions end to end, driven as a user drives kube-apiserver: kubectl for
CRDs and their custom resources, raw HTTPS where kubectl hides the answer.

One gateway serves the module; each test applies CRDs of a group of its own, so tests do not
see each other's names."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.gateway import GatewayProcess, send
from tests.support.wait import eventually
from tests.support.webhook import WebhookServer

pytestmark = pytest.mark.slow
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with GatewayProcess(tmp_path_factory.mktemp("crds")) as proc:
        yield proc


def group() -> str:
    return f"g{uuid.uuid4().hex[:8]}.example.com"


def short(group_: str) -> str:
    """The CRD's short name: its own, so kubectl never has to choose between groups."""
    return "wd" + group_.split(".")[0][1:]


def widget_crd(group_: str, **overrides: Any) -> dict[str, Any]:
    """A namespaced CRD with two versions (v1 stored, v1beta1 served too), a schema with a
    default, an enum, a required field, printer columns and the status subresource."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "string", "enum": ["small", "large"]},
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                "image": {"type": "string"}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    }
    columns = [{"name": "Size", "type": "string", "jsonPath": ".spec.size"},
               {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]
    version = {"served": True, "schema": {"openAPIV3Schema": schema},
               "subresources": {"status": {}}, "additionalPrinterColumns": columns}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group_}"},
        "spec": {"group": group_, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                           "shortNames": [short(group_)],
                           "categories": [f"gadgets-{short(group_)}"]},
                 "versions": [{"name": "v1", "storage": True, **copy.deepcopy(version)},
                              {"name": "v1beta1", "storage": False,
                               **copy.deepcopy(version)}]},
    }
    crd["spec"].update(overrides)
    return crd


def apply(gw: GatewayProcess, *objects: dict[str, Any], check: bool = True) -> Any:
    return gw.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects), check=check)


def established(gw: GatewayProcess, name: str) -> None:
    gw.kubectl("wait", "--for=condition=established", "--timeout=30s", f"crd/{name}")


def get_json(gw: GatewayProcess, path: str) -> tuple[int, Any]:
    code, body = gw.request("GET", path)
    return code, json.loads(body) if body.startswith(b"{") else body


def found(gw: GatewayProcess, path: str) -> Any:
    """The object at ``path``, or None while it answers anything but 200 (for eventually)."""
    code, obj = get_json(gw, path)
    return obj if code == 200 else None


def conditions(crd: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
            for c in crd.get("status", {}).get("conditions", [])}


def test_a_crd_is_accepted_established_and_served(gw: GatewayProcess) -> None:
    g = group()
    out = apply(gw, widget_crd(g)).stdout
    assert f"customresourcedefinition.apiextensions.k8s.io/widgets.{g} created" in out
    established(gw, f"widgets.{g}")
    code, crd = get_json(gw, f"{CRD_PATH}/widgets.{g}")
    assert code == 200
    assert conditions(crd)["NamesAccepted"] == ("True", "NoConflicts", "no conflicts found")
    assert conditions(crd)["Established"] == ("True", "InitialNamesAccepted",
                                              "the initial names have been accepted")
    assert crd["status"]["acceptedNames"] == {
        "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
        "shortNames": [short(g)], "categories": [f"gadgets-{short(g)}"]}
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert "customresourcecleanup.apiextensions.k8s.io" not in \
        crd["metadata"].get("finalizers", [])

    apply(gw, {"apiVersion": f"{g}/v1", "kind": "Widget",
               "metadata": {"name": "one", "namespace": "default"},
               "spec": {"size": "small", "image": "nginx"}})
    table = gw.kubectl("get", short(g)).stdout
    assert table.split("\n")[0].split() == ["NAME", "SIZE", "REPLICAS"], table
    assert table.split("\n")[1].split() == ["one", "small", "1"], table  # defaulted
    assert gw.kubectl("get", f"gadgets-{short(g)}", "-o", "name").stdout == \
        f"widget.{g}/one\n"
    code, obj = get_json(gw, f"/apis/{g}/v1beta1/namespaces/default/widgets/one")
    assert code == 200 and obj["apiVersion"] == f"{g}/v1beta1", obj
    assert obj["spec"] == {"size": "small", "image": "nginx", "replicas": 1}


def test_discovery_and_the_automanaged_apiservice(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    resources = eventually(lambda: _api_resources(gw, g), timeout=10,
                           what="the CRD in kubectl api-resources")
    assert short(g) in resources and "Widget" in resources and "true" in resources
    apiservice = eventually(
        lambda: found(gw, f"/apis/apiregistration.k8s.io/v1/apiservices/v1.{g}"), timeout=10,
        what="the automanaged APIService")
    assert apiservice["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"] == \
        "true"
    assert apiservice["spec"]["groupPriorityMinimum"] == 1000
    assert apiservice["spec"]["versionPriority"] == 100
    assert "service" not in apiservice["spec"]
    code, listed = get_json(gw, f"/apis/{g}")
    assert code == 200
    assert [v["version"] for v in listed["versions"]] == ["v1", "v1beta1"]
    assert listed["preferredVersion"]["version"] == "v1"


def _api_resources(gw: GatewayProcess, g: str) -> str | None:
    out = gw.kubectl("api-resources", "--api-group", g, check=False).stdout
    return out if "widgets" in out else None


def test_schema_validation_pruning_and_strictness(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    path = f"/apis/{g}/v1/namespaces/default/widgets"
    bad = {"apiVersion": f"{g}/v1", "kind": "Widget", "metadata": {"name": "bad"},
           "spec": {"size": "medium", "replicas": -1}}
    code, body = gw.request("POST", path, bad)
    status = json.loads(body)
    assert code == 422 and status["reason"] == "Invalid", status
    fields = {c["field"]: c for c in status["details"]["causes"]}
    assert fields["spec.size"]["reason"] == "FieldValueNotSupported"
    assert fields["spec.size"]["message"] == \
        'Unsupported value: "medium": supported values: "small", "large"'
    assert fields["spec.replicas"]["reason"] == "FieldValueInvalid"
    assert status["message"].startswith(f'Widget.{g} "bad" is invalid: ')

    unknown = {"apiVersion": f"{g}/v1", "kind": "Widget", "metadata": {"name": "extra"},
               "spec": {"size": "small", "bogus": 1}}
    code, body = gw.request("POST", path + "?fieldValidation=Strict", unknown)
    assert code == 400, body
    assert json.loads(body)["message"] == ('Widget in version "v1" cannot be handled as a '
                                           'Widget: strict decoding error: unknown field '
                                           '"spec.bogus"')
    code, body = gw.request("POST", path, unknown)
    assert code == 201, body
    assert "bogus" not in json.loads(body)["spec"]


def test_the_custom_resource_strategy(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    path = f"/apis/{g}/v1/namespaces/default/widgets"
    obj = {"apiVersion": f"{g}/v1", "kind": "Widget", "metadata": {"name": "s"},
           "spec": {"size": "small"}, "status": {"ready": True}}
    code, body = gw.request("POST", path, obj)
    created = json.loads(body)
    assert code == 201 and "status" not in created and created["metadata"]["generation"] == 1
    # PUT without a resourceVersion, and PUT of one that does not exist
    code, body = gw.request("PUT", f"{path}/s", {**obj, "spec": {"size": "large"}})
    assert code == 422, body
    assert json.loads(body)["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    code, body = gw.request("PUT", f"{path}/nope", {**obj, "metadata": {"name": "nope"}})
    assert code == 404, body
    code, body = gw.request("PATCH", f"{path}/s", {"spec": {"size": "large"}},
                            headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert code == 415, body
    out = gw.kubectl("patch", f"widgets.{g}", "s", "--type=merge", "-p",
                     '{"spec":{"size":"large"}}', "-o", "json").stdout
    patched = json.loads(out)
    assert patched["metadata"]["generation"] == 2
    out = gw.kubectl("patch", f"widgets.{g}", "s", "--subresource=status", "--type=merge", "-p",
                     '{"status":{"ready":true},"spec":{"size":"small"}}', "-o", "json").stdout
    patched = json.loads(out)
    assert patched["status"] == {"ready": True} and patched["spec"]["size"] == "large"
    assert patched["metadata"]["generation"] == 2
    code, body = gw.request("POST", path, {**obj, "kind": "Gadget",
                                           "metadata": {"name": "k"}})
    assert code == 422, body
    assert json.loads(body)["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "message": 'Invalid value: "Gadget": must be Widget',
        "field": "kind"}]
    code, body = gw.request("POST", path, {**obj, "metadata": {"name": "p"}},
                            headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert code == 415, body


def test_name_conflicts(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    rival = widget_crd(g)
    rival["metadata"]["name"] = f"gizmos.{g}"
    rival["spec"]["names"] = {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo",
                              "shortNames": [short(g)]}
    apply(gw, rival)

    def rejected() -> tuple[str, str, str] | None:
        crd = get_json(gw, f"{CRD_PATH}/gizmos.{g}")[1]
        got = conditions(crd).get("NamesAccepted")
        return got if got and got[0] == "False" else None

    got = eventually(rejected, timeout=10, what="NamesAccepted False")
    assert got == ("False", "ShortNamesConflict", f'"{short(g)}" is already in use')
    crd = get_json(gw, f"{CRD_PATH}/gizmos.{g}")[1]
    assert conditions(crd)["Established"][0] == "False"


def test_deleting_a_namespace_deletes_its_custom_resources(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    ns = f"ns-{uuid.uuid4().hex[:6]}"
    gw.kubectl("create", "namespace", ns)
    apply(gw, {"apiVersion": f"{g}/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": ns}, "spec": {"size": "small"}})
    gw.kubectl("delete", "namespace", ns, "--timeout=60s")
    code, _ = gw.request("GET", f"/apis/{g}/v1/namespaces/{ns}/widgets/w")
    assert code == 404


def test_deleting_a_crd_deletes_its_instances_then_itself(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    for name in ("a", "b"):
        apply(gw, {"apiVersion": f"{g}/v1", "kind": "Widget",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"size": "small"}})
    gw.kubectl("delete", "crd", f"widgets.{g}", "--timeout=60s")
    code, _ = gw.request("GET", f"{CRD_PATH}/widgets.{g}")
    assert code == 404
    eventually(lambda: gw.request("GET", f"/apis/{g}")[0] == 404, timeout=10,
               what="the group gone from discovery")
    eventually(lambda: gw.request(
        "GET", f"/apis/apiregistration.k8s.io/v1/apiservices/v1.{g}")[0] == 404, timeout=10,
        what="the automanaged APIService deleted")
    # a CRD of the same name again starts empty
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    listed = json.loads(gw.kubectl("get", f"widgets.{g}", "-A", "-o", "json").stdout)
    assert listed["items"] == []


def test_the_scale_subresource(gw: GatewayProcess) -> None:
    g = group()
    crd = widget_crd(g)
    for version in crd["spec"]["versions"]:
        version["subresources"]["scale"] = {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}
        status_props = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        status_props["properties"].update(replicas={"type": "integer"},
                                          selector={"type": "string"})
    apply(gw, crd)
    established(gw, f"widgets.{g}")
    path = f"/apis/{g}/v1/namespaces/default/widgets"
    code, body = gw.request("POST", path, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                           "metadata": {"name": "s"},
                                           "spec": {"size": "small", "replicas": 2}})
    assert code == 201, body
    gw.kubectl("patch", f"widgets.{g}", "s", "--subresource=status", "--type=merge", "-p",
               '{"status":{"replicas":2,"selector":"app=s"}}')
    code, scale = get_json(gw, f"{path}/s/scale")
    assert code == 200
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=s"}
    out = gw.kubectl("scale", f"widgets.{g}/s", "--replicas=5").stdout
    assert f"widget.{g}/s scaled" in out, out
    code, obj = get_json(gw, f"{path}/s")
    assert obj["spec"]["replicas"] == 5 and obj["status"]["replicas"] == 2
    assert obj["metadata"]["generation"] == 2
    stale = {**scale, "spec": {"replicas": 7}}
    code, body = gw.request("PUT", f"{path}/s/scale", stale)
    assert code == 409, body
    code, body = gw.request("PUT", f"{path}/s/scale",
                            {**stale, "metadata": {"name": "s"}, "spec": {"replicas": -1}})
    assert code == 422, body
    assert json.loads(body)["details"]["causes"][0]["field"] == "spec.replicas"
    code, body = gw.request("PUT", f"{path}/s/scale",
                            {**stale, "metadata": {"name": "s"}, "spec": {"replicas": 0}})
    assert code == 200 and json.loads(body)["spec"] == {"replicas": 0}, body


def test_discovery_of_subresources_and_storage_versions(gw: GatewayProcess) -> None:
    """Subresources are listed with the kind they speak (scale: autoscaling/v1 Scale; core's
    serviceaccounts/token: authentication.k8s.io/v1 TokenRequest), and every served version
    of a CRD reports the storage version's hash."""
    g = group()
    crd = widget_crd(g)
    for version in crd["spec"]["versions"]:
        version["subresources"]["scale"] = {"specReplicasPath": ".spec.replicas",
                                            "statusReplicasPath": ".status.replicas"}
        version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
            "replicas"] = {"type": "integer"}
    apply(gw, crd)
    established(gw, f"widgets.{g}")
    entries = {}
    for version in ("v1", "v1beta1"):
        listed = eventually(lambda v=version: found(gw, f"/apis/{g}/{v}"), timeout=10,
                            what=f"discovery of {version}")
        entries[version] = {r["name"]: r for r in listed["resources"]}
    scale = entries["v1"]["widgets/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert entries["v1"]["widgets/status"]["kind"] == "Widget"
    assert "group" not in entries["v1"]["widgets/status"]
    assert entries["v1"]["widgets"]["storageVersionHash"] == \
        entries["v1beta1"]["widgets"]["storageVersionHash"]
    core = found(gw, "/api/v1")
    token = {r["name"]: r for r in core["resources"]}["serviceaccounts/token"]
    assert (token["group"], token["version"], token["kind"]) == \
        ("authentication.k8s.io", "v1", "TokenRequest")


def test_a_terminating_crd_refuses_new_instances(gw: GatewayProcess) -> None:
    """A CRD being deleted while an instance holds a finalizer: Terminating, creates refused
    with 403, and once the finalizer is removed the instance and then the CRD go."""
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    path = f"/apis/{g}/v1/namespaces/default/widgets"
    code, body = gw.request("POST", path, {
        "apiVersion": f"{g}/v1", "kind": "Widget",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {"size": "small"}})
    assert code == 201, body
    gw.kubectl("delete", "crd", f"widgets.{g}", "--wait=false")

    def terminating() -> tuple[str, str, str] | None:
        crd = found(gw, f"{CRD_PATH}/widgets.{g}")
        got = conditions(crd or {}).get("Terminating")
        return got if got and got[1] == "InstanceDeletionInProgress" else None

    assert eventually(terminating, timeout=10, what="Terminating") == (
        "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress")
    crd = found(gw, f"{CRD_PATH}/widgets.{g}")
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]
    code, body = gw.request("POST", path, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                           "metadata": {"name": "late"},
                                           "spec": {"size": "small"}})
    status = json.loads(body)
    assert (code, status["reason"]) == (403, "Forbidden"), body
    assert status["message"] == (f'widgets.{g} "late" is forbidden: create not allowed while '
                                 "custom resource definition is terminating")
    gw.kubectl("patch", f"widgets.{g}", "held", "--type=merge", "-p",
               '{"metadata":{"finalizers":null}}')
    eventually(lambda: gw.request("GET", f"{CRD_PATH}/widgets.{g}")[0] == 404, timeout=20,
               what="the CRD gone once its last instance went")


def test_crd_status_labels_and_deletecollection(gw: GatewayProcess) -> None:
    """The Kubernetes e2e CRD steps on CRDs themselves: /status get, update and JSON patch;
    a label-selector list; deletecollection by label."""
    g = group()
    crd = widget_crd(g)
    crd["metadata"]["labels"] = {"e2e-set": g}
    apply(gw, crd)
    established(gw, f"widgets.{g}")
    path = f"{CRD_PATH}/widgets.{g}"
    code, got = get_json(gw, f"{path}/status")
    assert code == 200 and got["kind"] == "CustomResourceDefinition"
    got["status"]["conditions"].append({"type": "StatusUpdated", "status": "True",
                                        "reason": "E2E", "message": "set from the test",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"})
    got["spec"]["names"]["shortNames"] = ["ignored"]
    code, body = gw.request("PUT", f"{path}/status", got)
    updated = json.loads(body)
    assert code == 200, body
    assert ("StatusUpdated", "True") in {(c["type"], c["status"])
                                         for c in updated["status"]["conditions"]}
    assert updated["spec"]["names"]["shortNames"] == [short(g)]  # status ignores the spec
    code, body = gw.request(
        "PATCH", f"{path}/status",
        [{"op": "add", "path": "/status/conditions/-", "value": {
            "type": "StatusPatched", "status": "True", "reason": "E2E", "message": "patched",
            "lastTransitionTime": "2024-01-01T00:00:00Z"}}],
        headers={"Content-Type": "application/json-patch+json"})
    assert code == 200, body
    assert "StatusPatched" in {c["type"] for c in json.loads(body)["status"]["conditions"]}
    code, listed = get_json(gw, f"{CRD_PATH}?labelSelector=e2e-set%3D{g}")
    assert [i["metadata"]["name"] for i in listed["items"]] == [f"widgets.{g}"]
    code, body = gw.request("DELETE", f"{CRD_PATH}?labelSelector=e2e-set%3D{g}")
    assert code == 200, body
    eventually(lambda: gw.request("GET", path)[0] == 404, timeout=20, what="the CRD deleted")


def test_defaults_apply_on_read_and_warnings_name_unknown_fields(gw: GatewayProcess) -> None:
    """A default added to the schema later shows on GET of an object stored before it; an
    unknown field under fieldValidation=Warn is dropped with a Warning header."""
    g = group()
    crd = widget_crd(g)
    apply(gw, crd)
    established(gw, f"widgets.{g}")
    path = f"/apis/{g}/v1/namespaces/default/widgets"
    code, body = gw.request("POST", path, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                           "metadata": {"name": "old"},
                                           "spec": {"size": "small"}})
    assert code == 201 and "image" not in json.loads(body)["spec"], body
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"][
            "default"] = "busybox"
    apply(gw, crd)

    def defaulted() -> bool:
        code, obj = get_json(gw, f"{path}/old")
        return code == 200 and obj["spec"].get("image") == "busybox"

    eventually(defaulted, timeout=10, what="the new default on read")
    code, raw, headers = send(gw.url + path + "?fieldValidation=Warn", "POST",
                              gw.ssl_context(), {"apiVersion": f"{g}/v1", "kind": "Widget",
                                                 "metadata": {"name": "warned"},
                                                 "spec": {"size": "small", "colour": "red"}})
    assert code == 201, raw
    assert headers.get("Warning") == '299 - "unknown field \\"spec.colour\\""', headers


def test_aggregated_discovery_lists_established_crds(gw: GatewayProcess) -> None:
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

    def listed() -> dict | None:
        code, body = gw.request("GET", "/apis", headers={"Accept": accept})
        assert code == 200, body
        groups = {i["metadata"]["name"]: i for i in json.loads(body)["items"]}
        return groups.get(g)

    entry = eventually(listed, timeout=10, what="the CRD group in aggregated discovery")
    versions = [v["version"] for v in entry["versions"]]
    assert versions == ["v1", "v1beta1"]
    resource = entry["versions"][0]["resources"][0]
    assert resource["resource"] == "widgets" and resource["singularResource"] == "widget"
    assert resource["shortNames"] == [short(g)]
    assert resource["categories"] == [f"gadgets-{short(g)}"]
    assert resource["responseKind"] == {"group": g, "version": "v1", "kind": "Widget"}
    assert [s["subresource"] for s in resource["subresources"]] == ["status"]


def conversion_crd(group_: str, webhook: WebhookServer, path: str = "/convert") -> dict:
    """Widgets stored at v1 (spec.size), served at v2 too (spec.dimension), converted by the
    test's webhook."""
    def version(name: str, field: str, storage: bool) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage, "schema": {
            "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": {field: {"type": "string"}}}}}}}

    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group_}"},
        "spec": {"group": group_, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [version("v1", "size", True), version("v2", "dimension", False)],
                 "conversion": {"strategy": "Webhook", "webhook": {
                     "conversionReviewVersions": ["v1"],
                     "clientConfig": {"url": f"https://127.0.0.1:{webhook.port}{path}",
                                      "caBundle": webhook.ca_bundle}}}},
    }


def test_a_conversion_webhook_converts_between_versions(
        gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory) -> None:
    g = group()
    with WebhookServer(tmp_path_factory.mktemp("conversion")) as webhook:
        apply(gw, conversion_crd(g, webhook))
        established(gw, f"widgets.{g}")
        v1, v2 = (f"/apis/{g}/{v}/namespaces/default/widgets" for v in ("v1", "v2"))
        code, body = gw.request("POST", v2, {"apiVersion": f"{g}/v2", "kind": "Widget",
                                             "metadata": {"name": "w"},
                                             "spec": {"dimension": "large"}})
        created = json.loads(body)
        assert code == 201, body
        assert created["apiVersion"] == f"{g}/v2" and created["spec"] == {"dimension": "large"}
        code, stored = get_json(gw, f"{v1}/w")
        assert stored["apiVersion"] == f"{g}/v1" and stored["spec"] == {"size": "large"}
        reviews = webhook.received("/convert")
        assert reviews and reviews[0]["apiVersion"] == "apiextensions.k8s.io/v1"
        assert reviews[0]["request"]["desiredAPIVersion"] == f"{g}/v1"
        code, body = gw.request("POST", v1, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                             "metadata": {"name": "x"},
                                             "spec": {"size": "small"}})
        assert code == 201, body
        webhook.clear()
        code, listed = get_json(gw, v2)
        assert sorted((i["metadata"]["name"], i["spec"]["dimension"])
                      for i in listed["items"]) == [("w", "large"), ("x", "small")]
        assert all(i["apiVersion"] == f"{g}/v2" for i in listed["items"])
        assert len(webhook.received("/convert")) == 1, "a list converts in one review"

        broken = conversion_crd(g, webhook, "/convert-fail")
        apply(gw, broken)

        def failing() -> dict | None:
            code, body = gw.request("GET", f"{v2}/w")
            return json.loads(body) if code == 500 else None

        status = eventually(failing, timeout=10, what="the failing webhook's 500")
        assert status["message"] == (f"conversion webhook for {g}/v1, Kind=Widget failed: "
                                     "cannot convert widgets today"), status
        code, body = gw.request("GET", f"{v1}/w")
        assert code == 200, "reading at the stored version needs no conversion"


def test_defaults_apply_after_a_webhook_conversion_on_get_list_and_watch(
        gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory) -> None:
    """kube defaults an object read at a served version after converting it: v2's schema
    defaults spec.colour, objects stored at v1 (which has no colour) come back from the
    webhook without it, and GET, list and watch at v2 carry the default."""
    g = group()
    with WebhookServer(tmp_path_factory.mktemp("conversion-defaults")) as webhook:
        crd = conversion_crd(g, webhook)
        v2_spec = crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        v2_spec["properties"]["colour"] = {"type": "string", "default": "blue"}
        apply(gw, crd)
        established(gw, f"widgets.{g}")
        v1, v2 = (f"/apis/{g}/{v}/namespaces/default/widgets" for v in ("v1", "v2"))
        code, body = gw.request("POST", v1, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                             "metadata": {"name": "old"},
                                             "spec": {"size": "small"}})
        assert code == 201, body
        assert json.loads(body)["spec"] == {"size": "small"}
        wanted = {"dimension": "small", "colour": "blue"}
        code, got = get_json(gw, f"{v2}/old")
        assert code == 200 and got["spec"] == wanted, got
        code, listed = get_json(gw, v2)
        assert code == 200 and [i["spec"] for i in listed["items"]] == [wanted], listed
        stream = gw.open("GET", f"{v2}?watch=1&timeoutSeconds=10", timeout=15)
        try:
            first = json.loads(stream.readline())
            assert (first["type"], first["object"]["spec"]) == ("ADDED", wanted), first
            code, body = gw.request("POST", v1, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                                 "metadata": {"name": "new"},
                                                 "spec": {"size": "large"}})
            assert code == 201, body
            event = json.loads(stream.readline())
            assert (event["type"], event["object"]["metadata"]["name"],
                    event["object"]["spec"]) == (
                "ADDED", "new", {"dimension": "large", "colour": "blue"}), event
        finally:
            stream.close()
        # stored as written: the default is the reader's
        code, stored = get_json(gw, f"{v1}/new")
        assert stored["spec"] == {"size": "large"}, stored


def test_server_side_apply_of_custom_resources(gw: GatewayProcess) -> None:
    """Field ownership follows the CRD's schema: each field of the spec is owned on its own,
    so a second manager changing another field is no conflict, and the same field is."""
    g = group()
    apply(gw, widget_crd(g))
    established(gw, f"widgets.{g}")
    obj = {"apiVersion": f"{g}/v1", "kind": "Widget",
           "metadata": {"name": "ssa", "namespace": "default", "labels": {"a": "1"}},
           "spec": {"size": "small", "image": "nginx"}}
    gw.kubectl("apply", "--server-side", "--field-manager=first", "-f", "-",
               input=yaml.safe_dump(obj))
    stored = found(gw, f"/apis/{g}/v1/namespaces/default/widgets/ssa")
    fields = {m["manager"]: m["fieldsV1"] for m in stored["metadata"]["managedFields"]}
    assert fields["first"]["f:spec"] == {"f:size": {}, "f:image": {}}, fields
    assert fields["first"]["f:metadata"] == {"f:labels": {"f:a": {}}}, fields
    other = {**obj, "metadata": {"name": "ssa", "namespace": "default"},
             "spec": {"replicas": 3}}
    gw.kubectl("apply", "--server-side", "--field-manager=second", "-f", "-",
               input=yaml.safe_dump(other))
    clash = {**obj, "metadata": {"name": "ssa", "namespace": "default"},
             "spec": {"image": "busybox"}}
    result = gw.kubectl("apply", "--server-side", "--field-manager=second", "-f", "-",
                        input=yaml.safe_dump(clash), check=False)
    assert result.returncode != 0 and "conflict" in result.stderr.lower(), result.stderr
    assert 'conflict with "first": .spec.image' in result.stderr, result.stderr


def test_validation_ratchets_what_an_update_leaves_alone(gw: GatewayProcess) -> None:
    """A schema tightened after an object was written: an update that leaves the now-invalid
    field as it was passes; one that changes it is judged by the new schema."""
    g = group()
    crd = widget_crd(g)
    apply(gw, crd)
    established(gw, f"widgets.{g}")
    path = f"/apis/{g}/v1/namespaces/default/widgets"
    code, body = gw.request("POST", path, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                           "metadata": {"name": "r"},
                                           "spec": {"size": "small", "image": "a" * 20}})
    assert code == 201, body
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"][
            "maxLength"] = 10
    apply(gw, crd)

    def tightened() -> bool:
        code, _ = gw.request("POST", path, {"apiVersion": f"{g}/v1", "kind": "Widget",
                                            "metadata": {"name": "probe"},
                                            "spec": {"size": "small", "image": "b" * 20}})
        return code == 422

    eventually(tightened, timeout=10, what="the tighter schema served")
    code, body = gw.request("PATCH", f"{path}/r", {"spec": {"size": "large"}},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert code == 200, body
    code, body = gw.request("PATCH", f"{path}/r", {"spec": {"image": "c" * 20}},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert code == 422, body
    assert json.loads(body)["details"]["causes"][0]["field"] == "spec.image"
