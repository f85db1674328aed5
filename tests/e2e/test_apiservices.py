"""apiregistration.k8s.io/v1 APIServices and the aggregator's routing, as kube-aggregator v1.32
serves them: the local APIServices registered at start, validation in kube's words, the steps
of Kubernetes' aggregator conformance test, discovery of remote groups, and kube's plain-text
503 for a remote group version that is not available."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
import yaml

from tests.support.api import API, expect_status
from tests.support.gateway import GatewayProcess, send
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

GROUP = "apiregistration.k8s.io"
APISERVICES = f"/apis/{GROUP}/v1/apiservices"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
#: The local group versions the gateway serves, with kube-apiserver's priorities.
LOCAL = {
    "v1.": ("", 18000, 1),
    "v1.admissionregistration.k8s.io": ("admissionregistration.k8s.io", 16700, 15),
    "v1.authentication.k8s.io": ("authentication.k8s.io", 17700, 15),
    "v1.authorization.k8s.io": ("authorization.k8s.io", 17600, 15),
    "v1.coordination.k8s.io": ("coordination.k8s.io", 16500, 15),
    "v1.discovery.k8s.io": ("discovery.k8s.io", 16200, 15),
    "v1.rbac.authorization.k8s.io": ("rbac.authorization.k8s.io", 17000, 15),
}
UNAVAILABLE_HEADERS = {"Content-Type": "text/plain; charset=utf-8",
                       "X-Content-Type-Options": "nosniff"}


def apiservice(group: str, version: str, *, service: dict | None = None,
               labels: dict | None = None, group_priority: int = 1000,
               version_priority: int = 15, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{version}.{group}"}
    if labels:
        meta["labels"] = labels
    body = {"group": group, "version": version, "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority, **spec}
    if service is not None:
        body["service"] = service
    return {"apiVersion": f"{GROUP}/v1", "kind": "APIService", "metadata": meta, "spec": body}


def nowhere(namespace: str = "default") -> dict[str, Any]:
    """A Service reference to nothing."""
    return {"namespace": namespace, "name": f"missing-{uuid.uuid4().hex[:6]}"}


def unique_group() -> str:
    return f"g{uuid.uuid4().hex[:8]}.example.com"


def raw(gateway: GatewayProcess, method: str, path: str) -> tuple[int, bytes, dict[str, str]]:
    return send(gateway.url + path, method, gateway.ssl_context())


def group_names(api: API) -> list[str]:
    code, groups = api.get("/apis")
    assert code == 200 and groups["kind"] == "APIGroupList", groups
    return [g["name"] for g in groups["groups"]]


def update_with_retry(api: API, path: str, change) -> dict[str, Any]:
    """GET, change, PUT with the resourceVersion read; again on a conflict (kube's
    RetryOnConflict: a controller may write the status in between)."""

    def attempt() -> dict[str, Any] | None:
        code, current = api.get(path)
        assert code == 200, current
        change(current)
        code, updated = api.put(path, current)
        if code == 409:
            return None
        assert code == 200, updated
        return updated

    return eventually(attempt, what=f"an update of {path} without a conflict")


# -- the local APIServices ---------------------------------------------------------------------


def test_every_local_group_version_has_an_available_local_apiservice(gateway, api):
    out = gateway.kubectl("get", "apiservices").stdout.splitlines()
    assert out[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    rows = {line.split()[0]: line.split()[1:3] for line in out[1:]}
    for name in LOCAL:
        assert rows[name] == ["Local", "True"], (name, out)
    # apiregistration.k8s.io has no priority in kube's table: it gets no APIService
    assert "v1.apiregistration.k8s.io" not in rows
    for name, (group, group_priority, version_priority) in LOCAL.items():
        code, obj = api.get(f"{APISERVICES}/{name}")
        assert code == 200, obj
        assert obj["metadata"]["labels"] == {AUTOMANAGED: "onstart"}
        assert obj["spec"] == {"group": group, "version": "v1",
                               "groupPriorityMinimum": group_priority,
                               "versionPriority": version_priority}
        [condition] = obj["status"]["conditions"]
        assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
            "type": "Available", "status": "True", "reason": "Local",
            "message": "Local APIServices are always available"}


def test_autoregister_completion_is_a_health_check(gateway):
    for endpoint in ("healthz", "livez", "readyz"):
        assert gateway.request("GET", f"/{endpoint}/autoregister-completion") == (200, b"ok")
    code, listing = gateway.request("GET", "/readyz?verbose")
    assert code == 200
    lines = listing.decode().splitlines()
    for check in ("poststarthook/apiservice-registration-controller",
                  "poststarthook/kube-apiserver-autoregistration", "autoregister-completion"):
        assert f"[+]{check} ok" in lines, listing


def test_a_deleted_local_apiservice_stays_deleted_until_the_next_start(gateway, api):
    """kube's autoregister controller syncs an ``onstart`` APIService only until its first
    successful sync: deleted afterwards, it is not created again (the next start does). A
    continuously managed one (a CRD's, automanaged "true") is: the controller handles
    deletions in turn, so once the CRD's has come back, the local one's deletion has been
    seen too."""
    name = "v1.coordination.k8s.io"
    assert api.get(f"{APISERVICES}/{name}")[0] == 200
    group = unique_group()
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"things.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    continuous = f"{APISERVICES}/v1.{group}"
    first = eventually(lambda: api.get(continuous)[1] if api.get(continuous)[0] == 200 else None,
                       what="the CRD's APIService")
    assert first["metadata"]["labels"] == {AUTOMANAGED: "true"}
    try:
        assert api.delete(f"{APISERVICES}/{name}")[0] == 200
        assert api.delete(continuous)[0] == 200

        def recreated() -> bool:
            code, now = api.get(continuous)
            return code == 200 and now["metadata"]["uid"] != first["metadata"]["uid"]

        eventually(recreated, what="the CRD's APIService created again")
        assert api.get(f"{APISERVICES}/{name}")[0] == 404
        # the group version is still served (the aggregator hands it to the kube server)
        code, leases = api.get("/apis/coordination.k8s.io/v1/leases")
        assert code == 200 and leases["kind"] == "LeaseList", leases
    finally:
        local = apiservice("coordination.k8s.io", "v1", labels={AUTOMANAGED: "onstart"},
                           group_priority=16500)
        if api.get(f"{APISERVICES}/{name}")[0] == 404:
            assert api.post(APISERVICES, local)[0] == 201
        api.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.{group}")


def test_the_resource_in_discovery_and_openapi(gateway, api):
    code, resources = api.get(f"/apis/{GROUP}/v1")
    assert code == 200
    by_name = {r["name"]: r for r in resources["resources"]}
    entry = by_name["apiservices"]
    assert (entry["kind"], entry["namespaced"], entry["categories"]) == (
        "APIService", False, ["api-extensions"])
    assert "shortNames" not in entry
    assert by_name["apiservices/status"]["verbs"] == ["get", "patch", "update"]
    explained = gateway.kubectl("explain", "apiservices.spec.service").stdout
    assert "KIND:       APIService" in explained and "port" in explained
    assert "apiservices" in gateway.kubectl("api-resources", "--categories=api-extensions",
                                            "-o", "name").stdout


# -- validation --------------------------------------------------------------------------------

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
             "characters, '-' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. "
           "'my-name',  or 'abc-123', regex used for validation is "
           "'[a-z]([-a-z0-9]*[a-z0-9])?')")


def renamed(obj: dict, name: str) -> dict:
    obj["metadata"]["name"] = name
    return obj


@pytest.mark.parametrize("body, causes", [
    (renamed(apiservice("foo.io", "v1"), "foo"),
     [("metadata.name", "FieldValueInvalid",
       'Invalid value: "foo": must be `spec.version+"."+spec.group`: "v1.foo.io"')]),
    (renamed(apiservice("", "v1"), "v1"),
     [("metadata.name", "FieldValueInvalid",
       'Invalid value: "v1": must be `spec.version+"."+spec.group`: "v1."')]),
    (apiservice("", "v2"),
     [("spec.group", "FieldValueRequired",
       "Required value: only v1 may have an empty group and it better be legacy kube")]),
    (apiservice("Bad_Group", "v1"),
     [("spec.group", "FieldValueInvalid", f'Invalid value: "Bad_Group": {SUBDOMAIN}')]),
    (apiservice("foo.io", "V1"),
     [("spec.version", "FieldValueInvalid", f'Invalid value: "V1": {DNS1035}')]),
    (apiservice("foo.io", "v1", group_priority=0, version_priority=1001),
     [("spec.groupPriorityMinimum", "FieldValueInvalid",
       "Invalid value: 0: must be positive and less than 20000"),
      ("spec.versionPriority", "FieldValueInvalid",
       "Invalid value: 1001: must be positive and less than 1000")]),
    (apiservice("foo.io", "v1", group_priority=20001, version_priority=0),
     [("spec.groupPriorityMinimum", "FieldValueInvalid",
       "Invalid value: 20001: must be positive and less than 20000"),
      ("spec.versionPriority", "FieldValueInvalid",
       "Invalid value: 0: must be positive and less than 1000")]),
    (apiservice("foo.io", "v1", caBundle="aGVsbG8=", insecureSkipTLSVerify=True),
     [("spec.caBundle", "FieldValueInvalid",
       'Invalid value: "5 bytes": local APIServices may not have a caBundle'),
      ("spec.insecureSkipTLSVerify", "FieldValueInvalid",
       "Invalid value: true: local APIServices may not have insecureSkipTLSVerify")]),
    (apiservice("foo.io", "v1", service={"port": 0}, caBundle="aGVsbG8=",
                insecureSkipTLSVerify=True),
     [("spec.service.namespace", "FieldValueRequired", "Required value"),
      ("spec.service.name", "FieldValueRequired", "Required value"),
      ("spec.service.port", "FieldValueInvalid",
       "Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"),
      ("spec.insecureSkipTLSVerify", "FieldValueInvalid",
       "Invalid value: true: may not be true if caBundle is present")]),
    (apiservice("foo.io", "v1", service={"namespace": "a", "name": "b", "port": 65536}),
     [("spec.service.port", "FieldValueInvalid",
       "Invalid value: 65536: port is not valid: must be between 1 and 65535, inclusive")]),
])
def test_invalid_apiservices_are_refused_in_kubes_words(api, body, causes):
    name = body["metadata"]["name"]
    errors = [f"{field}: {message}" for field, _, message in causes]
    summary = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
    expect_status(api.post(APISERVICES, body), 422, "Invalid",
                  message=f'APIService.{GROUP} "{name}" is invalid: {summary}',
                  causes=[{"reason": r, "message": m, "field": f} for f, r, m in causes])


def test_a_service_without_a_port_is_reached_on_443(api):
    group = unique_group()
    body = apiservice(group, "v1", service=nowhere(), caBundle="aGVsbG8=")
    code, created = api.post(APISERVICES, body)
    assert code == 201, created
    assert created["spec"]["service"]["port"] == 443
    assert created["spec"]["caBundle"] == "aGVsbG8="
    assert created["status"] == {}  # a remote APIService starts with no condition
    api.delete(f"{APISERVICES}/v1.{group}")


# -- the steps of the aggregator conformance test ----------------------------------------------


def test_conformance_steps(gateway, api):
    group = unique_group()
    name = f"v1alpha1.{group}"
    path = f"{APISERVICES}/{name}"
    label = {"e2e-apiservice": group}
    selector = f"e2e-apiservice={group}"
    body = apiservice(group, "v1alpha1", service=nowhere(), labels=label,
                      insecureSkipTLSVerify=True, group_priority=2000, version_priority=200)
    code, created = api.post(APISERVICES, body)
    assert code == 201, created
    code, listed = api.get(f"{APISERVICES}?labelSelector={selector}")
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]

    # a label, by merge patch
    code, patched = api.patch(path, {"metadata": {"labels": {"patched": "true"}}},
                              "application/merge-patch+json")
    assert code == 200 and patched["metadata"]["labels"] == {**label, "patched": "true"}

    # a condition added by a status update; spec changes in the same write are ignored
    def add_condition(obj: dict) -> None:
        obj.setdefault("status", {}).setdefault("conditions", []).append({
            "type": "StatusUpdated", "status": "True", "reason": "E2E",
            "message": "Set from an e2e test"})
        obj["spec"]["versionPriority"] = 999

    updated = update_with_retry(api, f"{path}/status", add_condition)
    assert updated["spec"]["versionPriority"] == 200
    assert "StatusUpdated" in {c["type"] for c in updated["status"]["conditions"]}

    # another one by a status patch: the conditions merge by type
    code, patched = api.patch(f"{path}/status", {"status": {"conditions": [{
        "type": "StatusPatched", "status": "True", "reason": "E2E",
        "message": "Set by an e2e test"}]}}, "application/strategic-merge-patch+json")
    assert code == 200, patched
    types = [c["type"] for c in patched["status"]["conditions"]]
    assert {"StatusUpdated", "StatusPatched"} <= set(types), types
    # an update of the object itself keeps the status it has
    replaced = update_with_retry(api, path, lambda obj: (
        obj["metadata"]["labels"].update({"replaced": "yes"}),
        obj["status"].update({"conditions": []})))
    assert replaced["metadata"]["labels"]["replaced"] == "yes"
    assert {"StatusUpdated", "StatusPatched"} <= {c["type"] for c in
                                                  replaced["status"]["conditions"]}

    # the version priority, by merge patch
    code, patched = api.patch(path, {"spec": {"versionPriority": 400}},
                              "application/merge-patch+json")
    assert code == 200 and patched["spec"]["versionPriority"] == 400, patched

    # a condition status must be True, False or Unknown
    code, current = api.get(path)
    current["status"]["conditions"][0]["status"] = "Maybe"
    expect_status(api.put(f"{path}/status", current), 422, "Invalid",
                  message=f'APIService.{GROUP} "{name}" is invalid: '
                          'status.conditions[0].status: Unsupported value: "Maybe": '
                          'supported values: "True", "False", "Unknown"')
    # an update must name the version it replaces
    del current["metadata"]["resourceVersion"]
    expect_status(api.put(path, current), 422, "Invalid",
                  message=f'apiservices.{GROUP} "{name}" is invalid: metadata.'
                          "resourceVersion: Invalid value: 0x0: must be specified for an "
                          "update")
    # ... and never creates
    missing = apiservice(unique_group(), "v1", service=nowhere())
    expect_status(api.put(f"{APISERVICES}/{missing['metadata']['name']}", missing), 404,
                  "NotFound")

    # gone by label selector
    code, _ = api.delete(f"{APISERVICES}?labelSelector={selector}")
    assert code == 200
    code, listed = api.get(f"{APISERVICES}?labelSelector={selector}")
    assert code == 200 and listed["items"] == []


# -- kubectl -----------------------------------------------------------------------------------


def test_kubectl_apply_describe_patch_delete(gateway, tmp_path):
    group = unique_group()
    name = f"v1beta1.{group}"
    body = apiservice(group, "v1beta1", service={"namespace": "kube-system", "name": "api"},
                      insecureSkipTLSVerify=True, group_priority=100, version_priority=10)
    manifest = tmp_path / "apiservice.yaml"
    manifest.write_text(yaml.safe_dump(body))
    out = gateway.kubectl("apply", "-f", str(manifest)).stdout
    assert out == f"apiservice.{GROUP}/{name} created\n"
    try:
        body["spec"]["versionPriority"] = 11
        manifest.write_text(yaml.safe_dump(body))
        out = gateway.kubectl("apply", "-f", str(manifest)).stdout
        assert out == f"apiservice.{GROUP}/{name} configured\n"

        # kube-system/api does not exist: the remote availability controller says so
        def not_found() -> list[str]:
            row = gateway.kubectl("get", "apiservice", name, "--no-headers").stdout.split()
            assert row[:4] == [name, "kube-system/api", "False", "(ServiceNotFound)"], row
            return row

        eventually(not_found, what="AVAILABLE False (ServiceNotFound)")
        gateway.kubectl("patch", "apiservice", name, "--type=merge", "-p",
                        '{"spec":{"groupPriorityMinimum":150}}')
        gateway.kubectl("label", "apiservice", name, "tier=test")
        got = json.loads(gateway.kubectl("get", "apiservice", name, "-o", "json").stdout)
        assert (got["spec"]["versionPriority"], got["spec"]["groupPriorityMinimum"]) == (
            11, 150)
        assert got["metadata"]["labels"] == {"tier": "test"}
        [condition] = got["status"]["conditions"]
        assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
            "type": "Available", "status": "False", "reason": "ServiceNotFound",
            "message": 'service/api in "kube-system" is not present'}, condition
        described = gateway.kubectl("describe", "apiservice", name).stdout
        assert re.search(r"Insecure Skip TLS Verify:\s+true\n", described), described
        assert re.search(r"Service:\n\s+Name:\s+api\n\s+Namespace:\s+kube-system\n"
                         r"\s+Port:\s+443\n", described), described
        assert re.search(r"Reason:\s+ServiceNotFound\n", described), described
    finally:
        out = gateway.kubectl("delete", "apiservice", name).stdout
    assert out == f'apiservice.{GROUP} "{name}" deleted\n'


# -- remote APIServices: discovery and routing -------------------------------------------------


def test_a_remote_group_is_discovered_in_kubes_order_and_answered_503(gateway, api):
    group, other = unique_group(), unique_group()
    made = [
        # group: three versions, one of them placing the group high
        apiservice(group, "v1beta1", service=nowhere(), group_priority=100,
                   version_priority=10),
        apiservice(group, "v1", service=nowhere(), group_priority=100, version_priority=10),
        apiservice(group, "v2alpha1", service=nowhere(), group_priority=17100,
                   version_priority=20),
        # other: between rbac (17000) and coordination (16500)
        apiservice(other, "v1", service=nowhere(), group_priority=16800),
    ]
    for body in made:
        code, created = api.post(APISERVICES, body)
        assert code == 201, created
    try:
        _remote_group_checks(gateway, api, group, other, made)
    finally:
        for body in made:
            api.delete(f"{APISERVICES}/{body['metadata']['name']}")

    def forgotten() -> bool:
        names = group_names(api)
        assert group not in names and other not in names, names
        return True

    eventually(forgotten, what="the remote groups leaving /apis")
    # no APIService, no route: the path is nobody's
    expect_status(api.get(f"/apis/{group}/v1/flunders"), 404, "NotFound",
                  message="the server could not find the requested resource")
    assert api.get(f"/apis/{group}")[0] == 404


def _remote_group_checks(gateway: GatewayProcess, api: API, group: str, other: str,
                         made: list[dict[str, Any]]) -> None:
    def listed() -> list[str]:
        names = group_names(api)
        assert group in names and other in names, names
        return names

    names = eventually(listed, what="the remote groups in /apis")
    # among the groups this test knows (the gateway may serve more built-in groups; they
    # take their places by their own priorities)
    expected = [
        "apiregistration.k8s.io", "authentication.k8s.io", "authorization.k8s.io", group,
        "rbac.authorization.k8s.io", other, "admissionregistration.k8s.io",
        "coordination.k8s.io", "discovery.k8s.io"]
    assert names[0] == "apiregistration.k8s.io", names
    assert [n for n in names if n in expected] == expected, names
    code, doc = api.get(f"/apis/{group}")
    assert code == 200
    versions = [{"groupVersion": f"{group}/{v}", "version": v}
                for v in ("v2alpha1", "v1", "v1beta1")]
    assert doc == {"kind": "APIGroup", "apiVersion": "v1", "name": group,
                   "versions": versions, "preferredVersion": versions[0]}
    groups = json.loads(gateway.kubectl("get", "--raw", "/apis").stdout)["groups"]
    assert {"name": group, "versions": versions,
            "preferredVersion": versions[0]} in groups

    # nothing serves them: kube's plain-text 503, for every path under the group version
    for path in (f"/apis/{group}/v1", f"/apis/{group}/v1/", f"/apis/{group}/v1beta1/flunders",
                 f"/apis/{other}/v1/namespaces/default/things/x?watch=true"):
        for method in ("GET", "POST", "DELETE"):
            code, body, headers = raw(gateway, method, path)
            assert (code, body) == (503, b"service unavailable\n"), (method, path)
            assert {k: headers[k] for k in UNAVAILABLE_HEADERS} == UNAVAILABLE_HEADERS
    # client-go leaves a group version whose discovery failed (Stale) out of api-versions;
    # until a backend answers, the gateway's aggregated discovery has nothing for it
    assert f"{group}/v1" not in gateway.kubectl("api-versions").stdout.split()

    # and the remote availability controller says why: the Services are not there
    names = [body["metadata"]["name"] for body in made]

    def service_not_found() -> bool:
        out = gateway.kubectl("get", "apiservices", *names, "--no-headers").stdout
        rows = {line.split()[0]: line.split()[1:4] for line in out.splitlines()}
        for body in made:
            service = body["spec"]["service"]
            assert rows[body["metadata"]["name"]] == [
                f"default/{service['name']}", "False", "(ServiceNotFound)"], out
        return True

    eventually(service_not_found, what="AVAILABLE False (ServiceNotFound)")
    for body in made:
        code, obj = api.get(f"{APISERVICES}/{body['metadata']['name']}")
        [condition] = obj["status"]["conditions"]
        assert condition["message"] == (
            f'service/{body["spec"]["service"]["name"]} in "default" is not present'), condition


def test_a_local_group_version_taken_over_by_a_remote_apiservice(gateway, api):
    """An APIService names who serves its group version; changing it to a Service moves the
    group version there, and back."""
    name = "v1.discovery.k8s.io"
    path = f"{APISERVICES}/{name}"
    slices = "/apis/discovery.k8s.io/v1/endpointslices"
    code, _ = api.patch(path, {"spec": {"service": nowhere(), "insecureSkipTLSVerify": True}},
                        "application/merge-patch+json")
    assert code == 200

    def unavailable() -> bool:
        code, body, _ = raw(gateway, "GET", slices)
        assert (code, body) == (503, b"service unavailable\n")
        return True

    try:
        eventually(unavailable, what="the group version proxied")
    finally:
        code, _ = api.patch(path, {"spec": {"service": None, "insecureSkipTLSVerify": None}},
                            "application/merge-patch+json")
        assert code == 200
    eventually(lambda: api.get(slices)[0] == 200, what="the group version local again")


# -- at start: corrected, deleted, and left alone ----------------------------------------------


def test_autoregistration_at_start(workdir):
    gw = GatewayProcess(workdir).start()
    api = API(gw)
    try:
        # automanaged: its spec is put back at start
        code, _ = api.patch(f"{APISERVICES}/v1.coordination.k8s.io",
                            {"spec": {"versionPriority": 99}}, "application/merge-patch+json")
        assert code == 200
        # an onstart APIService nobody serves is deleted at start
        stale = apiservice("gone.example.com", "v1", labels={AUTOMANAGED: "onstart"})
        assert api.post(APISERVICES, stale)[0] == 201
        # not automanaged: left alone, even when it takes a local group version away
        missing = nowhere()

        def take_over(obj: dict) -> None:
            obj["metadata"]["labels"] = {}
            obj["spec"]["service"] = missing
            obj["spec"]["insecureSkipTLSVerify"] = True

        updated = update_with_retry(api, f"{APISERVICES}/v1.discovery.k8s.io", take_over)
        # an update of the object keeps its status: still Local ...
        assert updated["status"]["conditions"][0]["reason"] == "Local"

        # ... until the remote availability controller writes what it found
        def service_not_found() -> bool:
            code, obj = api.get(f"{APISERVICES}/v1.discovery.k8s.io")
            assert code == 200, obj
            [condition] = obj["status"]["conditions"]
            assert (condition["status"], condition["reason"], condition["message"]) == (
                "False", "ServiceNotFound",
                f'service/{missing["name"]} in "default" is not present'), condition
            return True

        eventually(service_not_found, what="v1.discovery.k8s.io False (ServiceNotFound)")
    finally:
        gw.stop()

    gw = GatewayProcess(workdir).start(wait="/readyz/poststarthook/kube-apiserver-autoregistration")
    api = API(gw)
    try:
        code, coordination = api.get(f"{APISERVICES}/v1.coordination.k8s.io")
        assert coordination["spec"]["versionPriority"] == 15
        assert api.get(f"{APISERVICES}/v1.gone.example.com")[0] == 404
        code, discovery = api.get(f"{APISERVICES}/v1.discovery.k8s.io")
        assert discovery["spec"]["service"] == {**missing, "port": 443}
        row = gw.kubectl("get", "apiservice", "v1.discovery.k8s.io", "--no-headers").stdout
        assert row.split()[1:4] == [f"default/{missing['name']}", "False", "(ServiceNotFound)"]
        # it was never seen available: the gateway is not ready, and says why
        assert gw.request("GET", "/readyz/autoregister-completion") == (
            500, b"internal server error: missing APIService: [v1.discovery.k8s.io]\n")
        code, listing = gw.request("GET", "/readyz?verbose")
        assert code == 500
        assert b"[-]autoregister-completion failed: reason withheld\n" in listing
        assert gw.request("GET", "/healthz")[0] == 500
        code, body, _ = raw(gw, "GET", "/apis/discovery.k8s.io/v1/endpointslices")
        assert (code, body) == (503, b"service unavailable\n")
        # deleted, it stays deleted until the next start (kube syncs onstart APIServices
        # until their first sync only), which brings it back local: the gateway turns ready
        assert api.delete(f"{APISERVICES}/v1.discovery.k8s.io")[0] == 200
    finally:
        gw.stop()

    gw = GatewayProcess(workdir).start()
    api = API(gw)
    try:
        code, discovery = api.get(f"{APISERVICES}/v1.discovery.k8s.io")
        assert discovery["metadata"]["labels"] == {AUTOMANAGED: "onstart"}
        assert "service" not in discovery["spec"]
        assert api.get("/apis/discovery.k8s.io/v1/endpointslices")[0] == 200
    finally:
        gw.stop()


def test_the_aggregators_own_group_is_never_proxied(gateway, api):
    """kube serves apiregistration.k8s.io before any APIService route: an APIService cannot
    take the APIService API away."""
    body = apiservice(GROUP, "v1", service=nowhere(), group_priority=100)
    code, created = api.post(APISERVICES, body)
    assert code == 201, created
    try:
        code, listed = api.get(APISERVICES)
        assert code == 200 and listed["kind"] == "APIServiceList", listed
        assert api.get(f"/apis/{GROUP}/v1")[0] == 200
        assert group_names(api).count(GROUP) == 1
    finally:
        assert api.delete(f"{APISERVICES}/v1.{GROUP}")[0] == 200


def test_a_local_apiservice_is_always_available(gateway, api):
    """kube's local availability controller puts the Local condition back."""
    path = f"{APISERVICES}/v1.rbac.authorization.k8s.io"

    def mark_unavailable(obj: dict) -> None:
        obj["status"]["conditions"] = [{"type": "Available", "status": "False",
                                        "reason": "Test", "message": "says who"}]

    update_with_retry(api, f"{path}/status", mark_unavailable)

    def available_again() -> bool:
        code, obj = api.get(path)
        assert code == 200, obj
        [condition] = obj["status"]["conditions"]
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "True", "Local", "Local APIServices are always available"), condition
        return True

    eventually(available_again, what="the Local condition back")
    row = gateway.kubectl("get", "apiservice", "v1.rbac.authorization.k8s.io",
                          "--no-headers").stdout.split()
    assert row[1:3] == ["Local", "True"]
