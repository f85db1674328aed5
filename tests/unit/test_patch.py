"""PATCH bodies: JSON patch, JSON merge patch and strategic merge patch, as kube applies them."""

from __future__ import annotations

import copy

import pytest
from aiohttp.test_utils import make_mocked_request

import gateway.apis.install  # noqa: F401 - defines every schema
from gateway.apimachinery.status import StatusError
from gateway.endpoints import patch as patches

SERVICE = {"$ref": "io.k8s.api.core.v1.Service"}
ENDPOINTS = {"$ref": "io.k8s.api.core.v1.Endpoints"}
CONFIGMAP = {"$ref": "io.k8s.api.core.v1.ConfigMap"}
VWC = {"$ref": "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration"}


def service() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "frontend"},
            "finalizers": ["a.example.com/one", "b.example.com/two"],
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.0.0.10",
            "selector": {"app": "web"},
            "sessionAffinity": "None",
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443},
            ],
        },
    }


def ports_of(obj: dict) -> list[int]:
    return [p["port"] for p in obj["spec"]["ports"]]


# -- JSON merge patch (RFC 7386) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        # the examples of RFC 7386, appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_examples(target, patch, expected) -> None:
    assert patches.merge_patch(target, patch) == expected


def test_merge_patch_nested_object() -> None:
    current = service()
    result = patches.merge_patch(current, {
        "metadata": {"labels": {"tier": None, "version": "v2"}, "annotations": {"a": "b"}},
        "spec": {"selector": {"app": "web2"}},
    })
    assert result["metadata"]["labels"] == {"app": "web", "version": "v2"}
    assert result["metadata"]["annotations"] == {"a": "b"}
    assert result["metadata"]["name"] == "web"
    assert result["spec"]["selector"] == {"app": "web2"}
    assert result["spec"]["ports"] == service()["spec"]["ports"]


def test_merge_patch_replaces_arrays_whole() -> None:
    result = patches.merge_patch(service(), {"spec": {"ports": [{"port": 8080}]},
                                             "metadata": {"finalizers": ["x"]}})
    assert result["spec"]["ports"] == [{"port": 8080}]
    assert result["metadata"]["finalizers"] == ["x"]


def test_merge_patch_null_of_a_missing_key_is_a_no_op() -> None:
    assert patches.merge_patch({"a": 1}, {"b": None}) == {"a": 1}


def test_merge_patch_null_removes_a_whole_subtree() -> None:
    result = patches.merge_patch(service(), {"spec": None})
    assert "spec" not in result


def test_merge_patch_does_not_modify_its_inputs() -> None:
    current = service()
    patch = {"metadata": {"labels": {"tier": None}}, "spec": {"ports": [{"port": 1}]}}
    before, patch_before = copy.deepcopy(current), copy.deepcopy(patch)
    result = patches.merge_patch(current, patch)
    assert current == before
    assert patch == patch_before
    result["spec"]["ports"][0]["port"] = 2
    assert patch == patch_before


# -- JSON patch (RFC 6902) ------------------------------------------------------------------------


def test_json_patch_operations() -> None:
    current = service()
    result = patches.apply_json_patch(current, [
        {"op": "test", "path": "/metadata/name", "value": "web"},
        {"op": "add", "path": "/metadata/labels/version", "value": "v2"},
        {"op": "replace", "path": "/spec/ports/0/targetPort", "value": "http"},
        {"op": "remove", "path": "/metadata/labels/tier"},
        {"op": "add", "path": "/spec/ports/-", "value": {"port": 53, "protocol": "UDP"}},
        {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copied"},
        {"op": "move", "from": "/spec/sessionAffinity", "path": "/metadata/annotations"},
        {"op": "add", "path": "/metadata/finalizers/0", "value": "first"},
    ])
    assert result["metadata"]["labels"] == {"app": "web", "version": "v2", "copied": "web"}
    assert result["spec"]["ports"][0]["targetPort"] == "http"
    assert ports_of(result) == [80, 443, 53]
    assert "sessionAffinity" not in result["spec"]
    assert result["metadata"]["annotations"] == "None"
    assert result["metadata"]["finalizers"][0] == "first"
    assert current == service()  # the current object is left alone


def test_json_patch_escaped_pointer() -> None:
    current = {"metadata": {"annotations": {"example.com/x": "1", "a~b": "2"}}}
    result = patches.apply_json_patch(current, [
        {"op": "replace", "path": "/metadata/annotations/example.com~1x", "value": "one"},
        {"op": "remove", "path": "/metadata/annotations/a~0b"},
    ])
    assert result == {"metadata": {"annotations": {"example.com/x": "one"}}}


def test_json_patch_empty_list_is_a_no_op() -> None:
    assert patches.apply_json_patch(service(), []) == service()


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "test", "path": "/metadata/name", "value": "other"}],
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        [{"op": "replace", "path": "/spec/missing/deeper", "value": 1}],
        [{"op": "add", "path": "/spec/ports/9", "value": {}}],
        [{"op": "bogus", "path": "/spec"}],
        [{"op": "add", "value": 1}],
        [{"op": "move", "from": "/nothing", "path": "/spec/x"}],
        [{"op": "add", "path": "/metadata/labels/x", "value": "1"},
         {"op": "test", "path": "/metadata/labels/x", "value": "2"}],
    ],
)
def test_json_patch_that_cannot_apply_is_422(operations) -> None:
    current = service()
    with pytest.raises(StatusError) as err:
        patches.apply_json_patch(current, operations)
    assert err.value.code == 422
    assert err.value.reason == "Invalid"
    assert current == service()


@pytest.mark.parametrize("operations", [{"op": "add", "path": "/a", "value": 1}, "x", 1])
def test_json_patch_not_a_list_is_400(operations) -> None:
    with pytest.raises(StatusError) as err:
        patches.apply_json_patch(service(), operations)
    assert err.value.code == 400
    assert err.value.reason == "BadRequest"


def test_json_patch_result_must_be_an_object() -> None:
    with pytest.raises(StatusError) as err:
        patches.apply_json_patch({"a": 1}, [{"op": "replace", "path": "", "value": [1]}])
    assert (err.value.code, err.value.reason, err.value.message) == (
        400, "BadRequest", "json patch result is not an object")


@pytest.mark.parametrize(
    ("headers", "code", "reason", "message"),
    [
        # a body of known length: go-restful's refusal of a Content-Type the route does not
        # consume
        ({"Content-Length": "5"}, 415, "UnsupportedMediaType", "415: Unsupported Media Type"),
        # chunked: no length to refuse by, so its Accept matching answers, with nothing to offer
        ({}, 415, "UnsupportedMediaType",
         "415: Unsupported Media Type\n\nAvailable representations: "),
        ({"Content-Length": "0"}, 406, "NotAcceptable",
         "406: Not Acceptable\n\nAvailable representations: "),
    ],
)
def test_unsupported_patch_type(headers: dict, code: int, reason: str, message: str) -> None:
    request = make_mocked_request("PATCH", "/api/v1/namespaces/n/configmaps/c",
                                  headers={"Content-Type": "text/plain", **headers})
    assert patches.unsupported(request).to_status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": {}, "code": code}


# -- strategic merge patch ------------------------------------------------------------------------


def test_strategic_merge_ports_merged_by_port() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"port": 443, "targetPort": 9443},
    ]}}, SERVICE)
    assert result["spec"]["ports"] == [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 9443},
    ]
    # the rest of the object is left as it was
    assert result["spec"]["clusterIP"] == "10.0.0.10"
    assert result["metadata"] == service()["metadata"]


def test_strategic_merge_port_fields_null_deletes() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"port": 80, "name": None},
    ]}}, SERVICE)
    assert result["spec"]["ports"][0] == {"port": 80, "protocol": "TCP", "targetPort": 8080}


def test_strategic_merge_new_port_is_added() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"name": "dns", "port": 53, "protocol": "UDP"},
    ]}}, SERVICE)
    assert sorted(ports_of(result)) == [53, 80, 443]
    assert {"name": "dns", "port": 53, "protocol": "UDP"} in result["spec"]["ports"]


def test_strategic_merge_new_port_goes_before_server_only_ports() -> None:
    # kube's mergeSlice orders the result with normalizeElementOrder/mergeSortedSlice: an item
    # of the patch that the live list does not have is placed before the server-only items.
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"name": "dns", "port": 53, "protocol": "UDP"},
    ]}}, SERVICE)
    assert ports_of(result) == [53, 80, 443]


def test_strategic_merge_delete_one_port() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"port": 80, "$patch": "delete"},
    ]}}, SERVICE)
    assert result["spec"]["ports"] == [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443}]


def test_strategic_merge_delete_of_a_missing_port_is_a_no_op() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"port": 9999, "$patch": "delete"},
    ]}}, SERVICE)
    assert result["spec"]["ports"] == service()["spec"]["ports"]


def test_strategic_merge_delete_and_merge_together() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"port": 80, "$patch": "delete"},
        {"port": 443, "name": "tls"},
    ]}}, SERVICE)
    assert result["spec"]["ports"] == [
        {"name": "tls", "port": 443, "protocol": "TCP", "targetPort": 8443}]


def test_strategic_merge_replace_the_port_list() -> None:
    result = patches.strategic_merge(service(), {"spec": {"ports": [
        {"$patch": "replace"},
        {"name": "dns", "port": 53, "protocol": "UDP"},
    ]}}, SERVICE)
    assert result["spec"]["ports"] == [{"name": "dns", "port": 53, "protocol": "UDP"}]


def test_strategic_merge_replace_directive_on_a_map() -> None:
    result = patches.strategic_merge(service(), {"metadata": {"labels": {
        "$patch": "replace", "only": "this"}}}, SERVICE)
    assert result["metadata"]["labels"] == {"only": "this"}


def test_strategic_merge_delete_directive_on_a_map() -> None:
    # kube's handleDirectiveInMergeMap leaves an empty map, which a Go map field drops
    result = patches.strategic_merge(service(), {"metadata": {"labels": {
        "$patch": "delete"}}}, SERVICE)
    assert not result["metadata"].get("labels")
    assert result["metadata"]["name"] == "web"
    assert result["metadata"]["finalizers"] == service()["metadata"]["finalizers"]


def test_strategic_merge_finalizers_are_a_set() -> None:
    result = patches.strategic_merge(service(), {"metadata": {"finalizers": [
        "b.example.com/two", "c.example.com/three"]}}, SERVICE)
    assert result["metadata"]["finalizers"] == [
        "a.example.com/one", "b.example.com/two", "c.example.com/three"]


def test_strategic_merge_finalizers_already_present_are_not_repeated() -> None:
    result = patches.strategic_merge(service(), {"metadata": {"finalizers": [
        "a.example.com/one"]}}, SERVICE)
    assert result["metadata"]["finalizers"] == ["a.example.com/one", "b.example.com/two"]


def test_strategic_merge_new_finalizer_goes_before_server_only_ones() -> None:
    # kube: partitionPrimitivesByPresentInList + normalizeElementOrder put the patch's new
    # value ahead of the live-only values.
    result = patches.strategic_merge(service(), {"metadata": {"finalizers": [
        "c.example.com/three"]}}, SERVICE)
    assert result["metadata"]["finalizers"] == [
        "c.example.com/three", "a.example.com/one", "b.example.com/two"]


def test_strategic_merge_delete_from_primitive_list() -> None:
    result = patches.strategic_merge(service(), {"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["a.example.com/one", "not-there"]}}, SERVICE)
    assert result["metadata"]["finalizers"] == ["b.example.com/two"]
    assert "$deleteFromPrimitiveList/finalizers" not in result["metadata"]


def test_strategic_merge_retain_keys() -> None:
    result = patches.strategic_merge(service(), {"spec": {
        "$retainKeys": ["ports", "selector", "type"],
        "type": "NodePort",
    }}, SERVICE)
    assert set(result["spec"]) == {"ports", "selector", "type"}
    assert result["spec"]["type"] == "NodePort"
    assert result["spec"]["ports"] == service()["spec"]["ports"]
    assert "$retainKeys" not in result["spec"]


def test_strategic_merge_set_element_order() -> None:
    result = patches.strategic_merge(service(), {"spec": {
        "$setElementOrder/ports": [{"port": 443}, {"port": 80}],
    }}, SERVICE)
    assert ports_of(result) == [443, 80]
    assert result["spec"]["ports"][0]["name"] == "https"
    assert not any(k.startswith("$") for k in result["spec"])


def test_strategic_merge_set_element_order_with_a_new_port() -> None:
    result = patches.strategic_merge(service(), {"spec": {
        "$setElementOrder/ports": [{"port": 443}, {"port": 53}, {"port": 80}],
        "ports": [{"port": 53, "protocol": "UDP"}],
    }}, SERVICE)
    assert ports_of(result) == [443, 53, 80]
    assert result["spec"]["ports"][1] == {"port": 53, "protocol": "UDP"}


def test_strategic_merge_set_element_order_of_finalizers() -> None:
    result = patches.strategic_merge(service(), {"metadata": {
        "$setElementOrder/finalizers": ["b.example.com/two", "a.example.com/one"],
    }}, SERVICE)
    assert result["metadata"]["finalizers"] == ["b.example.com/two", "a.example.com/one"]


def test_strategic_merge_null_deletes_a_label() -> None:
    result = patches.strategic_merge(service(), {"metadata": {"labels": {
        "tier": None, "version": "v2"}}}, SERVICE)
    assert result["metadata"]["labels"] == {"app": "web", "version": "v2"}


def test_strategic_merge_null_deletes_a_field() -> None:
    result = patches.strategic_merge(service(), {"spec": {"clusterIP": None},
                                                 "metadata": {"missing": None}}, SERVICE)
    assert "clusterIP" not in result["spec"]
    assert "missing" not in result["metadata"]


def test_strategic_merge_maps_merge_by_key() -> None:
    result = patches.strategic_merge(service(), {"spec": {"selector": {"tier": "frontend"}}},
                                     SERVICE)
    assert result["spec"]["selector"] == {"app": "web", "tier": "frontend"}


def test_strategic_merge_configmap_data() -> None:
    current = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
               "data": {"a": "1", "b": "2"}}
    result = patches.strategic_merge(current, {"data": {"a": None, "c": "3"}}, CONFIGMAP)
    assert result["data"] == {"b": "2", "c": "3"}


def test_strategic_merge_adds_a_missing_list() -> None:
    current = service()
    del current["metadata"]["finalizers"]
    result = patches.strategic_merge(current, {"metadata": {"finalizers": ["x"]}}, SERVICE)
    assert result["metadata"]["finalizers"] == ["x"]


def test_strategic_merge_list_without_strategy_is_replaced() -> None:
    current = {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
        "subsets": [
            {"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}],
             "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
        ],
    }
    new_subsets = [{"addresses": [{"ip": "10.1.0.3"}],
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]
    result = patches.strategic_merge(current, {"subsets": new_subsets}, ENDPOINTS)
    assert result["subsets"] == new_subsets
    assert result["metadata"] == {"name": "web"}


def vwc() -> dict:
    def hook(name: str, timeout: int) -> dict:
        return {
            "name": name,
            "clientConfig": {"url": f"https://{name}/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": timeout,
        }

    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "hooks"},
            "webhooks": [hook("a.example.com", 10), hook("b.example.com", 20)]}


def test_strategic_merge_webhooks_merged_by_name() -> None:
    result = patches.strategic_merge(vwc(), {"webhooks": [
        {"name": "b.example.com", "timeoutSeconds": 5,
         "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["secrets"]}]},
    ]}, VWC)
    first, second = result["webhooks"]
    assert first == vwc()["webhooks"][0]
    assert second["name"] == "b.example.com"
    assert second["timeoutSeconds"] == 5
    assert second["clientConfig"] == {"url": "https://b.example.com/validate"}
    assert second["sideEffects"] == "None"
    # rules has no patch strategy: replaced, not merged
    assert second["rules"] == [{"operations": ["UPDATE"], "apiGroups": [""],
                                "apiVersions": ["v1"], "resources": ["secrets"]}]


def test_strategic_merge_delete_a_webhook() -> None:
    result = patches.strategic_merge(vwc(), {"webhooks": [
        {"name": "a.example.com", "$patch": "delete"}]}, VWC)
    assert [w["name"] for w in result["webhooks"]] == ["b.example.com"]


def test_strategic_merge_does_not_modify_the_current_object() -> None:
    current = service()
    patches.strategic_merge(current, {
        "metadata": {"labels": {"tier": None}, "finalizers": ["z"],
                     "$deleteFromPrimitiveList/finalizers": ["a.example.com/one"]},
        "spec": {"ports": [{"port": 80, "targetPort": 1}, {"port": 443, "$patch": "delete"}],
                 "$setElementOrder/ports": [{"port": 80}]},
    }, SERVICE)
    assert current == service()


def test_strategic_merge_non_object_patch_replaces() -> None:
    assert patches.strategic_merge({"a": 1}, ["x"], SERVICE) == ["x"]
