"""Object semantics over HTTP: metadata, names, conflicts, patches, deletes, bad input."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from tests.support.api import CM, ROOT_CA, configmap, expect_status, rv

pytestmark = pytest.mark.slow

#: k8s.io/apimachinery's messages for names that are not DNS-1123 subdomains / labels
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
             "'-' or '.', and must start and end with an alphanumeric character (e.g. "
             "'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
         "and must start and end with an alphanumeric character (e.g. 'my-name',  or "
         "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
#: What kube-apiserver's serializers read (negotiation.NewUnsupportedMediaTypeError)
BODY_TYPES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
#: The Go struct kube first decodes a body into, as encoding/json names it in its errors
TYPE_META = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string '
             '"json:\\"kind,omitempty\\"" }')
UNRECOGNIZED = "the object provided is unrecognized (must be of type ConfigMap): "


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
    assert code == 200 and relabeled["metadata"]["labels"] == {"only": "metadata"}
    assert relabeled["metadata"]["generation"] == 2, "a metadata change leaves generation alone"
    api.delete(f"{path}/{name}")


def test_invalid_names_are_422_with_causes_and_store_nothing(api, ns):
    status = expect_status(
        api.post(CM.format(ns=ns), configmap("Not_Valid")), 422, "Invalid",
        message=f'ConfigMap "Not_Valid" is invalid: metadata.name: Invalid value: "Not_Valid": '
                f"{SUBDOMAIN}",
        causes=[{"reason": "FieldValueInvalid", "field": "metadata.name",
                 "message": f'Invalid value: "Not_Valid": {SUBDOMAIN}'}])
    assert (status["details"]["kind"], status["details"]["name"]) == ("ConfigMap", "Not_Valid")
    expect_status(api.post(CM.format(ns=ns), {"metadata": {}}), 422, "Invalid",
                  message='ConfigMap "" is invalid: metadata.name: Required value: name or '
                          "generateName is required",
                  causes=[{"reason": "FieldValueRequired", "field": "metadata.name",
                           "message": "Required value: name or generateName is required"}])
    code, listed = api.get(CM.format(ns=ns))
    # only the root CA every namespace holds
    assert code == 200 and [o["metadata"]["name"] for o in listed["items"]] == [ROOT_CA], \
        "nothing was stored"
    # namespace names are DNS-1123 labels: a dot is enough to refuse one
    expect_status(api.post("/api/v1/namespaces", {"metadata": {"name": "has.dots"}}),
                  422, "Invalid",
                  message=f'Namespace "has.dots" is invalid: metadata.name: Invalid value: '
                          f'"has.dots": {LABEL}',
                  causes=[{"reason": "FieldValueInvalid", "field": "metadata.name",
                           "message": f'Invalid value: "has.dots": {LABEL}'}])
    assert api.get("/api/v1/namespaces/has.dots")[0] == 404


def test_update_with_a_stale_resource_version_is_a_conflict(api, ns):
    code, made = api.post(CM.format(ns=ns), configmap("racy", a="1"))
    assert code == 201, made
    stale = json.loads(json.dumps(made))
    made["data"]["a"] = "2"
    assert api.put(f"{CM.format(ns=ns)}/racy", made)[0] == 200
    stale["data"]["a"] = "3"
    status = expect_status(
        api.put(f"{CM.format(ns=ns)}/racy", stale), 409, "Conflict",
        message='Operation cannot be fulfilled on configmaps "racy": the object has been '
                "modified; please apply your changes to the latest version and try again")
    assert status["details"] == {"name": "racy", "kind": "configmaps"}
    assert api.get(f"{CM.format(ns=ns)}/racy")[1]["data"] == {"a": "2"}


def test_a_no_op_update_writes_nothing(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(path, configmap("same", a="1"))
    assert code == 201, made
    code, again = api.put(f"{path}/same", made)
    assert code == 200 and rv(again) == rv(made)
    # and sends no watch event: the first event after the create is a later, real change
    code, changed = api.patch(f"{path}/same", {"data": {"a": "2"}}, "application/merge-patch+json")
    assert code == 200 and rv(changed) > rv(made)
    events = api.watch(f"{path}?watch=1&resourceVersion={rv(made)}", max_events=1)
    assert [(e["type"], e["object"]["data"], rv(e["object"])) for e in events] == [
        ("MODIFIED", {"a": "2"}, rv(changed))]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"metadata": {"name": "other"}},
         "the name of the object (other) does not match the name on the URL (mine)"),
        ({"metadata": {"name": "mine", "namespace": "elsewhere"}},
         "the namespace of the provided object does not match the namespace sent on the request"),
        # kube: 'Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret)
        # to (core.ConfigMap): unknown conversion'; the gateway words it otherwise
        ({"kind": "Secret", "metadata": {"name": "mine"}}, None),
        # kube: 'ConfigMap in version "v2" cannot be handled as a ConfigMap: no kind
        # "ConfigMap" is registered for version "v2" ...'; the gateway words it otherwise
        ({"apiVersion": "v2", "metadata": {"name": "mine"}}, None),
    ],
)
def test_mismatches_between_url_and_body_are_400(api, ns, body, message):
    code, made = api.post(CM.format(ns=ns), configmap("mine", a="1"))
    assert code == 201, made
    expect_status(api.put(f"{CM.format(ns=ns)}/mine", body), 400, "BadRequest", message=message)
    code, stored = api.get(f"{CM.format(ns=ns)}/mine")
    assert code == 200 and stored["data"] == {"a": "1"} and rv(stored) == rv(made)


def test_malformed_bodies_are_400_and_oversized_413(api, ns):
    # handlers.transformDecodeError: the decoder's error, then a summary of the body (its text
    # when it starts with "{", hex otherwise)
    path = CM.format(ns=ns)
    expect_status(api.call("POST", path, b"{not json"), 400, "BadRequest",
                  message=f"{UNRECOGNIZED}couldn't get version/kind; json parse error: invalid "
                          "character 'n' looking for beginning of object key string "
                          "({not json)")
    expect_status(api.call("POST", path, b"[1, 2]"), 400, "BadRequest",
                  message=f"{UNRECOGNIZED}couldn't get version/kind; json parse error: json: "
                          f"cannot unmarshal array into Go value of type {TYPE_META} "
                          "(5b312c20325d)")
    # kube: 'yaml: line 1: did not find expected ',' or ']'' (go-yaml); the gateway's YAML
    # parser describes the problem in its own words, so the message's frame is asserted
    status = expect_status(api.call("POST", path, b"a: [b", {"Content-Type": "application/yaml"}),
                           400, "BadRequest")
    assert status["message"].startswith(f"{UNRECOGNIZED}yaml: line 1: "), status["message"]
    assert status["message"].endswith(" (613a205b62)"), status["message"]
    expect_status(api.call("POST", path, b"x", {"Content-Type": "text/plain"}),
                  415, "UnsupportedMediaType",
                  message="the body of the request was in an unknown format - accepted media "
                          f"types include: {BODY_TYPES}")
    big = json.dumps(configmap("big", v="x" * (3 * 1024 * 1024 + 10))).encode()
    expect_status(api.call("POST", path, big), 413, "RequestEntityTooLarge",
                  message="Request entity too large: limit is 3145728")
    code, listed = api.get(path)
    assert code == 200 and [o["metadata"]["name"] for o in listed["items"]] == [ROOT_CA], \
        "nothing was stored"


def test_yaml_request_bodies(api, ns):
    body = yaml.safe_dump(configmap("from-yaml", k="v")).encode()
    code, made = api.call("POST", CM.format(ns=ns), body, {"Content-Type": "application/yaml"})
    assert code == 201 and made["data"] == {"k": "v"}


def test_field_validation_strict_warn_ignore(api, gateway, ns):
    path = CM.format(ns=ns)
    body = {**configmap("fv"), "bogus": 1}
    expect_status(api.post(f"{path}?fieldValidation=Strict", body), 400, "BadRequest",
                  message='ConfigMap in version "v1" cannot be handled as a ConfigMap: strict '
                          'decoding error: unknown field "bogus"')
    assert api.get(f"{path}/fv")[0] == 404
    response = gateway.open("POST", f"{path}?fieldValidation=Warn", body)
    assert response.status == 201
    assert response.headers["Warning"] == '299 - "unknown field \\"bogus\\""'
    assert "bogus" not in json.loads(response.read())
    code, made = api.post(f"{path}?fieldValidation=Ignore", {**configmap("fv2"), "bogus": 1})
    assert code == 201 and "bogus" not in made
    # ValidateFieldValidation lists the allowed values sorted, the empty one first
    unsupported = 'Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"'
    status = expect_status(api.post(f"{path}?fieldValidation=Loud", configmap("fv3")),
                           422, "Invalid",
                           message=f'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: '
                                   f"{unsupported}",
                           causes=[{"reason": "FieldValueNotSupported", "message": unsupported,
                                    "field": "fieldValidation"}])
    assert (status["details"]["group"], status["details"]["kind"]) == ("meta.k8s.io",
                                                                       "CreateOptions")
    assert api.get(f"{path}/fv3")[0] == 404


def test_wrong_field_types_are_400(api, ns):
    # kube goes on with Go's "json: cannot unmarshal number into Go struct field
    # ConfigMap.data of type string"; the gateway with "data.a: expected string, got number"
    status = expect_status(
        api.post(CM.format(ns=ns), {"metadata": {"name": "typed"}, "data": {"a": 1}}),
        400, "BadRequest")
    assert status["message"].startswith(
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: ')
    assert api.get(f"{CM.format(ns=ns)}/typed")[0] == 404


def test_dry_run_on_every_write(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(f"{path}?dryRun=All", configmap("dry", a="1"))
    assert code == 201 and made["metadata"]["uid"]
    assert api.get(f"{path}/dry")[0] == 404
    code, real = api.post(path, configmap("real", a="1"))
    assert code == 201, real
    real["data"]["a"] = "2"
    code, put = api.put(f"{path}/real?dryRun=All", real)
    assert code == 200 and put["data"] == {"a": "2"}
    code, patched = api.patch(f"{path}/real?dryRun=All", {"data": {"a": "3"}},
                              "application/merge-patch+json")
    assert code == 200 and patched["data"] == {"a": "3"}
    assert api.call("DELETE", f"{path}/real?dryRun=All")[0] == 200
    code, stored = api.get(f"{path}/real")
    assert code == 200 and stored["data"] == {"a": "1"} and rv(stored) == rv(real)
    # ValidateDryRun shows the values as the Go slice they are, all in one cause
    unsupported = 'Unsupported value: []string{"All", "Sometimes"}: supported values: "All"'
    expect_status(api.post(f"{path}?dryRun=All&dryRun=Sometimes", configmap("x")), 422,
                  "Invalid",
                  message=f'CreateOptions.meta.k8s.io "" is invalid: dryRun: {unsupported}',
                  causes=[{"reason": "FieldValueNotSupported", "message": unsupported,
                           "field": "dryRun"}])
    assert api.get(f"{path}/x")[0] == 404


def test_patch_types(api, ns):
    path = f"{CM.format(ns=ns)}/p"
    assert api.post(CM.format(ns=ns), configmap("p", a="1", b="2"))[0] == 201
    code, out = api.patch(path, [{"op": "replace", "path": "/data/a", "value": "x"}],
                          "application/json-patch+json")
    assert code == 200 and out["data"] == {"a": "x", "b": "2"}
    code, out = api.patch(path, {"data": {"b": None, "c": "3"}}, "application/merge-patch+json")
    assert code == 200 and out["data"] == {"a": "x", "c": "3"}
    code, out = api.patch(path, {"metadata": {"finalizers": ["example.com/f", "example.com/g"]}},
                          "application/strategic-merge-patch+json")
    assert code == 200 and out["metadata"]["finalizers"] == ["example.com/f", "example.com/g"]
    code, out = api.patch(path, {"metadata": {"$deleteFromPrimitiveList/finalizers": [
        "example.com/f"]}}, "application/strategic-merge-patch+json")
    assert code == 200 and out["metadata"]["finalizers"] == ["example.com/g"]
    code, out = api.patch(path, {"metadata": {"$deleteFromPrimitiveList/finalizers": [
        "example.com/g"]}}, "application/strategic-merge-patch+json")
    # the emptied list is left out (omitempty), as kube's ObjectMeta marshals it
    assert code == 200 and "finalizers" not in out["metadata"], out["metadata"]
    # the PATCH route consumes only the patch types: kube's router (go-restful) refuses any
    # other Content-Type of a body before the handler runs, in its own words
    status = expect_status(api.patch(path, {"data": {}}, "application/xml-patch"),
                           415, "UnsupportedMediaType", message="415: Unsupported Media Type")
    assert status["details"] == {}
    expect_status(api.patch(f"{CM.format(ns=ns)}/missing", {"data": {}},
                            "application/merge-patch+json"), 404, "NotFound",
                  message='configmaps "missing" not found')


def test_server_side_apply(api, ns):
    path = f"{CM.format(ns=ns)}/ssa"
    applied = yaml.safe_dump(configmap("ssa", a="1")).encode()
    expect_status(api.patch(path, applied, "application/apply-patch+yaml"), 422, "Invalid",
                  message='PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                          "is required for apply patch",
                  causes=[{"reason": "FieldValueRequired", "field": "fieldManager",
                           "message": "Required value: is required for apply patch"}])
    assert api.get(path)[0] == 404
    code, made = api.patch(f"{path}?fieldManager=alice", applied, "application/apply-patch+yaml")
    assert code == 201, made
    entry = made["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"]) == ("alice", "Apply")
    assert entry["fieldsV1"]["f:data"]["f:a"] == {}
    other = yaml.safe_dump(configmap("ssa", a="2")).encode()
    # alice is an applier: kube names appliers without "using <version>"
    expect_status(api.patch(f"{path}?fieldManager=bob", other, "application/apply-patch+yaml"),
                  409, "Conflict",
                  message='Apply failed with 1 conflict: conflict with "alice": .data.a',
                  causes=[{"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
                           "field": ".data.a"}])
    code, forced = api.patch(f"{path}?fieldManager=bob&force=true", other,
                             "application/apply-patch+yaml")
    assert code == 200 and forced["data"] == {"a": "2"}
    # alice no longer applies a field she solely owns: it goes
    code, out = api.patch(f"{path}?fieldManager=alice",
                          yaml.safe_dump(configmap("ssa", z="9")).encode(),
                          "application/apply-patch+yaml")
    assert code == 200 and out["data"] == {"a": "2", "z": "9"}
    code, out = api.patch(f"{path}?fieldManager=alice",
                          yaml.safe_dump(configmap("ssa")).encode(),
                          "application/apply-patch+yaml")
    assert code == 200 and out["data"] == {"a": "2"}
    expect_status(api.patch(f"{path}?force=true", {"data": {}}, "application/merge-patch+json"),
                  422, "Invalid",
                  message='PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be '
                          "specified for non-apply patch",
                  causes=[{"reason": "FieldValueForbidden", "field": "force",
                           "message": "Forbidden: may not be specified for non-apply patch"}])


def test_delete_with_finalizers_waits_for_them(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(path, {"metadata": {"name": "held",
                                              "finalizers": ["example.com/hold"]}})
    assert code == 201, made
    code, obj = api.delete(f"{path}/held")
    assert code == 200 and obj["kind"] == "ConfigMap"
    assert obj["metadata"]["deletionTimestamp"]
    code, still = api.get(f"{path}/held")
    assert code == 200 and still["metadata"]["deletionTimestamp"]
    code, released = api.patch(f"{path}/held", {"metadata": {"finalizers": None}},
                               "application/merge-patch+json")
    assert code == 200, released
    assert api.get(f"{path}/held")[0] == 404


def test_delete_preconditions_and_options(api, ns):
    path = CM.format(ns=ns)
    code, made = api.post(path, configmap("pre"))
    assert code == 201, made
    # rest.BeforeDelete checks the preconditions first, naming the object by its Kind
    status = expect_status(
        api.delete(f"{path}/pre", {"preconditions": {"resourceVersion": "1"}}), 409, "Conflict",
        message='Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the '
                f"precondition (1) does not match the ResourceVersion in record ({rv(made)}). "
                "The object might have been modified")
    assert status["details"] == {"name": "pre", "kind": "ConfigMap"}
    uid = made["metadata"]["uid"]
    status = expect_status(
        api.delete(f"{path}/pre", {"preconditions": {"uid": "nope", "resourceVersion": "1"}}),
        409, "Conflict",
        message='Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition '
                f"(nope) does not match the UID in record ({uid}). The object might have been "
                "deleted and then recreated")
    assert status["details"] == {"name": "pre", "kind": "ConfigMap"}
    # ValidateDeleteOptions names an unset policy "nil" among the supported values
    unsupported = ('Unsupported value: "Sometimes": supported values: "Foreground", '
                   '"Background", "Orphan", "nil"')
    expect_status(api.delete(f"{path}/pre", {"propagationPolicy": "Sometimes"}), 422, "Invalid",
                  message=f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                          f"{unsupported}",
                  causes=[{"reason": "FieldValueNotSupported", "message": unsupported,
                           "field": "propagationPolicy"}])
    code, still = api.get(f"{path}/pre")
    assert code == 200 and rv(still) == rv(made), "refused deletes delete nothing"
    code, status = api.delete(f"{path}/pre", {"propagationPolicy": "Foreground",
                                              "gracePeriodSeconds": 0,
                                              "preconditions": {"uid": made["metadata"]["uid"]}})
    assert code == 200 and status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "pre", "kind": "configmaps", "uid": made["metadata"]["uid"]}}
    expect_status(api.delete(f"{path}/pre"), 404, "NotFound", message='configmaps "pre" not found')


def test_deletecollection_returns_the_deleted_list(api, ns):
    path = CM.format(ns=ns)
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        assert api.post(path, configmap(name, labels={"tier": tier}))[0] == 201
    code, deleted = api.call("DELETE", f"{path}?labelSelector=tier%3Dx")
    assert code == 200 and deleted["kind"] == "ConfigMapList"
    assert sorted(o["metadata"]["name"] for o in deleted["items"]) == ["a", "b"]
    remaining = api.get(path)[1]["items"]
    assert [o["metadata"]["name"] for o in remaining] == ["c", ROOT_CA]


def test_status_subresource_split(api, ns):
    path = f"/api/v1/namespaces/{ns}/services"
    svc = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}
    code, made = api.post(path, svc)
    assert code == 201, made
    assert made["status"] == {"loadBalancer": {}}, "status is not set on create"
    made["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    made["spec"]["ports"][0]["port"] = 81
    code, updated = api.put(f"{path}/lb/status", made)
    assert code == 200
    assert updated["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1"}]
    assert updated["spec"]["ports"][0]["port"] == 80, "the status update leaves spec alone"
    updated["status"] = {}
    code, main = api.put(f"{path}/lb", updated)
    assert code == 200, main
    assert main["status"]["loadBalancer"]["ingress"], "the main resource leaves status alone"
    assert api.get(f"{path}/lb/status")[1]["metadata"]["name"] == "lb"
    expect_status(api.get(f"{path}/lb/nothing"), 404, "NotFound",
                  message="the server could not find the requested resource")


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
