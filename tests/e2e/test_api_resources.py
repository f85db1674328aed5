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
    status = expect_status(api.post(CM.format(ns=ns), configmap("late")), 403, "Forbidden",
                           message=f'configmaps "late" is forbidden: unable to create new '
                                   f"content in namespace {ns} because it is being terminated",
                           causes=[{"reason": "NamespaceTerminating",
                                    "message": f"namespace {ns} is being terminated",
                                    "field": "metadata.namespace"}])
    assert {k: v for k, v in status["details"].items() if k != "causes"} == {
        "name": "late", "kind": "configmaps"}
    # the lifecycle check comes before naming and validation, as kube's admission does: a
    # generated name is not made yet, and an invalid object is refused for its namespace
    expect_status(api.post(CM.format(ns=ns), {"metadata": {"generateName": "gen-"}}),
                  403, "Forbidden",
                  message=f'configmaps "gen-" is forbidden: unable to create new content in '
                          f"namespace {ns} because it is being terminated")
    expect_status(api.post(CM.format(ns=ns), configmap("Not_Valid")), 403, "Forbidden")
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
    # basic-auth needs a username or a password: both are named, in this order
    expect_status(api.post(path, {"metadata": {"name": "basic"},
                                  "type": "kubernetes.io/basic-auth", "data": {"a": "eA=="}}),
                  422, "Invalid",
                  message='Secret "basic" is invalid: [data[username]: Required value, '
                          "data[password]: Required value]",
                  causes=[{"reason": "FieldValueRequired", "message": "Required value",
                           "field": "data[username]"},
                          {"reason": "FieldValueRequired", "message": "Required value",
                           "field": "data[password]"}])
    # on update the type's immutability comes first, then what the new type requires
    typed["type"] = "kubernetes.io/tls"
    immutable = 'Invalid value: "kubernetes.io/tls": field is immutable'
    expect_status(api.put(f"{path}/typed", typed), 422, "Invalid",
                  message=f'Secret "typed" is invalid: [type: {immutable}, data[tls.crt]: '
                          "Required value, data[tls.key]: Required value]",
                  causes=[{"reason": "FieldValueInvalid", "message": immutable,
                           "field": "type"},
                          {"reason": "FieldValueRequired", "message": "Required value",
                           "field": "data[tls.crt]"},
                          {"reason": "FieldValueRequired", "message": "Required value",
                           "field": "data[tls.key]"}])
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
    assert [api.get(f"{path}/{name}")[0] for name in ("bad", "tls", "basic")] == [404, 404, 404]


def test_configmap_rules(api, ns):
    bad_key = ('Invalid value: "bad key!": a valid config key must consist of alphanumeric '
               "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
               "regex used for validation is '[-._a-zA-Z0-9]+')")
    expect_status(api.post(CM.format(ns=ns), {"metadata": {"name": "keys"},
                                              "data": {"bad key!": "x"}}), 422, "Invalid",
                  message=f'ConfigMap "keys" is invalid: data[bad key!]: {bad_key}',
                  causes=[{"reason": "FieldValueInvalid", "message": bad_key,
                           "field": "data[bad key!]"}])
    # the size is about the whole object: kube's path for that is "[]"
    too_long = "Too long: may not be more than 1048576 bytes"
    expect_status(api.post(CM.format(ns=ns), {"metadata": {"name": "huge"},
                                              "data": {"a": "x" * (1024 * 1024 + 1)}}),
                  422, "Invalid", message=f'ConfigMap "huge" is invalid: []: {too_long}',
                  causes=[{"reason": "FieldValueTooLong", "message": too_long, "field": "[]"}])
    assert [api.get(f"{CM.format(ns=ns)}/{name}")[0] for name in ("keys", "huge")] == [404, 404]


def test_services(api, ns):
    path = f"/api/v1/namespaces/{ns}/services"
    code, made = api.post(path, {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    assert code == 201
    spec = made["spec"]
    assert (spec["type"], spec["sessionAffinity"]) == ("ClusterIP", "None")
    assert spec["ports"][0] == {"port": 80, "targetPort": "http", "protocol": "TCP"}
    assert spec["clusterIP"].startswith("10.0.0."), "a cluster IP is allocated"
    code, ext = api.post(path, {"metadata": {"name": "ext"}, "spec": {
        "type": "ExternalName", "externalName": "db.example.com"}})
    assert code == 201 and ext["spec"]["externalName"] == "db.example.com"
    expect_status(api.post(path, {"metadata": {"name": "noname"}, "spec": {
        "type": "ExternalName"}}), 422, "Invalid",
        message='Service "noname" is invalid: spec.externalName: Required value',
        causes=[{"reason": "FieldValueRequired", "message": "Required value",
                 "field": "spec.externalName"}])
    # an int32 is shown bare; the targetPort defaulted from the port is refused with it
    out_of_range = "Invalid value: 70000: must be between 1 and 65535, inclusive"
    expect_status(api.post(path, {"metadata": {"name": "badport"}, "spec": {
        "ports": [{"port": 70000}]}}), 422, "Invalid",
        message=f'Service "badport" is invalid: [spec.ports[0].port: {out_of_range}, '
                f"spec.ports[0].targetPort: {out_of_range}]",
        causes=[{"reason": "FieldValueInvalid", "message": out_of_range,
                 "field": "spec.ports[0].port"},
                {"reason": "FieldValueInvalid", "message": out_of_range,
                 "field": "spec.ports[0].targetPort"}])
    code, _ = api.put(f"{path}/put-created", {"metadata": {"name": "put-created"},
                                                    "spec": {"ports": [{"port": 53}]}})
    assert code == 201, "services may be created by PUT"


def test_endpoints_and_endpointslices(api, ns):
    code, made = api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 8080}]}]})
    assert code == 201, made
    assert made["subsets"][0]["ports"] == [{"port": 8080, "protocol": "TCP"}]
    # the format check and the special-range check both refuse a non-address, each in its
    # own words
    field = "subsets[0].addresses[0].ip"
    not_ip = ('Invalid value: "nope": must be a valid IP address, (e.g. 10.9.8.7 or '
              "2001:db8::ffff)")
    not_ip_either = 'Invalid value: "nope": must be a valid IP address'
    expect_status(api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "bad"}, "subsets": [{"addresses": [{"ip": "nope"}]}]}),
        422, "Invalid",
        message=f'Endpoints "bad" is invalid: [{field}: {not_ip}, {field}: {not_ip_either}]',
        causes=[{"reason": "FieldValueInvalid", "message": not_ip, "field": field},
                {"reason": "FieldValueInvalid", "message": not_ip_either, "field": field}])
    expect_status(api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "portless"}, "subsets": [{"addresses": [{"ip": "10.0.0.2"}],
                                                        "ports": [{"port": 0}]}]}),
        422, "Invalid",
        message='Endpoints "portless" is invalid: subsets[0].ports[0].port: Invalid value: 0: '
                "must be between 1 and 65535, inclusive",
        causes=[{"reason": "FieldValueInvalid", "field": "subsets[0].ports[0].port",
                 "message": "Invalid value: 0: must be between 1 and 65535, inclusive"}])
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
    not_positive = "Invalid value: 0: must be greater than 0"
    expect_status(api.post(path, {"metadata": {"name": "bad"}, "spec": {
        "leaseDurationSeconds": 0}}), 422, "Invalid",
        message='Lease.coordination.k8s.io "bad" is invalid: spec.leaseDurationSeconds: '
                f"{not_positive}",
        causes=[{"reason": "FieldValueInvalid", "message": not_positive,
                 "field": "spec.leaseDurationSeconds"}])
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
    # kube's order: the webhook's own fields (name, side effects, client config), then its
    # admissionReviewVersions; the URL cause shows the scheme alone
    causes = [
        ("webhooks[0].name", "FieldValueInvalid",
         'Invalid value: "short": should be a domain with at least three segments separated '
         "by dots"),
        ("webhooks[0].sideEffects", "FieldValueRequired",
         "Required value: must specify one of None, NoneOnDryRun"),
        ("webhooks[0].clientConfig.url", "FieldValueInvalid",
         "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: "
         "https://host[/path]"),
        ("webhooks[0].admissionReviewVersions", "FieldValueRequired",
         "Required value: must specify one of v1, v1beta1"),
    ]
    expect_status(api.post(path, {"metadata": {"name": "bad-hooks"}, "webhooks": [hook]}),
                  422, "Invalid",
                  message='MutatingWebhookConfiguration.admissionregistration.k8s.io '
                          '"bad-hooks" is invalid: ['
                          + ", ".join(f"{f}: {m}" for f, _, m in causes) + "]",
                  causes=[{"reason": r, "message": m, "field": f} for f, r, m in causes])
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
    # the legacy event rules: outside "default", the involved object's namespace must be the
    # event's (an absent involvedObject has the empty one)
    mismatch = 'Invalid value: "": does not match event.namespace'
    expect_status(api.post(path, {"metadata": {"name": "e3"}}), 422, "Invalid",
                  message=f'Event "e3" is invalid: involvedObject.namespace: {mismatch}',
                  causes=[{"reason": "FieldValueInvalid", "message": mismatch,
                           "field": "involvedObject.namespace"}])
    assert api.get(f"{path}/e3")[0] == 404
    code, made = api.post("/api/v1/namespaces/default/events", {
        "metadata": {"generateName": "e4-"}, "reason": "Tested"})
    assert code == 201, "in the default namespace the involved object may be left out"
    api.delete(f"/api/v1/namespaces/default/events/{made['metadata']['name']}")


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
