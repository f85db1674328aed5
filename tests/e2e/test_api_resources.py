"""The built-in resources' own rules: namespaces, secrets, services, endpoints, events,
endpointslices, leases and webhook configurations."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.api import API, CM, configmap, expect_status, rv
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


def causes_of(status: dict) -> list[tuple[str, str]]:
    """(field, reason) of each cause: what is asserted where the gateway's cause messages differ
    from kube's (see the notes at each use)."""
    return [(c.get("field", ""), c["reason"]) for c in status["details"]["causes"]]


def test_namespace_lifecycle(api, gateway):
    expect_status(api.post(CM.format(ns="no-such-namespace"), configmap("x")), 404, "NotFound",
                  message='namespaces "no-such-namespace" not found')
    ns = api.namespace()
    held = f"{CM.format(ns=ns)}/held"
    code, made = api.post(CM.format(ns=ns), {"metadata": {"name": "held",
                                                          "finalizers": ["example.com/x"]}})
    assert code == 201, made
    code, terminating = api.delete(f"/api/v1/namespaces/{ns}")
    assert code == 200 and terminating["status"]["phase"] == "Terminating"
    assert terminating["metadata"]["deletionTimestamp"]
    # kube names the object: 'configmaps "late" is forbidden: unable to create ...' with
    # details.name "late"; the gateway says 'configmaps is forbidden: ...' without a name
    status = expect_status(api.post(CM.format(ns=ns), configmap("late")), 403, "Forbidden",
                           causes=[{"reason": "NamespaceTerminating",
                                    "message": f"namespace {ns} is being terminated",
                                    "field": "metadata.namespace"}])
    assert status["message"].endswith(
        f"is forbidden: unable to create new content in namespace {ns} because it is being "
        "terminated")
    # the namespace controller has been through the namespace (it deleted the object, which
    # its finalizer holds), and the namespace waits for that finalizer
    eventually(lambda: api.get(held)[1]["metadata"].get("deletionTimestamp"),
               what="the namespace controller deleting the namespace's content")
    code, still = api.get(f"/api/v1/namespaces/{ns}")
    assert code == 200 and still["status"]["phase"] == "Terminating"
    watch = gateway.open("GET", f"/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3D{ns}"
                                f"&resourceVersion={rv(terminating)}", timeout=30)
    try:
        code, released = api.patch(held, {"metadata": {"finalizers": None}},
                                   "application/merge-patch+json")
        assert code == 200, released
        while (event := json.loads(watch.readline()))["type"] != "DELETED":
            assert event["type"] == "MODIFIED", event
    finally:
        watch.close()
    assert rv(event["object"]) > rv(released), "the namespace went after the finalizer, not before"
    assert api.get(f"/api/v1/namespaces/{ns}")[0] == 404
    code, listed = api.get("/api/v1/namespaces?fieldSelector=status.phase%3DActive")
    assert ns not in [n["metadata"]["name"] for n in listed["items"]]
    assert "default" in [n["metadata"]["name"] for n in listed["items"]]


def test_secrets(api, ns):
    path = f"/api/v1/namespaces/{ns}/secrets"
    code, made = api.post(path, {"metadata": {"name": "s"}, "stringData": {"pw": "hunter2"},
                                 "data": {"pw": "b2xk", "other": "eA=="}})
    assert code == 201
    assert made["data"] == {"pw": "aHVudGVyMg==", "other": "eA=="}, "stringData wins"
    assert "stringData" not in made and made["type"] == "Opaque"
    # kube goes on with Go's base64 error ("illegal base64 data at input byte 3"); the gateway
    # with "data.x: illegal base64 data (Only base64 data is allowed)"
    status = expect_status(api.post(path, {"metadata": {"name": "bad"},
                                           "data": {"x": "not base64!"}}), 400, "BadRequest")
    assert status["message"].startswith('Secret in version "v1" cannot be handled as a Secret: ')
    expect_status(api.post(path, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                  "data": {"tls.crt": "eA=="}}), 422, "Invalid",
                  message='Secret "tls" is invalid: data[tls.key]: Required value',
                  causes=[{"reason": "FieldValueRequired", "message": "Required value",
                           "field": "data[tls.key]"}])
    # the type is immutable (the data would do for the new type: that is the only cause)
    code, typed = api.post(path, {"metadata": {"name": "typed"}, "data": {"username": "dQ=="}})
    assert code == 201, typed
    typed["type"] = "kubernetes.io/basic-auth"
    immutable = 'Invalid value: "kubernetes.io/basic-auth": field is immutable'
    expect_status(api.put(f"{path}/typed", typed), 422, "Invalid",
                  message=f'Secret "typed" is invalid: type: {immutable}',
                  causes=[{"reason": "FieldValueInvalid", "message": immutable,
                           "field": "type"}])
    code, frozen = api.post(path, {"metadata": {"name": "frozen"}, "immutable": True,
                                   "data": {"a": "eA=="}})
    assert code == 201, frozen
    frozen["data"] = {"a": "eQ=="}
    forbidden = "Forbidden: field is immutable when `immutable` is set"
    expect_status(api.put(f"{path}/frozen", frozen), 422, "Invalid",
                  message=f'Secret "frozen" is invalid: data: {forbidden}',
                  causes=[{"reason": "FieldValueForbidden", "message": forbidden,
                           "field": "data"}])
    assert api.get(f"{path}/frozen")[1]["data"] == {"a": "eA=="}
    assert [api.get(f"{path}/{name}")[0] for name in ("bad", "tls")] == [404, 404]


def test_configmap_rules(api, ns):
    bad_key = ('Invalid value: "bad key!": a valid config key must consist of alphanumeric '
               "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
               "regex used for validation is '[-._a-zA-Z0-9]+')")
    expect_status(api.post(CM.format(ns=ns), {"metadata": {"name": "keys"},
                                              "data": {"bad key!": "x"}}), 422, "Invalid",
                  message=f'ConfigMap "keys" is invalid: data[bad key!]: {bad_key}',
                  causes=[{"reason": "FieldValueInvalid", "message": bad_key,
                           "field": "data[bad key!]"}])
    # kube's cause is about the whole object: field "[]" ('ConfigMap "huge" is invalid: []:
    # Too long: ...'); the gateway names the field "data"
    status = expect_status(api.post(CM.format(ns=ns), {"metadata": {"name": "huge"},
                                                       "data": {"a": "x" * (1024 * 1024 + 1)}}),
                           422, "Invalid")
    assert [(c["reason"], c["message"]) for c in status["details"]["causes"]] == [
        ("FieldValueTooLong", "Too long: must have at most 1048576 bytes")]
    assert [api.get(f"{CM.format(ns=ns)}/{name}")[0] for name in ("keys", "huge")] == [404, 404]


def test_services(api, ns):
    path = f"/api/v1/namespaces/{ns}/services"
    code, made = api.post(path, {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    assert code == 201
    spec = made["spec"]
    assert (spec["type"], spec["sessionAffinity"]) == ("ClusterIP", "None")
    assert spec["ports"][0] == {"port": 80, "targetPort": "http", "protocol": "TCP"}
    assert "clusterIP" not in spec, "no cluster IP is allocated"
    code, ext = api.post(path, {"metadata": {"name": "ext"}, "spec": {
        "type": "ExternalName", "externalName": "db.example.com"}})
    assert code == 201 and ext["spec"]["externalName"] == "db.example.com"
    expect_status(api.post(path, {"metadata": {"name": "noname"}, "spec": {
        "type": "ExternalName"}}), 422, "Invalid",
        message='Service "noname" is invalid: spec.externalName: Required value',
        causes=[{"reason": "FieldValueRequired", "message": "Required value",
                 "field": "spec.externalName"}])
    # kube prints the int32 bare ('Invalid value: 70000: must be between 1 and 65535,
    # inclusive'); the gateway quotes it ('Invalid value: "70000": ...')
    status = expect_status(api.post(path, {"metadata": {"name": "badport"}, "spec": {
        "ports": [{"port": 70000}]}}), 422, "Invalid")
    assert causes_of(status) == [("spec.ports[0].port", "FieldValueInvalid")]
    assert status["details"]["causes"][0]["message"].endswith(
        ": must be between 1 and 65535, inclusive")
    code, _ = api.put(f"{path}/put-created", {"metadata": {"name": "put-created"},
                                                    "spec": {"ports": [{"port": 53}]}})
    assert code == 201, "services may be created by PUT"


def test_endpoints_and_endpointslices(api, ns):
    code, status = api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 8080}]}]})
    assert code == 201
    # kube's message is 'Invalid value: "nope": must be a valid IP address, (e.g. 10.9.8.7 or
    # 2001:db8::ffff)'; the gateway stops after "address"
    status = expect_status(api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "bad"}, "subsets": [{"addresses": [{"ip": "nope"}]}]}),
        422, "Invalid")
    assert causes_of(status) == [("subsets[0].addresses[0].ip", "FieldValueInvalid")]
    assert status["details"]["causes"][0]["message"].startswith(
        'Invalid value: "nope": must be a valid IP address')
    slices = f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
    code, made = api.post(slices, {"metadata": {"name": "web-1"}, "addressType": "IPv4",
                                   "endpoints": [{"addresses": ["10.0.0.1"]}],
                                   "ports": [{"port": 8080}]})
    assert code == 201 and made["kind"] == "EndpointSlice"
    expect_status(api.post(slices, {"metadata": {"name": "web-2"}, "endpoints": []}),
                  422, "Invalid",
                  message='EndpointSlice.discovery.k8s.io "web-2" is invalid: addressType: '
                          "Required value",
                  causes=[{"reason": "FieldValueRequired", "message": "Required value",
                           "field": "addressType"}])


def test_leases(api, ns):
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    code, made = api.post(path, {"metadata": {"name": "leader"}, "spec": {
        "holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": now}})
    assert code == 201 and made["spec"]["renewTime"] == now
    made["spec"]["holderIdentity"] = "b"
    code, updated = api.put(f"{path}/leader", made)
    assert code == 200 and updated["spec"]["holderIdentity"] == "b"
    # kube prints the int32 bare ('Invalid value: 0: must be greater than 0'); the gateway
    # quotes it
    status = expect_status(api.post(path, {"metadata": {"name": "bad"}, "spec": {
        "leaseDurationSeconds": 0}}), 422, "Invalid")
    assert causes_of(status) == [("spec.leaseDurationSeconds", "FieldValueInvalid")]
    assert status["details"]["causes"][0]["message"].endswith(": must be greater than 0")
    # kube ends with Go's 'cannot parse "not-a-time" as "2006"'; the gateway with the whole
    # layout in place of "2006"
    status = expect_status(api.post(path, {"metadata": {"name": "bad"}, "spec": {
        "renewTime": "not-a-time"}}), 400, "BadRequest")
    assert status["message"].startswith('Lease in version "v1" cannot be handled as a Lease: '
                                        'parsing time "not-a-time"')
    code, made = api.post(path, {"metadata": {"name": "offset"}, "spec": {
        "renewTime": "2024-05-06T09:08:09.123456+02:00"}})
    assert code == 201 and made["spec"]["renewTime"] == "2024-05-06T07:08:09.123456Z"
    assert api.get(f"{path}/bad")[0] == 404, "nothing stored"


def test_webhook_configurations_are_validated(api):
    path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    hook = {"name": "short", "clientConfig": {"url": "http://x"}, "admissionReviewVersions": []}
    status = expect_status(api.post(path, {"metadata": {"name": "bad-hooks"},
                                           "webhooks": [hook]}), 422, "Invalid")
    assert status["message"].startswith(
        'MutatingWebhookConfiguration.admissionregistration.k8s.io "bad-hooks" is invalid: [')
    # kube lists admissionReviewVersions before name, and its URL cause shows the scheme and
    # the expected form ('Invalid value: "http": 'https' is the only allowed URL scheme;
    # desired format: https://host[/path]'); the gateway shows the whole URL and no form
    by_field = {c["field"]: c for c in status["details"]["causes"]}
    assert sorted(by_field) == ["webhooks[0].admissionReviewVersions",
                                "webhooks[0].clientConfig.url", "webhooks[0].name",
                                "webhooks[0].sideEffects"]
    assert by_field["webhooks[0].name"] == {
        "reason": "FieldValueInvalid", "field": "webhooks[0].name",
        "message": 'Invalid value: "short": should be a domain with at least three segments '
                   "separated by dots"}
    assert by_field["webhooks[0].admissionReviewVersions"] == {
        "reason": "FieldValueRequired", "field": "webhooks[0].admissionReviewVersions",
        "message": "Required value: must specify one of v1, v1beta1"}
    assert by_field["webhooks[0].sideEffects"] == {
        "reason": "FieldValueRequired", "field": "webhooks[0].sideEffects",
        "message": "Required value: must specify one of None, NoneOnDryRun"}
    assert by_field["webhooks[0].clientConfig.url"]["reason"] == "FieldValueInvalid"
    assert "'https' is the only allowed URL scheme" in by_field[
        "webhooks[0].clientConfig.url"]["message"]
    assert api.get(f"{path}/bad-hooks")[0] == 404
    good = {"name": "m.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "default", "name": "hook"}}}
    code, made = api.post(path, {"metadata": {"name": "good-hooks"}, "webhooks": [good]})
    assert code == 201
    webhook = made["webhooks"][0]
    assert webhook["reinvocationPolicy"] == "Never"
    assert webhook["clientConfig"]["service"]["port"] == 443
    api.delete(f"{path}/good-hooks")


def test_events_and_their_field_selectors(api, ns):
    path = f"/api/v1/namespaces/{ns}/events"
    for name, reason in (("e1", "Started"), ("e2", "Failed")):
        code, _ = api.post(path, {"metadata": {"name": name}, "reason": reason,
                                  "type": "Normal", "message": "hello",
                                  "involvedObject": {"kind": "ConfigMap", "name": "c",
                                                     "namespace": ns}})
        assert code == 201
    code, listed = api.get(f"{path}?fieldSelector=reason%3DFailed,involvedObject.kind%3D"
                           "ConfigMap")
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e2"]
    # kube (legacy event validation) refuses it for its involvedObject.namespace ("" does not
    # match the event's namespace: 'Event "e3" is invalid: involvedObject.namespace: Invalid
    # value: "": does not match event.namespace'); the gateway for a missing involvedObject
    expect_status(api.post(path, {"metadata": {"name": "e3"}}), 422, "Invalid")
    assert api.get(f"{path}/e3")[0] == 404


def test_events_expire_after_the_ttl(workdir):
    """The reaper sweeps every ttl/2 (4s here) and removes events last seen over a TTL ago: an
    hour-old event goes at the first sweep, while one seen just now (under 6s old at that
    sweep, with the seconds-precision timestamp) is kept by it."""
    with GatewayProcess(workdir, "--event-ttl=8s") as proc:
        api = API(proc)
        ns = api.namespace()
        path = f"/api/v1/namespaces/{ns}/events"

        def event(name: str, seen: datetime) -> dict:
            return {"metadata": {"name": name}, "type": "Normal", "reason": "Tested",
                    "lastTimestamp": seen.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns}}

        code, fresh = api.post(path, event("fresh", datetime.now(UTC)))
        assert code == 201, fresh
        code, old = api.post(path, event("old", datetime.now(UTC) - timedelta(hours=1)))
        assert code == 201, old
        eventually(lambda: api.get(f"{path}/old")[0] == 404,
                   what="the reaper removing an event older than --event-ttl")
        code, kept = api.get(f"{path}/fresh")
        assert code == 200 and kept["metadata"]["uid"] == fresh["metadata"]["uid"], \
            "the sweep that removed the old event kept the fresh one"
