"""The built-in resources' own rules: namespaces, secrets, services, endpoints, events,
endpointslices, leases and webhook configurations."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.api import API, CM, configmap
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(gateway) -> API:
    return API(gateway)


@pytest.fixture
def ns(api) -> str:
    return api.namespace()


def test_namespace_lifecycle(api):
    code, status = api.post(CM.format(ns="no-such-namespace"), configmap("x"))
    assert code == 404 and status["message"] == 'namespaces "no-such-namespace" not found'
    ns = api.namespace()
    api.post(CM.format(ns=ns), {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    code, terminating = api.delete(f"/api/v1/namespaces/{ns}")
    assert code == 200 and terminating["status"]["phase"] == "Terminating"
    assert terminating["metadata"]["deletionTimestamp"]
    code, status = api.post(CM.format(ns=ns), configmap("late"))
    assert code == 403 and status["reason"] == "Forbidden"
    assert "because it is being terminated" in status["message"]
    # the namespace waits for the object's finalizer, then goes
    time.sleep(0.5)
    assert api.get(f"/api/v1/namespaces/{ns}")[0] == 200
    api.patch(f"{CM.format(ns=ns)}/held", {"metadata": {"finalizers": None}},
              "application/merge-patch+json")
    deadline = time.monotonic() + 20
    while api.get(f"/api/v1/namespaces/{ns}")[0] != 404:
        assert time.monotonic() < deadline, "the namespace was not removed"
        time.sleep(0.2)
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
    code, status = api.post(path, {"metadata": {"name": "bad"}, "data": {"x": "not base64!"}})
    assert code == 400 and "base64" in status["message"]
    code, status = api.post(path, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                   "data": {"tls.crt": "eA=="}})
    assert code == 422 and status["details"]["causes"][0]["field"] == "data[tls.key]"
    made["type"] = "kubernetes.io/basic-auth"
    code, status = api.put(f"{path}/s", made)
    assert code == 422 and "immutable" in status["message"]
    api.post(path, {"metadata": {"name": "frozen"}, "immutable": True, "data": {"a": "eA=="}})
    _, frozen = api.get(f"{path}/frozen")
    frozen["data"] = {"a": "eQ=="}
    assert api.put(f"{path}/frozen", frozen)[0] == 422


def test_configmap_rules(api, ns):
    code, status = api.post(CM.format(ns=ns), {"metadata": {"name": "keys"},
                                               "data": {"bad key!": "x"}})
    assert code == 422 and status["details"]["causes"][0]["field"] == "data[bad key!]"
    code, status = api.post(CM.format(ns=ns), {"metadata": {"name": "huge"},
                                               "data": {"a": "x" * (1024 * 1024 + 1)}})
    assert code == 422


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
    code, status = api.post(path, {"metadata": {"name": "noname"}, "spec": {
        "type": "ExternalName"}})
    assert code == 422 and status["details"]["causes"][0]["field"] == "spec.externalName"
    code, status = api.post(path, {"metadata": {"name": "badport"}, "spec": {
        "ports": [{"port": 70000}]}})
    assert code == 422 and status["details"]["causes"][0]["field"] == "spec.ports[0].port"
    code, _ = api.put(f"{path}/put-created", {"metadata": {"name": "put-created"},
                                                    "spec": {"ports": [{"port": 53}]}})
    assert code == 201, "services may be created by PUT"


def test_endpoints_and_endpointslices(api, ns):
    code, status = api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 8080}]}]})
    assert code == 201
    code, status = api.post(f"/api/v1/namespaces/{ns}/endpoints", {
        "metadata": {"name": "bad"}, "subsets": [{"addresses": [{"ip": "nope"}]}]})
    assert code == 422
    slices = f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
    code, made = api.post(slices, {"metadata": {"name": "web-1"}, "addressType": "IPv4",
                                   "endpoints": [{"addresses": ["10.0.0.1"]}],
                                   "ports": [{"port": 8080}]})
    assert code == 201 and made["kind"] == "EndpointSlice"
    code, status = api.post(slices, {"metadata": {"name": "web-2"}, "endpoints": []})
    assert code == 422 and status["details"]["causes"][0]["field"] == "addressType"


def test_leases(api, ns):
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    code, made = api.post(path, {"metadata": {"name": "leader"}, "spec": {
        "holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": now}})
    assert code == 201 and made["spec"]["renewTime"] == now
    made["spec"]["holderIdentity"] = "b"
    code, updated = api.put(f"{path}/leader", made)
    assert code == 200 and updated["spec"]["holderIdentity"] == "b"
    code, _ = api.post(path, {"metadata": {"name": "bad"}, "spec": {
        "leaseDurationSeconds": 0}})
    assert code == 422
    code, status = api.post(path, {"metadata": {"name": "bad"}, "spec": {
        "renewTime": "not-a-time"}})
    assert code == 400 and status["reason"] == "BadRequest"
    assert status["message"].startswith('Lease in version "v1" cannot be handled as a Lease: '
                                        'parsing time "not-a-time"')
    code, made = api.post(path, {"metadata": {"name": "offset"}, "spec": {
        "renewTime": "2024-05-06T09:08:09.123456+02:00"}})
    assert code == 201 and made["spec"]["renewTime"] == "2024-05-06T07:08:09.123456Z"
    assert api.get(f"{path}/bad")[0] == 404, "nothing stored"


def test_webhook_configurations_are_validated(api):
    path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    hook = {"name": "short", "clientConfig": {"url": "http://x"}, "admissionReviewVersions": []}
    code, status = api.post(path, {"metadata": {"name": "bad-hooks"}, "webhooks": [hook]})
    assert code == 422
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {"webhooks[0].name", "webhooks[0].admissionReviewVersions",
            "webhooks[0].sideEffects", "webhooks[0].clientConfig.url"} <= fields
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
    code, _ = api.post(path, {"metadata": {"name": "e3"}})
    assert code == 422, "an event is about something"


def test_events_expire_after_the_ttl(workdir):
    with GatewayProcess(workdir, "--event-ttl=2s") as proc:
        api = API(proc)
        ns = api.namespace()
        old = (datetime.now(UTC) - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
        path = f"/api/v1/namespaces/{ns}/events"
        api.post(path, {"metadata": {"name": "old"}, "lastTimestamp": old,
                        "involvedObject": {"kind": "Pod", "name": "p"}})
        deadline = time.monotonic() + 15
        while api.get(f"{path}/old")[0] != 404:
            assert time.monotonic() < deadline, "the event outlived --event-ttl"
            time.sleep(0.2)
        fresh = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        api.post(path, {"metadata": {"name": "fresh"}, "lastTimestamp": fresh,
                        "involvedObject": {"kind": "Pod", "name": "p"}})
        assert api.get(f"{path}/fresh")[0] == 200
