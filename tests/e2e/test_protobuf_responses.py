"""Protobuf answers over HTTPS, as client-go based controllers ask for them (Accept:
``application/vnd.kubernetes.protobuf, application/json``), read with kube's own .proto
definitions compiled by protoc (tests/support/kubeproto), not with the gateway's tables:
objects, lists, writes, Status errors (from the handlers and from the filters), watches in
kube's length-prefixed framing, and custom resources, which have no protobuf form."""

from __future__ import annotations

import json
import ssl
import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.support import kubeproto
from tests.support.api import API, CM, configmap
from tests.support.gateway import GatewayProcess, send
from tests.support.kubeproto import CORE, META

pytestmark = pytest.mark.slow

PB = "application/vnd.kubernetes.protobuf"
CLIENT_GO = f"{PB}, application/json"
METADATA = (f"{PB};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
METADATA_LIST = METADATA.replace("PartialObjectMetadata;", "PartialObjectMetadataList;")


def call(gateway: GatewayProcess, method: str, path: str, body: Any = None, *,
         accept: str = CLIENT_GO, context: ssl.SSLContext | None = None,
         **headers: str) -> tuple[int, bytes, dict[str, str]]:
    return send(gateway.url + path, method, context or gateway.ssl_context(), body,
                {"Accept": accept, **headers})


def seconds(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp).timestamp())


def expect_status(answer: tuple[int, bytes, dict[str, str]], code: int, reason: str) -> Any:
    """A metav1.Status in protobuf, with kube's code and reason; returns it decoded."""
    got, raw, headers = answer
    assert (got, headers["Content-Type"]) == (code, PB), (got, headers, raw[:300])
    status = kubeproto.decode(raw, META + "Status", "v1", "Status")
    assert (status.status, status.code, status.reason) == ("Failure", code, reason), status
    return status


def test_get_a_configmap_and_a_namespace(api: API, gateway: GatewayProcess, ns: str) -> None:
    code, made = api.post(CM.format(ns=ns), configmap("one", labels={"app": "x"}, a="1", b="2"))
    assert code == 201, made
    code, raw, headers = call(gateway, "GET", f"{CM.format(ns=ns)}/one")
    assert (code, headers["Content-Type"]) == (200, PB)
    cm = kubeproto.decode(raw, CORE + "ConfigMap", "v1", "ConfigMap")
    meta = made["metadata"]
    assert (cm.metadata.name, cm.metadata.namespace) == ("one", ns)
    assert (cm.metadata.uid, cm.metadata.resourceVersion) == (meta["uid"],
                                                              meta["resourceVersion"])
    assert cm.metadata.creationTimestamp.seconds == seconds(meta["creationTimestamp"])
    assert dict(cm.metadata.labels) == {"app": "x"} and dict(cm.data) == {"a": "1", "b": "2"}
    assert [m.manager for m in cm.metadata.managedFields] == \
        [m["manager"] for m in meta["managedFields"]]

    code, raw, _ = call(gateway, "GET", f"/api/v1/namespaces/{ns}")
    namespace = kubeproto.decode(raw, CORE + "Namespace", "v1", "Namespace")
    assert namespace.metadata.name == ns and namespace.status.phase == "Active"
    assert list(namespace.spec.finalizers) == ["kubernetes"]
    assert namespace.metadata.labels["kubernetes.io/metadata.name"] == ns


def test_list_configmaps(api: API, gateway: GatewayProcess, ns: str) -> None:
    for name in ("a", "b", "c"):
        assert api.post(CM.format(ns=ns), configmap(name, k=name))[0] == 201
    code, raw, _ = call(gateway, "GET", CM.format(ns=ns))
    assert code == 200
    listed = kubeproto.decode(raw, CORE + "ConfigMapList", "v1", "ConfigMapList")
    assert {i.metadata.name: dict(i.data) for i in listed.items
            if i.metadata.name != "kube-root-ca.crt"} == {n: {"k": n} for n in "abc"}
    assert int(listed.metadata.resourceVersion) > 0
    assert not listed.metadata.HasField("remainingItemCount")  # a pointer, unset here
    code, raw, _ = call(gateway, "GET", f"{CM.format(ns=ns)}?limit=1")
    page = kubeproto.decode(raw, CORE + "ConfigMapList", "v1", "ConfigMapList")
    assert len(page.items) == 1 and getattr(page.metadata, "continue")
    assert page.metadata.remainingItemCount >= 2
    # as client-go's metadata client lists: PartialObjectMetadataList, in protobuf
    code, raw, headers = call(gateway, "GET", CM.format(ns=ns), accept=METADATA_LIST)
    assert (code, headers["Content-Type"]) == (200, PB)
    partial = kubeproto.decode(raw, META + "PartialObjectMetadataList", "meta.k8s.io/v1",
                               "PartialObjectMetadataList")
    assert {"a", "b", "c"} <= {i.metadata.name for i in partial.items}


def test_writes_answer_in_protobuf(gateway: GatewayProcess, ns: str) -> None:
    """A JSON body with a protobuf Accept: create, update, patch and delete answer in
    protobuf; a delete that removed the object answers with a Status of Success."""
    code, raw, headers = call(gateway, "POST", CM.format(ns=ns), configmap("w", a="1"))
    assert (code, headers["Content-Type"]) == (201, PB)
    created = kubeproto.decode(raw, CORE + "ConfigMap", "v1", "ConfigMap")
    assert created.metadata.name == "w" and created.metadata.uid
    path = f"{CM.format(ns=ns)}/w"
    replaced = {**configmap("w", a="2"),
                "metadata": {"name": "w", "resourceVersion": created.metadata.resourceVersion}}
    code, raw, _ = call(gateway, "PUT", path, replaced)
    assert code == 200
    assert dict(kubeproto.decode(raw, CORE + "ConfigMap", "v1", "ConfigMap").data) == {"a": "2"}
    code, raw, _ = call(gateway, "PATCH", path, {"data": {"b": "3"}},
                        **{"Content-Type": "application/merge-patch+json"})
    assert code == 200
    patched = kubeproto.decode(raw, CORE + "ConfigMap", "v1", "ConfigMap")
    assert dict(patched.data) == {"a": "2", "b": "3"}
    code, raw, _ = call(gateway, "DELETE", path)
    assert code == 200
    gone = kubeproto.decode(raw, META + "Status", "v1", "Status")
    assert (gone.status, gone.details.name, gone.details.kind) == ("Success", "w", "configmaps")
    assert gone.details.uid == created.metadata.uid


def test_status_errors_in_protobuf(api: API, gateway: GatewayProcess, ns: str) -> None:
    missing = expect_status(call(gateway, "GET", f"{CM.format(ns=ns)}/nope"), 404, "NotFound")
    assert missing.message == 'configmaps "nope" not found'
    assert (missing.details.name, missing.details.kind) == ("nope", "configmaps")
    assert api.post(CM.format(ns=ns), configmap("dup"))[0] == 201
    exists = expect_status(call(gateway, "POST", CM.format(ns=ns), configmap("dup")), 409,
                           "AlreadyExists")
    assert exists.message == 'configmaps "dup" already exists'
    invalid = expect_status(call(gateway, "POST", CM.format(ns=ns), configmap("Bad_Name")),
                            422, "Invalid")
    assert invalid.details.kind == "ConfigMap" and invalid.details.name == "Bad_Name"
    assert [(c.reason, c.field) for c in invalid.details.causes] == [
        ("FieldValueInvalid", "metadata.name")]
    # a client that prefers JSON gets JSON, as before
    code, raw, headers = call(gateway, "GET", f"{CM.format(ns=ns)}/nope",
                              accept="application/json, " + PB)
    assert (code, headers["Content-Type"], json.loads(raw)["reason"]) == (
        404, "application/json", "NotFound")


def test_errors_of_the_filters_in_protobuf(gateway: GatewayProcess, ns: str) -> None:
    """401 from authentication and 403 from authorization, before any handler runs, are
    negotiated as kube's filters negotiate them."""
    anonymous = gateway.ssl_context(cert=None)
    forbidden = expect_status(call(gateway, "GET", CM.format(ns=ns), context=anonymous), 403,
                              "Forbidden")
    assert forbidden.message.startswith('configmaps is forbidden: User "system:anonymous"')
    unauthorized = expect_status(call(gateway, "GET", CM.format(ns=ns), context=anonymous,
                                      Authorization="Bearer not-a-token"), 401, "Unauthorized")
    assert unauthorized.message == "Unauthorized"


def read_events(gateway: GatewayProcess, path: str, count: int, accept: str = CLIENT_GO,
                then: Any = None) -> list[Any]:
    """``count`` WatchEvents of a protobuf watch of ``path``; ``then`` runs once the stream
    has begun (the writes to see)."""
    response = gateway.open("GET", path, headers={"Accept": accept}, timeout=30)
    try:
        assert response.headers["Content-Type"] == f"{PB};stream=watch"
        if then is not None:
            then()
        return kubeproto.read_frames(response, count)
    finally:
        response.close()


def test_watch_configmaps(api: API, gateway: GatewayProcess, ns: str) -> None:
    _, listed = api.get(CM.format(ns=ns))
    path = f"{CM.format(ns=ns)}/w"

    def writes() -> None:
        assert api.post(CM.format(ns=ns), configmap("w", a="1"))[0] == 201
        code, _ = api.patch(path, {"data": {"a": "2"}}, "application/merge-patch+json")
        assert code == 200
        assert api.delete(path)[0] == 200

    events = read_events(gateway, f"{CM.format(ns=ns)}?watch=1&fieldSelector=metadata.name=w"
                                  f"&resourceVersion={listed['metadata']['resourceVersion']}",
                         3, then=writes)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    objects = [kubeproto.decode(e.object.raw, CORE + "ConfigMap", "v1", "ConfigMap")
               for e in events]
    assert [dict(o.data) for o in objects] == [{"a": "1"}, {"a": "2"}, {"a": "2"}]
    versions = [int(o.metadata.resourceVersion) for o in objects]
    assert versions == sorted(versions) and len(set(versions)) == 3

    # a watch-list: the objects there are, then the bookmark that ends them
    assert api.post(CM.format(ns=ns), configmap("here"))[0] == 201
    added, bookmark = read_events(
        gateway, f"{CM.format(ns=ns)}?watch=1&fieldSelector=metadata.name=here"
                 "&sendInitialEvents=true&allowWatchBookmarks=true"
                 "&resourceVersionMatch=NotOlderThan", 2)
    assert (added.type, bookmark.type) == ("ADDED", "BOOKMARK")
    mark = kubeproto.decode(bookmark.object.raw, CORE + "ConfigMap", "v1", "ConfigMap")
    assert mark.metadata.annotations["k8s.io/initial-events-end"] == "true"
    assert int(mark.metadata.resourceVersion) > 0

    # as client-go's metadata informers watch
    (partial,) = read_events(gateway, f"{CM.format(ns=ns)}?watch=1"
                                      "&fieldSelector=metadata.name=here&resourceVersion=0",
                             1, accept=METADATA)
    meta = kubeproto.decode(partial.object.raw, META + "PartialObjectMetadata",
                            "meta.k8s.io/v1", "PartialObjectMetadata")
    assert (partial.type, meta.metadata.name) == ("ADDED", "here")


def test_watch_namespaces(api: API, gateway: GatewayProcess) -> None:
    name = f"pb-{uuid.uuid4().hex[:8]}"
    _, listed = api.get("/api/v1/namespaces")

    def writes() -> None:
        assert api.post("/api/v1/namespaces", {"metadata": {"name": name}})[0] == 201
        code, _ = api.patch(f"/api/v1/namespaces/{name}", {"metadata": {"labels": {"x": "y"}}},
                            "application/merge-patch+json")
        assert code == 200
        assert api.delete(f"/api/v1/namespaces/{name}")[0] == 200

    path = (f"/api/v1/namespaces?watch=1&fieldSelector=metadata.name={name}"
            f"&resourceVersion={listed['metadata']['resourceVersion']}")
    response = gateway.open("GET", path, headers={"Accept": CLIENT_GO}, timeout=60)
    try:
        assert response.headers["Content-Type"] == f"{PB};stream=watch"
        writes()
        seen: list[tuple[str, Any]] = []
        while not seen or seen[-1][0] != "DELETED":  # the namespace controller finishes it
            (event,) = kubeproto.read_frames(response, 1)
            seen.append((event.type, kubeproto.decode(event.object.raw, CORE + "Namespace",
                                                      "v1", "Namespace")))
    finally:
        response.close()
    types = [t for t, _ in seen]
    assert types[:2] == ["ADDED", "MODIFIED"] and set(types[2:-1]) <= {"MODIFIED"}
    assert all(ns.metadata.name == name for _, ns in seen)
    assert seen[0][1].status.phase == "Active" and seen[1][1].metadata.labels["x"] == "y"
    assert seen[-1][1].status.phase == "Terminating"
    assert seen[-1][1].metadata.HasField("deletionTimestamp")


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "spec": {"scope": "Namespaced",
             "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}


def test_custom_resources_have_no_protobuf_form(api: API, gateway: GatewayProcess,
                                                ns: str) -> None:
    """JSON when JSON is acceptable too, 406 when only protobuf is (a Status kube writes in
    protobuf all the same); their PartialObjectMetadata is served in protobuf."""
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    crd = {**CRD, "metadata": {"name": f"gizmos.{group}"}, "spec": {**CRD["spec"],
                                                                   "group": group}}
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    gateway.kubectl("wait", "--for=condition=established", "--timeout=30s",
                    f"crd/gizmos.{group}")
    path = f"/apis/{group}/v1/namespaces/{ns}/gizmos"
    gizmo = {"apiVersion": f"{group}/v1", "kind": "Gizmo", "metadata": {"name": "g"},
             "spec": {"size": 1}}
    code, raw, headers = call(gateway, "POST", path, gizmo)
    assert (code, headers["Content-Type"]) == (201, "application/json"), raw
    assert json.loads(raw)["spec"] == {"size": 1}
    refused = expect_status(call(gateway, "GET", f"{path}/g", accept=PB), 406, "NotAcceptable")
    assert refused.message == ("only the following media types are accepted: "
                               "application/json, application/yaml, " + PB)
    code, raw, _ = call(gateway, "GET", path, accept=METADATA_LIST)
    partial = kubeproto.decode(raw, META + "PartialObjectMetadataList", "meta.k8s.io/v1",
                               "PartialObjectMetadataList")
    assert code == 200 and [i.metadata.name for i in partial.items] == ["g"]


def test_reviews_and_token_requests_answer_in_protobuf(api: API, gateway: GatewayProcess,
                                                       ns: str) -> None:
    """Resources served by their own handlers (the reviews, serviceaccounts/token) negotiate
    protobuf too."""
    authn = "k8s.io.api.authentication.v1."
    code, raw, headers = call(gateway, "POST",
                              "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                              {"apiVersion": "authentication.k8s.io/v1",
                               "kind": "SelfSubjectReview"})
    assert (code, headers["Content-Type"]) == (201, PB), raw[:200]
    review = kubeproto.decode(raw, authn + "SelfSubjectReview", "authentication.k8s.io/v1",
                              "SelfSubjectReview")
    assert review.status.userInfo.username == "admin"
    code, body = api.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                          {"metadata": {"name": "robot"}})
    assert code == 201, body
    code, raw, headers = call(gateway, "POST",
                              f"/api/v1/namespaces/{ns}/serviceaccounts/robot/token",
                              {"apiVersion": "authentication.k8s.io/v1",
                               "kind": "TokenRequest", "spec": {}})
    assert (code, headers["Content-Type"]) == (201, PB), raw[:200]
    token = kubeproto.decode(raw, authn + "TokenRequest", "authentication.k8s.io/v1",
                             "TokenRequest")
    assert token.status.token.count(".") == 2


FLOW = "k8s.io.api.flowcontrol.v1."
API_ADMISSION = "k8s.io.api.admissionregistration.v1."
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
APIREG = "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1."
APIEXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def test_flowcontrol_in_protobuf(api: API, gateway: GatewayProcess) -> None:
    """The mandatory ``exempt`` FlowSchema, and the priority levels as a list, read with
    kube's messages; what JSON says, protobuf says."""
    code, raw, headers = call(gateway, "GET", f"{FLOWCONTROL}/flowschemas/exempt")
    assert (code, headers["Content-Type"]) == (200, PB), raw[:200]
    schema = kubeproto.decode(raw, FLOW + "FlowSchema", "flowcontrol.apiserver.k8s.io/v1",
                              "FlowSchema")
    _, as_json = api.get(f"{FLOWCONTROL}/flowschemas/exempt")
    assert schema.metadata.name == "exempt"
    assert schema.spec.priorityLevelConfiguration.name == "exempt"
    assert schema.spec.matchingPrecedence == as_json["spec"]["matchingPrecedence"] == 1
    (rule,) = schema.spec.rules
    assert [(s.kind, s.group.name) for s in rule.subjects] == [("Group", "system:masters")]
    assert [(list(r.verbs), r.clusterScope, list(r.namespaces))
            for r in rule.resourceRules] == [(["*"], True, ["*"])]
    assert not schema.spec.HasField("distinguisherMethod")  # a pointer, unset for exempt

    code, raw, _ = call(gateway, "GET", f"{FLOWCONTROL}/prioritylevelconfigurations")
    assert code == 200
    levels = kubeproto.decode(raw, FLOW + "PriorityLevelConfigurationList",
                              "flowcontrol.apiserver.k8s.io/v1",
                              "PriorityLevelConfigurationList")
    _, listed = api.get(f"{FLOWCONTROL}/prioritylevelconfigurations")
    by_name = {i.metadata.name: i for i in levels.items}
    assert set(by_name) == {i["metadata"]["name"] for i in listed["items"]} >= {
        "exempt", "catch-all"}  # the mandatory ones
    for item in listed["items"]:
        ours = by_name[item["metadata"]["name"]].spec
        assert ours.type == item["spec"]["type"]
        if item["spec"]["type"] == "Limited":
            limited = item["spec"]["limited"]
            assert ours.limited.nominalConcurrencyShares == limited["nominalConcurrencyShares"]
            assert ours.limited.limitResponse.type == limited["limitResponse"]["type"]
            assert not ours.HasField("exempt")
        else:
            assert ours.HasField("exempt") and not ours.HasField("limited")


def test_admission_policies_in_protobuf(api: API, gateway: GatewayProcess) -> None:
    admission = "/apis/admissionregistration.k8s.io/v1"
    name = f"pb-{uuid.uuid4().hex[:8]}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{
                           "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"], "resourceNames": ["never"]}]},
                       "validations": [{"expression": "object.data.size() < 9",
                                        "message": "too big"}]}}
    code, raw, headers = call(gateway, "POST", f"{admission}/validatingadmissionpolicies",
                              policy)
    assert (code, headers["Content-Type"]) == (201, PB), raw[:300]
    made = kubeproto.decode(raw, API_ADMISSION + "ValidatingAdmissionPolicy",
                            "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
    (rule,) = made.spec.matchConstraints.resourceRules
    inline = rule.ruleWithOperations  # Go's embedded structs, inline in JSON
    assert (list(rule.resourceNames), list(inline.operations), list(inline.rule.resources)) == (
        ["never"], ["CREATE"], ["configmaps"])
    assert made.spec.failurePolicy == "Fail" and made.spec.validations[0].message == "too big"
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"]}}
    assert api.post(f"{admission}/validatingadmissionpolicybindings", binding)[0] == 201
    code, raw, _ = call(gateway, "GET", f"{admission}/validatingadmissionpolicybindings")
    bindings = kubeproto.decode(raw, API_ADMISSION + "ValidatingAdmissionPolicyBindingList",
                                "admissionregistration.k8s.io/v1",
                                "ValidatingAdmissionPolicyBindingList")
    mine = [b for b in bindings.items if b.metadata.name == name]
    assert [(b.spec.policyName, list(b.spec.validationActions)) for b in mine] == [
        (name, ["Deny"])]
    for path in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
        assert api.delete(f"{admission}/{path}/{name}")[0] == 200



def test_apiservices_in_protobuf(api: API, gateway: GatewayProcess) -> None:
    """The local APIServices (no service: served by the gateway itself), listed and got."""
    path = "/apis/apiregistration.k8s.io/v1/apiservices"
    code, raw, headers = call(gateway, "GET", path)
    assert (code, headers["Content-Type"]) == (200, PB)
    listed = kubeproto.decode(raw, APIREG + "APIServiceList", "apiregistration.k8s.io/v1",
                              "APIServiceList")
    _, as_json = api.get(path)
    assert [i.metadata.name for i in listed.items] == \
        [i["metadata"]["name"] for i in as_json["items"]]
    assert "v1." in [i.metadata.name for i in listed.items]
    code, raw, _ = call(gateway, "GET", f"{path}/v1.rbac.authorization.k8s.io")
    assert code == 200
    rbac = kubeproto.decode(raw, APIREG + "APIService", "apiregistration.k8s.io/v1",
                            "APIService")
    _, expected = api.get(f"{path}/v1.rbac.authorization.k8s.io")
    assert (rbac.spec.group, rbac.spec.version) == ("rbac.authorization.k8s.io", "v1")
    assert (rbac.spec.groupPriorityMinimum, rbac.spec.versionPriority) == (
        expected["spec"]["groupPriorityMinimum"], expected["spec"]["versionPriority"])
    assert not rbac.spec.HasField("service")  # local: a nil pointer
    assert [(c.type, c.status, c.reason) for c in rbac.status.conditions] == [
        (c["type"], c["status"], c["reason"]) for c in expected["status"]["conditions"]]
    assert rbac.status.conditions[0].lastTransitionTime.seconds == seconds(
        expected["status"]["conditions"][0]["lastTransitionTime"])


def scaled_crd(group: str) -> dict[str, Any]:
    """A CRD whose schema uses the fields Go marshals by hand (default, enum, items,
    additionalProperties, x-kubernetes-*) and a scale subresource."""
    spec = {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
        "size": {"type": "string", "enum": ["small", "large"]},
        "ports": {"type": "array", "x-kubernetes-list-type": "set",
                  "items": {"type": "integer"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
    status_ = {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                "selector": {"type": "string"}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"dials.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "dials", "singular": "dial", "kind": "Dial"},
                 "versions": [{
                     "name": "v1", "served": True, "storage": True,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": spec, "status": status_}}},
                     "subresources": {"status": {}, "scale": {
                         "specReplicasPath": ".spec.replicas",
                         "statusReplicasPath": ".status.replicas",
                         "labelSelectorPath": ".status.selector"}}}]},
    }


def test_crds_and_the_scale_of_a_custom_resource_in_protobuf(api: API, gateway: GatewayProcess,
                                                             ns: str) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    code, raw, headers = call(gateway, "POST", CRDS, scaled_crd(group))
    assert (code, headers["Content-Type"]) == (201, PB), raw[:300]
    made = kubeproto.decode(raw, APIEXT + "CustomResourceDefinition",
                            "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert (made.spec.group, made.spec.names.kind, made.spec.scope) == (group, "Dial",
                                                                         "Namespaced")
    gateway.kubectl("wait", "--for=condition=established", "--timeout=30s", f"crd/dials.{group}")
    code, raw, _ = call(gateway, "GET", f"{CRDS}/dials.{group}")
    assert code == 200
    crd = kubeproto.decode(raw, APIEXT + "CustomResourceDefinition",
                           "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    (version,) = crd.spec.versions
    assert (version.name, version.served, version.storage) == ("v1", True, True)
    assert version.subresources.HasField("status")  # an empty message, set
    assert version.subresources.scale.labelSelectorPath == ".status.selector"
    spec = version.schema.openAPIV3Schema.properties["spec"]
    replicas = spec.properties["replicas"]
    assert (replicas.type, replicas.minimum, replicas.maximum) == ("integer", 0.0, 100.0)
    assert json.loads(replicas.default.raw) == 1
    assert [json.loads(e.raw) for e in spec.properties["size"].enum] == ["small", "large"]
    ports = spec.properties["ports"]
    assert (ports.xKubernetesListType, ports.items.schema.type) == ("set", "integer")
    labels = spec.properties["labels"].additionalProperties
    assert (labels.allows, labels.schema.type) == (True, "string")
    assert crd.status.acceptedNames.plural == "dials"
    assert "Established" in {c.type for c in crd.status.conditions}
    assert list(crd.status.storedVersions) == ["v1"]
    code, raw, _ = call(gateway, "GET", CRDS)
    every = kubeproto.decode(raw, APIEXT + "CustomResourceDefinitionList",
                             "apiextensions.k8s.io/v1", "CustomResourceDefinitionList")
    assert f"dials.{group}" in {i.metadata.name for i in every.items}

    path = f"/apis/{group}/v1/namespaces/{ns}/dials"
    dial = {"apiVersion": f"{group}/v1", "kind": "Dial", "metadata": {"name": "d"},
            "spec": {"replicas": 3}}
    assert api.post(path, dial)[0] == 201
    code, _ = api.patch(f"{path}/d/status", {"status": {"replicas": 2, "selector": "app=d"}},
                        "application/merge-patch+json")
    assert code == 200
    code, raw, headers = call(gateway, "GET", f"{path}/d/scale")
    assert (code, headers["Content-Type"]) == (200, PB), raw[:300]
    scale = kubeproto.decode(raw, "k8s.io.api.autoscaling.v1.Scale", "autoscaling/v1", "Scale")
    assert (scale.metadata.name, scale.metadata.namespace) == ("d", ns)
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (
        3, 2, "app=d")
    assert api.delete(f"{CRDS}/dials.{group}")[0] == 200


def test_unknown_paths_negotiate_their_404(gateway: GatewayProcess) -> None:
    missing = expect_status(call(gateway, "GET", "/apis/nowhere.example.com/v1/things"), 404,
                            "NotFound")
    assert missing.message == "the server could not find the requested resource"
