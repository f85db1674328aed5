"""Object semantics over HTTP: metadata, names, conflicts, patches, deletes, bad input."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from tests.support.api import API, CM, configmap, rv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(gateway) -> API:
    return API(gateway)


@pytest.fixture
def ns(api) -> str:
    return api.namespace()


def test_system_metadata_is_the_servers(api, ns):
    obj = configmap("meta", a="1")
    obj["metadata"].update(uid="client-uid", creationTimestamp="2001-01-01T00:00:00Z",
                           resourceVersion="12345", generation=7)
    code, made = api.post(CM.format(ns=ns), obj)
    assert code == 201
    meta = made["metadata"]
    assert meta["uid"] != "client-uid" and len(meta["uid"]) == 36
    assert meta["creationTimestamp"] != "2001-01-01T00:00:00Z"
    assert meta["resourceVersion"] != "12345" and meta["resourceVersion"].isdigit()
    assert "generation" not in meta, "configmaps have no generation, as in kube"
    assert made["apiVersion"] == "v1" and made["kind"] == "ConfigMap"


def test_generate_name(api, ns):
    names = set()
    for _ in range(3):
        code, made = api.post(CM.format(ns=ns), {"metadata": {"generateName": "gen-"}})
        assert code == 201
        names.add(made["metadata"]["name"])
    assert len(names) == 3
    assert all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)


def test_generation_follows_spec_changes(api):
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    hook = {"name": "check.example.com", "clientConfig": {"url": "https://example.com/x"},
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    code, made = api.post(path, {"metadata": {"name": f"gen-{time.time_ns()}"},
                                 "webhooks": [hook]})
    assert code == 201, made
    assert made["metadata"]["generation"] == 1
    assert made["webhooks"][0]["failurePolicy"] == "Fail", "defaulted"
    assert made["webhooks"][0]["timeoutSeconds"] == 10
    name = made["metadata"]["name"]
    made["webhooks"][0]["timeoutSeconds"] = 5
    code, updated = api.put(f"{path}/{name}", made)
    assert code == 200 and updated["metadata"]["generation"] == 2
    updated["metadata"]["labels"] = {"only": "metadata"}
    code, relabeled = api.put(f"{path}/{name}", updated)
    assert relabeled["metadata"]["generation"] == 2
    api.delete(f"{path}/{name}")


def test_invalid_names_are_422_with_causes_and_store_nothing(api, ns):
    code, status = api.post(CM.format(ns=ns), configmap("Not_Valid"))
    assert code == 422
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert status["details"]["kind"] == "ConfigMap"
    assert status["message"].startswith('ConfigMap "Not_Valid" is invalid: metadata.name')
    code, _ = api.post(CM.format(ns=ns), {"metadata": {}})
    assert code == 422
    assert api.get(CM.format(ns=ns))[1]["items"] == []
    code, status = api.post("/api/v1/namespaces", {"metadata": {"name": "has.dots"}})
    assert code == 422, "namespace names are DNS-1123 labels"


def test_update_with_a_stale_resource_version_is_a_conflict(api, ns):
    _, made = api.post(CM.format(ns=ns), configmap("racy", a="1"))
    stale = json.loads(json.dumps(made))
    made["data"]["a"] = "2"
    assert api.put(f"{CM.format(ns=ns)}/racy", made)[0] == 200
    stale["data"]["a"] = "3"
    code, status = api.put(f"{CM.format(ns=ns)}/racy", stale)
    assert code == 409 and status["reason"] == "Conflict"
    assert status["message"] == ('Operation cannot be fulfilled on configmaps "racy": the '
                                 "object has been modified; please apply your changes to the "
                                 "latest version and try again")
    assert api.get(f"{CM.format(ns=ns)}/racy")[1]["data"] == {"a": "2"}


def test_a_no_op_update_writes_nothing(api, ns):
    _, made = api.post(CM.format(ns=ns), configmap("same", a="1"))
    code, again = api.put(f"{CM.format(ns=ns)}/same", made)
    assert code == 200 and rv(again) == rv(made)
    events = api.watch(f"{CM.format(ns=ns)}?watch=1&resourceVersion={rv(made)}"
                       "&timeoutSeconds=2", timeout=10)
    assert events == [], "and sends no watch event"


@pytest.mark.parametrize(
    ("body", "path_name", "message"),
    [
        ({"metadata": {"name": "other"}}, "mine", "does not match the name"),
        ({"metadata": {"name": "mine", "namespace": "elsewhere"}}, "mine", "namespace"),
        ({"kind": "Secret", "metadata": {"name": "mine"}}, "mine", "kind"),
        ({"apiVersion": "v2", "metadata": {"name": "mine"}}, "mine", "API version"),
    ],
)
def test_mismatches_between_url_and_body_are_400(api, ns, body, path_name, message):
    api.post(CM.format(ns=ns), configmap("mine"))
    code, status = api.put(f"{CM.format(ns=ns)}/{path_name}", body)
    assert code == 400 and status["reason"] == "BadRequest" and message in status["message"]


def test_malformed_bodies_are_400_and_oversized_413(api, ns):
    path = CM.format(ns=ns)
    code, status = api.call("POST", path, b"{not json")
    assert code == 400 and status["reason"] == "BadRequest"
    code, status = api.call("POST", path, b"a: [b", {"Content-Type": "application/yaml"})
    assert code == 400
    code, status = api.call("POST", path, b"[1, 2]")
    assert code == 400
    code, status = api.call("POST", path, b"x", {"Content-Type": "text/plain"})
    assert code == 415
    big = json.dumps(configmap("big", v="x" * (3 * 1024 * 1024 + 10))).encode()
    code, status = api.call("POST", path, big)
    assert code == 413 and status["reason"] == "RequestEntityTooLarge"
    assert api.get(path)[1]["items"] == []


def test_yaml_request_bodies(api, ns):
    body = yaml.safe_dump(configmap("from-yaml", k="v")).encode()
    code, made = api.call("POST", CM.format(ns=ns), body, {"Content-Type": "application/yaml"})
    assert code == 201 and made["data"] == {"k": "v"}


def test_field_validation_strict_warn_ignore(api, gateway, ns):
    path = CM.format(ns=ns)
    body = {**configmap("fv"), "bogus": 1}
    code, status = api.post(f"{path}?fieldValidation=Strict", body)
    assert code == 400 and 'unknown field "bogus"' in status["message"]
    response = gateway.open("POST", f"{path}?fieldValidation=Warn", body)
    assert response.status == 201
    assert response.headers["Warning"] == '299 - "unknown field \\"bogus\\""'
    assert "bogus" not in json.loads(response.read())
    code, made = api.post(f"{path.replace('fv', '')}?fieldValidation=Ignore",
                          {**configmap("fv2"), "bogus": 1})
    assert code == 201 and "bogus" not in made
    code, status = api.post(f"{path}?fieldValidation=Loud", configmap("fv3"))
    assert code == 422


def test_wrong_field_types_are_400(api, ns):
    code, status = api.post(CM.format(ns=ns), {"metadata": {"name": "typed"}, "data": {"a": 1}})
    assert code == 400 and "expected string" in status["message"]


def test_dry_run_on_every_write(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(f"{path}?dryRun=All", configmap("dry", a="1"))
    assert code == 201 and made["metadata"]["uid"]
    assert api.get(f"{path}/dry")[0] == 404
    _, real = api.post(path, configmap("real", a="1"))
    real["data"]["a"] = "2"
    assert api.put(f"{path}/real?dryRun=All", real)[1]["data"] == {"a": "2"}
    assert api.patch(f"{path}/real?dryRun=All", {"data": {"a": "3"}},
                     "application/merge-patch+json")[1]["data"] == {"a": "3"}
    assert api.call("DELETE", f"{path}/real?dryRun=All")[0] == 200
    code, stored = api.get(f"{path}/real")
    assert code == 200 and stored["data"] == {"a": "1"} and rv(stored) == rv(real)
    code, status = api.post(f"{path}?dryRun=Sometimes", configmap("x"))
    assert code == 422 and status["details"]["causes"][0]["field"] == "dryRun"


def test_patch_types(api, ns):
    path = f"{CM.format(ns=ns)}/p"
    api.post(CM.format(ns=ns), configmap("p", a="1", b="2"))
    code, out = api.patch(path, [{"op": "replace", "path": "/data/a", "value": "x"}],
                          "application/json-patch+json")
    assert code == 200 and out["data"] == {"a": "x", "b": "2"}
    code, out = api.patch(path, {"data": {"b": None, "c": "3"}}, "application/merge-patch+json")
    assert out["data"] == {"a": "x", "c": "3"}
    code, out = api.patch(path, {"metadata": {"finalizers": ["example.com/f"]}},
                          "application/strategic-merge-patch+json")
    assert out["metadata"]["finalizers"] == ["example.com/f"]
    code, out = api.patch(path, {"metadata": {"$deleteFromPrimitiveList/finalizers": [
        "example.com/f"]}}, "application/strategic-merge-patch+json")
    assert "finalizers" not in out["metadata"] or out["metadata"]["finalizers"] == []
    code, _ = api.patch(path, {"data": {}}, "application/xml-patch")
    assert code == 415
    code, _ = api.patch(f"{CM.format(ns=ns)}/missing", {"data": {}},
                       "application/merge-patch+json")
    assert code == 404


def test_server_side_apply(api, ns):
    path = f"{CM.format(ns=ns)}/ssa"
    applied = yaml.safe_dump(configmap("ssa", a="1")).encode()
    code, status = api.patch(path, applied, "application/apply-patch+yaml")
    assert code == 422 and status["details"]["causes"][0]["field"] == "fieldManager"
    code, made = api.patch(f"{path}?fieldManager=alice", applied, "application/apply-patch+yaml")
    assert code == 201, made
    entry = made["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"]) == ("alice", "Apply")
    assert entry["fieldsV1"]["f:data"]["f:a"] == {}
    other = yaml.safe_dump(configmap("ssa", a="2")).encode()
    code, status = api.patch(f"{path}?fieldManager=bob", other, "application/apply-patch+yaml")
    assert code == 409 and status["reason"] == "Conflict"
    # alice is an applier: kube names appliers without "using <version>"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict", "message":
                                            'conflict with "alice"', "field": ".data.a"}]
    code, forced = api.patch(f"{path}?fieldManager=bob&force=true", other,
                             "application/apply-patch+yaml")
    assert code == 200 and forced["data"] == {"a": "2"}
    # alice no longer applies a field she solely owns: it goes
    api.patch(f"{path}?fieldManager=alice", yaml.safe_dump(configmap("ssa", z="9")).encode(),
              "application/apply-patch+yaml")
    code, out = api.patch(f"{path}?fieldManager=alice",
                          yaml.safe_dump(configmap("ssa")).encode(),
                          "application/apply-patch+yaml")
    assert out["data"] == {"a": "2"}
    code, status = api.patch(f"{path}?force=true", {"data": {}}, "application/merge-patch+json")
    assert code == 422


def test_delete_with_finalizers_waits_for_them(api, ns):
    path = CM.format(ns=ns)
    api.post(path, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    code, obj = api.delete(f"{path}/held")
    assert code == 200 and obj["kind"] == "ConfigMap"
    assert obj["metadata"]["deletionTimestamp"]
    code, still = api.get(f"{path}/held")
    assert code == 200 and still["metadata"]["deletionTimestamp"]
    api.patch(f"{path}/held", {"metadata": {"finalizers": None}},
              "application/merge-patch+json")
    assert api.get(f"{path}/held")[0] == 404


def test_delete_preconditions_and_options(api, ns):
    path = CM.format(ns=ns)
    _, made = api.post(path, configmap("pre"))
    code, status = api.delete(f"{path}/pre", {"preconditions": {"resourceVersion": "1"}})
    assert code == 409 and status["reason"] == "Conflict"
    code, status = api.delete(f"{path}/pre", {"preconditions": {"uid": "nope"}})
    assert code == 409
    code, status = api.delete(f"{path}/pre", {"propagationPolicy": "Sometimes"})
    assert code == 422
    code, status = api.delete(f"{path}/pre", {"propagationPolicy": "Foreground",
                                              "gracePeriodSeconds": 0,
                                              "preconditions": {"uid": made["metadata"]["uid"]}})
    assert code == 200 and status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "pre", "kind": "configmaps", "uid": made["metadata"]["uid"]}}
    assert api.delete(f"{path}/pre")[0] == 404


def test_deletecollection_returns_the_deleted_list(api, ns):
    path = CM.format(ns=ns)
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        api.post(path, configmap(name, labels={"tier": tier}))
    code, deleted = api.call("DELETE", f"{path}?labelSelector=tier%3Dx")
    assert code == 200 and deleted["kind"] == "ConfigMapList"
    assert sorted(o["metadata"]["name"] for o in deleted["items"]) == ["a", "b"]
    remaining = api.get(path)[1]["items"]
    assert [o["metadata"]["name"] for o in remaining] == ["c"]


def test_status_subresource_split(api, ns):
    path = f"/api/v1/namespaces/{ns}/services"
    svc = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}
    _, made = api.post(path, svc)
    assert "loadBalancer" not in (made.get("status") or {}), "status is not set on create"
    made["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    made["spec"]["ports"][0]["port"] = 81
    code, updated = api.put(f"{path}/lb/status", made)
    assert code == 200
    assert updated["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1"}]
    assert updated["spec"]["ports"][0]["port"] == 80, "the status update leaves spec alone"
    updated["status"] = {}
    code, main = api.put(f"{path}/lb", updated)
    assert main["status"]["loadBalancer"]["ingress"], "the main resource leaves status alone"
    assert api.get(f"{path}/lb/status")[1]["metadata"]["name"] == "lb"
    assert api.get(f"{path}/lb/nothing")[0] == 404


def test_null_fields_are_fields_not_sent(api, ns):
    # as when kube decodes null into a Go field: no 500, nothing stored for it
    code, made = api.post(CM.format(ns=ns), {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": "nulls", "labels": None},
                                             "data": None})
    assert code == 201, made
    assert "data" not in made and "labels" not in made["metadata"]
    code, made = api.post("/api/v1/namespaces", {"metadata": {"name": f"{ns}-null"},
                                                 "spec": None})
    assert code == 201, made
    assert made["spec"] == {"finalizers": ["kubernetes"]}
    code, review = api.post(f"/apis/authorization.k8s.io/v1/namespaces/{ns}/"
                            "localsubjectaccessreviews",
                            {"metadata": None, "spec": {"user": "nobody", "resourceAttributes": {
                                "verb": "get", "resource": "configmaps"}}})
    assert code == 201, review
    assert review["status"]["allowed"] is False
