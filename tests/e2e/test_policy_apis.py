"""ValidatingAdmissionPolicies, their bindings, FlowSchemas and PriorityLevelConfigurations:
what an extension API server built on k8s.io/apiserver lists and watches on the core server,
served as kube-apiserver serves them (their enforcement is tested in test_admission_policies.py
and test_priority_and_fairness.py)."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from tests.e2e.test_kubectl import get_json, k, kubectl_running, watch_established, write
from tests.support.api import expect_status

pytestmark = pytest.mark.slow

ADM = "/apis/admissionregistration.k8s.io/v1"
FC = "/apis/flowcontrol.apiserver.k8s.io/v1"


def policy(name: str, **spec) -> dict:
    body = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}],
    }
    body.update(spec)
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": body}


def binding(name: str, **spec) -> dict:
    body = {"policyName": "replicas-limit", "validationActions": ["Deny"]}
    body.update(spec)
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": body}


def flow_schema(name: str, **spec) -> dict:
    body = {
        "priorityLevelConfiguration": {"name": "global-things"},
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "team-a"}}],
                   "resourceRules": [{"verbs": ["get"], "apiGroups": [""],
                                      "resources": ["configmaps"], "namespaces": ["*"]}]}],
    }
    body.update(spec)
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name}, "spec": body}


def priority_level(name: str, **limited) -> dict:
    body = {"limitResponse": {"type": "Queue", "queuing": {}}}
    body.update(limited)
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": body}}


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().split("\n")]


# -- discovery ------------------------------------------------------------------------------


def test_discovery_lists_the_kinds(gateway):
    resources = k(gateway, "api-resources", "--api-group=admissionregistration.k8s.io",
                  "-o", "name").split()
    assert {"validatingadmissionpolicies.admissionregistration.k8s.io",
            "validatingadmissionpolicybindings.admissionregistration.k8s.io"} <= set(resources)
    resources = k(gateway, "api-resources", "--api-group=flowcontrol.apiserver.k8s.io",
                  "-o", "name").split()
    assert set(resources) == {"flowschemas.flowcontrol.apiserver.k8s.io",
                              "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io"}
    assert "flowcontrol.apiserver.k8s.io/v1" in k(gateway, "api-versions").split()


def test_discovery_details(api):
    _, adm = api.get(ADM)
    by_name = {r["name"]: r for r in adm["resources"]}
    vap = by_name["validatingadmissionpolicies"]
    assert (vap["namespaced"], vap["kind"], vap["categories"]) == (
        False, "ValidatingAdmissionPolicy", ["api-extensions"])
    assert "validatingadmissionpolicies/status" in by_name
    assert by_name["validatingadmissionpolicybindings"]["categories"] == ["api-extensions"]
    _, fc = api.get(FC)
    names = {r["name"] for r in fc["resources"]}
    assert names == {"flowschemas", "flowschemas/status", "prioritylevelconfigurations",
                     "prioritylevelconfigurations/status"}


def test_the_group_version_is_registered_as_an_apiservice(api):
    deadline = time.monotonic() + 30
    while True:
        code, svc = api.get(
            "/apis/apiregistration.k8s.io/v1/apiservices/v1.flowcontrol.apiserver.k8s.io")
        if code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert code == 200, svc
    assert (svc["spec"]["groupPriorityMinimum"], svc["spec"]["versionPriority"]) == (16100, 21)


def test_explain(gateway):
    out = k(gateway, "explain", "validatingadmissionpolicy.spec.matchConstraints")
    assert "resourceRules" in out and "namespaceSelector" in out
    out = k(gateway, "explain", "flowschemas.spec.rules.subjects", "--api-version",
            "flowcontrol.apiserver.k8s.io/v1")
    assert "serviceAccount" in out and "kind" in out
    out = k(gateway, "explain", "prioritylevelconfiguration.spec.limited.limitResponse")
    assert "queuing" in out


# -- ValidatingAdmissionPolicy and its binding ---------------------------------------------------


def test_policy_create_get_list_delete(gateway, tmp_path):
    path = write(tmp_path, "vap.yaml", policy("replicas-limit"))
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/replicas-limit created" in \
        k(gateway, "apply", "-f", path)
    obj = get_json(gateway, "validatingadmissionpolicy", "replicas-limit")
    spec = obj["spec"]
    # v1 defaults
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert spec["matchConstraints"]["namespaceSelector"] == {}
    assert spec["matchConstraints"]["objectSelector"] == {}
    assert spec["matchConstraints"]["resourceRules"][0]["scope"] == "*"
    assert obj["metadata"]["generation"] == 1
    table = rows(k(gateway, "get", "validatingadmissionpolicies", "replicas-limit"))
    assert table[0] == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]
    assert table[1][:3] == ["replicas-limit", "1", "<unset>"]
    path = write(tmp_path, "vap.yaml", policy(
        "replicas-limit", paramKind={"apiVersion": "v1", "kind": "ConfigMap"}))
    assert "configured" in k(gateway, "apply", "-f", path)
    table = rows(k(gateway, "get", "validatingadmissionpolicies"))
    assert ["replicas-limit", "1", "v1/ConfigMap"] in [r[:3] for r in table]
    assert get_json(gateway, "validatingadmissionpolicy", "replicas-limit")[
        "metadata"]["generation"] == 2
    names = k(gateway, "get", "api-extensions", "-o", "name").split()
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/replicas-limit" in names
    k(gateway, "delete", "validatingadmissionpolicy", "replicas-limit")
    assert k(gateway, "get", "validatingadmissionpolicies", "-o", "name") .split().count(
        "validatingadmissionpolicy.admissionregistration.k8s.io/replicas-limit") == 0


def test_policy_status_is_only_written_through_the_subresource(api):
    code, created = api.post(f"{ADM}/validatingadmissionpolicies", {
        **policy("status-split"), "status": {"observedGeneration": 7}})
    assert code == 201, created
    assert "status" not in created or not created["status"].get("observedGeneration")
    path = f"{ADM}/validatingadmissionpolicies/status-split/status"
    code, updated = api.patch(path, {"status": {"observedGeneration": 1}},
                              "application/merge-patch+json")
    assert code == 200, updated
    assert updated["status"]["observedGeneration"] == 1
    assert updated["metadata"]["generation"] == 1
    api.delete(f"{ADM}/validatingadmissionpolicies/status-split")


def test_binding_create_get_list_delete(gateway, tmp_path):
    path = write(tmp_path, "vapb.yaml", binding(
        "limit-in-tests", paramRef={"name": "limits", "namespace": "default",
                                    "parameterNotFoundAction": "Deny"},
        matchResources={"namespaceSelector": {"matchLabels": {"env": "test"}}}))
    assert "created" in k(gateway, "create", "-f", path)
    obj = get_json(gateway, "validatingadmissionpolicybinding", "limit-in-tests")
    assert obj["spec"]["matchResources"]["matchPolicy"] == "Equivalent"
    assert obj["spec"]["matchResources"]["objectSelector"] == {}
    table = rows(k(gateway, "get", "validatingadmissionpolicybindings", "limit-in-tests"))
    assert table[0] == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert table[1][:3] == ["limit-in-tests", "replicas-limit", "default/limits"]
    path = write(tmp_path, "sel.yaml", binding(
        "by-selector", paramRef={"selector": {"matchLabels": {"tier": "a"}},
                                 "parameterNotFoundAction": "Allow"}))
    k(gateway, "create", "-f", path)
    table = rows(k(gateway, "get", "validatingadmissionpolicybindings", "by-selector"))
    assert table[1][:3] == ["by-selector", "replicas-limit", "tier=a"]
    k(gateway, "delete", "validatingadmissionpolicybinding", "limit-in-tests", "by-selector")
    assert "limit-in-tests" not in k(gateway, "get", "validatingadmissionpolicybindings")


def test_watch_policies_and_bindings(gateway, tmp_path):
    with kubectl_running(gateway, "get", "validatingadmissionpolicies", "-w",
                         "--output-watch-events", "--request-timeout=60s") as (_, out, err):
        err.wait_for(watch_established)
        k(gateway, "create", "-f", write(tmp_path, "w.yaml", policy("watched")))
        k(gateway, "delete", "validatingadmissionpolicy", "watched")
        out.wait_for(lambda line: line.split()[:2] == ["ADDED", "watched"])
        out.wait_for(lambda line: line.split()[:2] == ["DELETED", "watched"])
    with kubectl_running(gateway, "get", "validatingadmissionpolicybindings", "-w",
                         "--output-watch-events", "--request-timeout=60s") as (_, out, err):
        err.wait_for(watch_established)
        k(gateway, "create", "-f", write(tmp_path, "wb.yaml", binding("watched-b")))
        k(gateway, "delete", "validatingadmissionpolicybinding", "watched-b")
        out.wait_for(lambda line: line.split()[:2] == ["ADDED", "watched-b"])
        out.wait_for(lambda line: line.split()[:2] == ["DELETED", "watched-b"])


def test_policy_validation(api):
    body = policy("bad-policy", failurePolicy="Sometimes", validations=[],
                  matchConstraints={"resourceRules": []})
    expect_status(api.post(f"{ADM}/validatingadmissionpolicies", body), 422, "Invalid", causes=[
        {"reason": "FieldValueNotSupported", "field": "spec.failurePolicy",
         "message": 'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'},
        {"reason": "FieldValueRequired", "field": "spec.matchConstraints.resourceRules",
         "message": "Required value"},
        {"reason": "FieldValueRequired", "field": "spec.validations",
         "message": "Required value: validations or auditAnnotations must contain at least "
                    "one item"},
        {"reason": "FieldValueRequired", "field": "spec.auditAnnotations",
         "message": "Required value: validations or auditAnnotations must contain at least "
                    "one item"},
    ])
    body = policy("bad-kind", paramKind={"apiVersion": "v1"},
                  validations=[{"expression": "true", "reason": "Teapot"}])
    expect_status(api.post(f"{ADM}/validatingadmissionpolicies", body), 422, "Invalid", causes=[
        {"reason": "FieldValueRequired", "field": "spec.paramKind.kind",
         "message": "Required value"},
        {"reason": "FieldValueNotSupported", "field": "spec.validations[0].reason",
         "message": 'Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", '
                    '"RequestEntityTooLarge"'},
    ])
    body = policy("no-rules")
    del body["spec"]["matchConstraints"]
    answer = expect_status(api.post(f"{ADM}/validatingadmissionpolicies", body), 422,
                           "Invalid")
    assert answer["message"] == ('ValidatingAdmissionPolicy.admissionregistration.k8s.io '
                                 '"no-rules" is invalid: spec.matchConstraints: '
                                 'Required value'), answer["message"]


def test_binding_validation(api):
    body = binding("bad-binding", policyName="", validationActions=["Deny", "Warn"],
                   paramRef={"name": "p", "selector": {}})
    expect_status(api.post(f"{ADM}/validatingadmissionpolicybindings", body), 422, "Invalid",
                  causes=[
        {"reason": "FieldValueRequired", "field": "spec.policyName",
         "message": "Required value"},
        {"reason": "FieldValueForbidden", "field": "spec.paramRef.name",
         "message": "Forbidden: name and selector are mutually exclusive"},
        {"reason": "FieldValueForbidden", "field": "spec.paramRef.selector",
         "message": "Forbidden: name and selector are mutually exclusive"},
        {"reason": "FieldValueRequired", "field": "spec.paramRef.parameterNotFoundAction",
         "message": "Required value"},
        {"reason": "FieldValueInvalid", "field": "spec.validationActions",
         "message": 'Invalid value: []string{"Deny", "Warn"}: must not contain both Deny and '
                    'Warn (repeating the same validation failure information in the API '
                    'response and headers serves no purpose)'},
    ])
    body = binding("no-actions", validationActions=[])
    expect_status(api.post(f"{ADM}/validatingadmissionpolicybindings", body), 422, "Invalid",
                  message='ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io '
                          '"no-actions" is invalid: spec.validationActions: Required value: '
                          'at least one validation action is required')


# -- flow control ------------------------------------------------------------------------------


def test_mandatory_configuration_exists_at_start(gateway):
    table = rows(k(gateway, "get", "flowschemas"))
    assert table[0] == ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD",
                        "AGE", "MISSINGPL"]
    by_name = {r[0]: r for r in table[1:]}
    assert by_name["exempt"][1:4] == ["exempt", "1", "<none>"]
    assert by_name["exempt"][5] == "False"
    assert by_name["catch-all"][1:4] == ["catch-all", "10000", "ByUser"]
    assert by_name["catch-all"][5] == "False"
    table = rows(k(gateway, "get", "prioritylevelconfigurations"))
    assert table[0] == ["NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE",
                        "QUEUELENGTHLIMIT", "AGE"]
    by_name = {r[0]: r for r in table[1:]}
    assert by_name["exempt"][1:6] == ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    assert by_name["catch-all"][1:6] == ["Limited", "5", "<none>", "<none>", "<none>"]
    exempt = get_json(gateway, "flowschema", "exempt")
    assert exempt["metadata"]["annotations"] == {"apf.kubernetes.io/autoupdate-spec": "true"}
    assert exempt["spec"]["rules"][0]["subjects"] == [
        {"kind": "Group", "group": {"name": "system:masters"}}]
    condition = exempt["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Dangling", "False", "Found")
    assert condition["message"] == ('This FlowSchema references the '
                                    'PriorityLevelConfiguration object named "exempt" and it '
                                    'exists')
    pl = get_json(gateway, "prioritylevelconfiguration", "catch-all")
    assert pl["spec"] == {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 5, "lendablePercent": 0,
        "limitResponse": {"type": "Reject"}}}


def test_flow_schema_and_priority_level_lifecycle(gateway, tmp_path):
    k(gateway, "create", "-f", write(tmp_path, "fs.yaml", flow_schema("team-a")))
    fs = get_json(gateway, "flowschema", "team-a")
    assert fs["spec"]["matchingPrecedence"] == 1000
    # its priority level does not exist yet: Dangling
    deadline = time.monotonic() + 10
    while _dangling(get_json(gateway, "flowschema", "team-a")) != "True":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    k(gateway, "create", "-f", write(tmp_path, "pl.yaml", priority_level("global-things")))
    pl = get_json(gateway, "prioritylevelconfiguration", "global-things")
    assert pl["spec"]["limited"] == {
        "nominalConcurrencyShares": 30, "lendablePercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {
            "handSize": 8, "queues": 64, "queueLengthLimit": 50}}}
    table = rows(k(gateway, "get", "prioritylevelconfiguration", "global-things"))
    assert table[1][:6] == ["global-things", "Limited", "30", "64", "8", "50"]
    deadline = time.monotonic() + 10
    while _dangling(get_json(gateway, "flowschema", "team-a")) != "False":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    table = rows(k(gateway, "get", "flowschema", "team-a"))
    assert table[1][:4] == ["team-a", "global-things", "1000", "<none>"]
    assert table[1][5] == "False"
    k(gateway, "delete", "flowschema", "team-a")
    k(gateway, "delete", "prioritylevelconfiguration", "global-things")
    assert "team-a" not in k(gateway, "get", "flowschemas")


def _dangling(fs: dict) -> str:
    for condition in (fs.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Dangling":
            return condition["status"]
    return "?"


def test_watch_flow_schemas(gateway, tmp_path):
    with kubectl_running(gateway, "get", "flowschemas", "-w", "--output-watch-events",
                         "--request-timeout=60s") as (_, out, err):
        err.wait_for(watch_established)
        k(gateway, "create", "-f", write(tmp_path, "fs.yaml", flow_schema("watched-fs")))
        k(gateway, "delete", "flowschema", "watched-fs")
        out.wait_for(lambda line: line.split()[:2] == ["ADDED", "watched-fs"])
        out.wait_for(lambda line: line.split()[:2] == ["DELETED", "watched-fs"])


def test_mandatory_objects_come_back(gateway):
    k(gateway, "delete", "flowschema", "catch-all")
    k(gateway, "delete", "prioritylevelconfiguration", "catch-all")
    deadline = time.monotonic() + 20
    while True:
        names = k(gateway, "get", "flowschemas,prioritylevelconfigurations", "-o",
                  "name").split()
        if {"flowschema.flowcontrol.apiserver.k8s.io/catch-all",
                "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/catch-all"} <= set(
                names):
            break
        assert time.monotonic() < deadline, names
        time.sleep(0.2)


def test_flow_schema_validation(api):
    body = flow_schema("bad-fs", matchingPrecedence=1, distinguisherMethod={"type": "ByFoo"},
                       priorityLevelConfiguration={"name": ""},
                       rules=[{"subjects": [], "resourceRules": [{
                           "verbs": ["get", "*"], "apiGroups": [], "resources": ["pods"]}]}])
    expect_status(api.post(f"{FC}/flowschemas", body), 422, "Invalid", causes=[
        {"reason": "FieldValueInvalid", "field": "spec.matchingPrecedence",
         "message": "Invalid value: 1: only the schema named 'exempt' may have "
                    "matchingPrecedence 1"},
        {"reason": "FieldValueNotSupported", "field": "spec.distinguisherMethod.type",
         "message": 'Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:"ByFoo"}: '
                    'supported values: "ByNamespace", "ByUser"'},
        {"reason": "FieldValueRequired", "field": "spec.priorityLevelConfiguration.name",
         "message": "Required value: must reference a priority level"},
        {"reason": "FieldValueRequired", "field": "spec.rules[0].subjects",
         "message": "Required value: subjects must contain at least one value"},
        {"reason": "FieldValueInvalid", "field": "spec.rules[0].resourceRules[0].verbs",
         "message": 'Invalid value: []string{"get", "*"}: if \'*\' is present, must not '
                    'specify other verbs'},
        {"reason": "FieldValueRequired", "field": "spec.rules[0].resourceRules[0].apiGroups",
         "message": "Required value: resource rules must supply at least one api group"},
        {"reason": "FieldValueRequired", "field": "spec.rules[0].resourceRules[0].namespaces",
         "message": "Required value: resource rules that are not cluster scoped must supply "
                    "at least one namespace"},
    ])
    body = flow_schema("too-late", matchingPrecedence=10001)
    expect_status(api.post(f"{FC}/flowschemas", body), 422, "Invalid",
                  message='FlowSchema.flowcontrol.apiserver.k8s.io "too-late" is invalid: '
                          'spec.matchingPrecedence: Invalid value: 10001: must not be '
                          'greater than 10000')


def test_mandatory_specs_are_fixed(api):
    code, current = api.get(f"{FC}/flowschemas/catch-all")
    assert code == 200, current
    current["spec"]["matchingPrecedence"] = 9000
    answer = expect_status(api.put(f"{FC}/flowschemas/catch-all", current), 422, "Invalid")
    assert answer["details"]["causes"][0]["field"] == "spec"
    assert answer["details"]["causes"][0]["message"].endswith(
        "spec of 'catch-all' must equal the fixed value")
    code, exempt = api.get(f"{FC}/prioritylevelconfigurations/exempt")
    exempt["spec"]["exempt"]["nominalConcurrencyShares"] = 10  # this one part may change
    code, body = api.put(f"{FC}/prioritylevelconfigurations/exempt", exempt)
    assert code == 200, body
    exempt = body
    exempt["spec"]["exempt"]["nominalConcurrencyShares"] = 0
    assert api.put(f"{FC}/prioritylevelconfigurations/exempt", exempt)[0] == 200


def test_priority_level_validation(api):
    body = priority_level("bad-pl", nominalConcurrencyShares=-1, lendablePercent=101,
                          limitResponse={"type": "Queue", "queuing": {
                              "queues": 7, "handSize": 8, "queueLengthLimit": 10}})
    expect_status(api.post(f"{FC}/prioritylevelconfigurations", body), 422, "Invalid", causes=[
        {"reason": "FieldValueInvalid", "field": "spec.limited.nominalConcurrencyShares",
         "message": "Invalid value: -1: must be a non-negative integer"},
        {"reason": "FieldValueInvalid", "field": "spec.limited.limitResponse.queuing.handSize",
         "message": "Invalid value: 8: should not be greater than queues (7)"},
        {"reason": "FieldValueInvalid", "field": "spec.limited.lendablePercent",
         "message": "Invalid value: 101: must be between 0 and 100, inclusive"},
    ])
    body = priority_level("entropy", limitResponse={"type": "Queue", "queuing": {
        "queues": 512, "handSize": 8, "queueLengthLimit": 100}})
    expect_status(api.post(f"{FC}/prioritylevelconfigurations", body), 422, "Invalid", causes=[
        {"reason": "FieldValueInvalid", "field": "spec.limited.limitResponse.queuing.handSize",
         "message": "Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 "
                    "should not be greater than 60"},
    ])
    body = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "not-exempt"}, "spec": {"type": "Exempt"}}
    expect_status(api.post(f"{FC}/prioritylevelconfigurations", body), 422, "Invalid",
                  message='PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io '
                          '"not-exempt" is invalid: spec.type: Invalid value: "Exempt": type '
                          "must be 'Exempt' if and only if name is 'exempt'")


def test_status_subresource_takes_server_side_apply(gateway, api, tmp_path):
    """What an extension API server's APF controller sends when a condition differs."""
    k(gateway, "create", "-f", write(tmp_path, "fs.yaml", flow_schema("applied-status")))
    patch = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
             "metadata": {"name": "applied-status"},
             "status": {"conditions": [{"type": "Dangling", "status": "True",
                                        "reason": "NotFound", "message": "x",
                                        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}
    code, body = api.patch(
        f"{FC}/flowschemas/applied-status/status?fieldManager=api-priority-and-fairness-"
        "config-consumer-v1&force=true", patch, "application/apply-patch+yaml")
    assert code == 200, body
    assert body["status"]["conditions"][0]["type"] == "Dangling"
    k(gateway, "delete", "flowschema", "applied-status")


def test_server_side_apply_of_a_priority_level(gateway, tmp_path):
    doc = priority_level("applied-pl", limitResponse={"type": "Reject"})
    path = write(tmp_path, "pl.yaml", doc)
    assert "serverside-applied" in k(gateway, "apply", "--server-side", "-f", path)
    obj = json.loads(k(gateway, "get", "prioritylevelconfiguration", "applied-pl", "-o",
                       "json"))
    assert obj["spec"]["limited"]["nominalConcurrencyShares"] == 30
    assert yaml.safe_load(k(gateway, "get", "prioritylevelconfiguration", "applied-pl", "-o",
                            "yaml"))["spec"]["type"] == "Limited"
    k(gateway, "delete", "prioritylevelconfiguration", "applied-pl")
