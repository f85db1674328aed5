"""ValidatingAdmissionPolicy enforced as kube-apiserver 1.32 enforces it, driven by kubectl and
raw HTTPS against a real gateway: kube's documented examples (a replica limit with params, a
namespace-label policy on namespaceObject, Warn and Audit actions read back from the audit
log, a type-check warning in status), policies on built-in kinds and on custom resources,
the authorizer library answered by the gateway's RBAC, failurePolicy, params by name and by
selector, parameterNotFoundAction, and misconfiguration. Every denial is asserted with kube's
exact words."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.api import API, configmap, expect_status
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.identity import https
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

ADM = "/apis/admissionregistration.k8s.io/v1"
POLICIES = f"{ADM}/validatingadmissionpolicies"
BINDINGS = f"{ADM}/validatingadmissionpolicybindings"
BOB = "bob-token-5e6f7a"
TOKENS = f"{BOB},bob,uid-bob\n"
DEMO = "demo.example.com"       # a Deployment-like kind: Deployments are not served here
RULES = "rules.example.com"     # kube's ReplicaLimit param kind


# -- the gateway and its CRDs -------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("policies")
    proc = token_gateway(work, TOKENS, "--audit-log-path", str(work / "audit" / "audit.log"))
    with proc:
        _install_crds(proc)
        yield proc


def _crd(group: str, plural: str, kind: str, schema: dict, *, scope: str = "Namespaced",
         versions: tuple[str, ...] = ("v1",)) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "schema": {"openAPIV3Schema": schema}}
                                  for i, v in enumerate(versions)]}}


def _install_crds(gw: GatewayProcess) -> None:
    deployment = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer"}, "image": {"type": "string"}}}}}
    limit = {"type": "object", "properties": {"maxReplicas": {"type": "integer"}}}
    docs = [_crd(DEMO, "deployments", "Deployment", deployment, versions=("v1", "v1beta1")),
            _crd(RULES, "replicalimits", "ReplicaLimit", limit)]
    gw.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    gw.kubectl("wait", "--for=condition=established", "--timeout=30s",
               f"crd/deployments.{DEMO}", f"crd/replicalimits.{RULES}")
    eventually(lambda: gw.kubectl("get", f"deployments.{DEMO}", "-A", check=False)
               .returncode == 0, what="the Deployment CRD served")


@pytest.fixture(scope="module")
def api(gateway: GatewayProcess) -> API:
    return API(gateway)


@pytest.fixture
def ns(api: API) -> str:
    return api.namespace()


@pytest.fixture
def make(api: API) -> Iterator[Callable[[str, dict], dict]]:
    """Create objects by collection path; every one made is deleted after the test
    (bindings first: a policy is never left without its binding's counterpart)."""
    made: list[str] = []

    def create(collection: str, body: dict) -> dict:
        code, created = api.post(collection, body)
        assert code == 201, created
        made.append(f"{collection}/{created['metadata']['name']}")
        return created

    yield create
    for path in reversed(made):
        api.delete(path)


def policy(name: str, validations: list[dict], *, resources: tuple[str, ...] = ("configmaps",),
           group: str = "", versions: tuple[str, ...] = ("v1",), **spec: Any) -> dict:
    body: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [group], "apiVersions": list(versions),
            "operations": ["CREATE", "UPDATE"], "resources": list(resources)}]},
        "validations": validations}
    body.update(spec)
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": body}


def binding(name: str, policy_name: str, *, actions: tuple[str, ...] = ("Deny",),
            namespace: str | None = None, **spec: Any) -> dict:
    """A binding, scoped to one namespace when ``namespace`` is given."""
    body: dict[str, Any] = {"policyName": policy_name, "validationActions": list(actions)}
    if namespace is not None:
        body["matchResources"] = {"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    body.update(spec)
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": body}


def deployment(name: str, replicas: int, version: str = "v1") -> dict:
    return {"apiVersion": f"{DEMO}/{version}", "kind": "Deployment",
            "metadata": {"name": name}, "spec": {"replicas": replicas, "image": "nginx"}}


def deployments(ns: str, version: str = "v1") -> str:
    return f"/apis/{DEMO}/{version}/namespaces/{ns}/deployments"


def configmaps(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


def denied(policy_name: str, binding_name: str, message: str) -> str:
    return (f"ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' "
            f"denied request: {message}")


def forbidden(resource: str, name: str, why: str) -> str:
    """admission.NewForbidden's message."""
    return f'{resource} "{name}" is forbidden: {why}'


def uid() -> str:
    return uuid.uuid4().hex[:8]


def audit_events(gw: GatewayProcess) -> list[dict]:
    path = gw.workdir / "audit" / "audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def audited(gw: GatewayProcess, audit_id: str) -> dict:
    """The ResponseComplete event of one request."""
    def done() -> dict | None:
        return next((e for e in audit_events(gw) if e["auditID"] == audit_id
                     and e["stage"] == "ResponseComplete"), None)
    eventually(lambda: done() is not None, what=f"the audit event of {audit_id}")
    event = done()
    assert event is not None
    return event


# -- kube's documented examples ---------------------------------------------------------------


def test_replica_limit_with_a_custom_resource_as_params(gateway, api, make, ns, tmp_path: Path):
    """kube's "parameter resources" example, driven with kubectl: a ReplicaLimit (a CRD) in
    ``default`` limits Deployments in namespaces labelled environment=test."""
    api.patch(f"/api/v1/namespaces/{ns}", {"metadata": {"labels": {"environment": "test"}}},
              "application/merge-patch+json")
    name = f"replicalimit-policy-{uid()}.example.com"
    bind = f"replicalimit-binding-test-{uid()}.example.com"
    limit_name = f"replica-limit-test-{uid()}.example.com"
    make(f"/apis/{RULES}/v1/namespaces/default/replicalimits", {
        "apiVersion": f"{RULES}/v1", "kind": "ReplicaLimit",
        "metadata": {"name": limit_name}, "maxReplicas": 3})
    make(POLICIES, policy(name, [{"expression": "object.spec.replicas <= params.maxReplicas",
                                  "reason": "Invalid"}],
                          group=DEMO, resources=("deployments",),
                          paramKind={"apiVersion": f"{RULES}/v1", "kind": "ReplicaLimit"}))
    make(BINDINGS, binding(bind, name, paramRef={
        "name": limit_name, "namespace": "default", "parameterNotFoundAction": "Deny"},
        matchResources={"namespaceSelector": {"matchLabels": {"environment": "test"}}}))
    manifest = tmp_path / "nginx.yaml"
    manifest.write_text(yaml.safe_dump(deployment("nginx", 5)))
    refused = gateway.kubectl("apply", "-n", ns, "-f", str(manifest), check=False)
    assert refused.returncode != 0
    message = denied(name, bind, "failed expression: object.spec.replicas <= params.maxReplicas")
    assert f'The deployments "nginx" is invalid: : {message}' in refused.stderr, refused.stderr
    expect_status(api.post(deployments(ns), deployment("nginx", 5)), 422, "Invalid",
                  message=forbidden(f"deployments.{DEMO}", "nginx", message),
                  causes=[{"message": message}])
    manifest.write_text(yaml.safe_dump(deployment("nginx", 3)))
    assert "created" in gateway.kubectl("apply", "-n", ns, "-f", str(manifest)).stdout
    # an update is checked too
    scaled = api.patch(f"{deployments(ns)}/nginx", {"spec": {"replicas": 4}},
                       "application/merge-patch+json")
    expect_status(scaled, 422, "Invalid", message=forbidden(f"deployments.{DEMO}", "nginx",
                                                            message))
    # the param changes, and so does the limit
    api.patch(f"/apis/{RULES}/v1/namespaces/default/replicalimits/{limit_name}",
              {"maxReplicas": 10}, "application/merge-patch+json")
    assert api.patch(f"{deployments(ns)}/nginx", {"spec": {"replicas": 4}},
                     "application/merge-patch+json")[0] == 200
    # a namespace without the label is not bound
    other = api.namespace()
    assert api.post(deployments(other), deployment("big", 50))[0] == 201


def test_replica_limit_with_a_configmap_as_params_and_a_message_expression(api, make, ns):
    name, bind = f"cm-limit-{uid()}", f"cm-limit-b-{uid()}"
    make(configmaps(ns), configmap("limits", maxReplicas="2"))
    make(POLICIES, policy(name, [{
        "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
        "messageExpression": "'object.spec.replicas must be no greater than ' + "
                             "params.data.maxReplicas", "reason": "Forbidden"}],
        group=DEMO, resources=("deployments",),
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"}))
    # no namespace in the paramRef: the request's namespace
    make(BINDINGS, binding(bind, name, namespace=ns, paramRef={
        "name": "limits", "parameterNotFoundAction": "Deny"}))
    message = denied(name, bind, "object.spec.replicas must be no greater than 2")
    expect_status(api.post(deployments(ns), deployment("d", 3)), 403, "Forbidden",
                  message=forbidden(f"deployments.{DEMO}", "d", message),
                  causes=[{"message": message}])
    assert api.post(deployments(ns), deployment("d", 2))[0] == 201


def test_namespace_label_policy_reads_namespace_object(api, make):
    """A policy on a built-in kind reading the request's namespace: in namespaces labelled
    environment=prod, ConfigMaps need an owner label."""
    name, bind = f"prod-owner-{uid()}", f"prod-owner-b-{uid()}"
    prod, dev = api.namespace(), api.namespace()
    api.patch(f"/api/v1/namespaces/{prod}", {"metadata": {"labels": {"environment": "prod"}}},
              "application/merge-patch+json")
    make(POLICIES, policy(name, [{
        "expression": "namespaceObject.metadata.?labels[?'environment'].orValue('') != 'prod'"
                      " || has(object.metadata.labels) && 'owner' in object.metadata.labels",
        "messageExpression": "'ConfigMaps in ' + namespaceObject.metadata.name + "
                             "' need an owner label'"}],
        matchConditions=[{"name": "not-the-root-ca",
                          "expression": "object.metadata.name != 'kube-root-ca.crt'"}]))
    make(BINDINGS, binding(bind, name, matchResources={"namespaceSelector": {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                              "values": [prod, dev]}]}}))
    message = denied(name, bind, f"ConfigMaps in {prod} need an owner label")
    expect_status(api.post(configmaps(prod), configmap("c", k="v")), 422, "Invalid",
                  message=forbidden("configmaps", "c", message), causes=[{"message": message}])
    assert api.post(configmaps(prod), configmap("c", {"owner": "me"}, k="v"))[0] == 201
    assert api.post(configmaps(dev), configmap("c", k="v"))[0] == 201


def test_warn_and_audit_actions(gateway, api, make, ns, tmp_path: Path):
    """kube's "validation actions" example: Warn shows in kubectl, Audit and the policy's
    auditAnnotations land in the audit event; the write is admitted."""
    name, bind = f"warn-audit-{uid()}", f"warn-audit-b-{uid()}"
    make(POLICIES, policy(name, [{"expression": "object.spec.replicas <= 5",
                                  "message": "too many replicas"}],
                          group=DEMO, resources=("deployments",),
                          # kube's documented "... : null" does not type-check in cel-go
                          # either (string is not nullable): '' is left out as null is
                          auditAnnotations=[{"key": "high-replica-count",
                                             "valueExpression": "object.spec.replicas > 5 ? "
                                             "'Deployment spec.replicas set to ' + "
                                             "string(object.spec.replicas) : ''"},
                                            {"key": "never", "valueExpression": "null"}]))
    make(BINDINGS, binding(bind, name, actions=("Warn", "Audit"), namespace=ns))
    manifest = tmp_path / "big.yaml"
    manifest.write_text(yaml.safe_dump(deployment("big", 6)))
    created = gateway.kubectl("create", "-n", ns, "-f", str(manifest))
    assert (f"Warning: Validation failed for ValidatingAdmissionPolicy '{name}' with binding "
            f"'{bind}': too many replicas") in created.stderr, created.stderr
    code, _ = gateway.request("POST", deployments(ns), deployment("big2", 7),
                              headers={"Audit-ID": f"audit-{name}"})
    assert code == 201
    annotations = audited(gateway, f"audit-{name}").get("annotations") or {}
    failure = json.loads(annotations["validation.policy.admission.k8s.io/validation_failure"])
    assert failure == [{"message": "too many replicas", "policy": name, "binding": bind,
                        "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}]
    assert annotations[f"{name}/high-replica-count"] == "Deployment spec.replicas set to 7"
    assert f"{name}/never" not in annotations
    # a passing write has neither
    code, _ = gateway.request("POST", deployments(ns), deployment("small", 1),
                              headers={"Audit-ID": f"audit-ok-{name}"})
    assert code == 201
    annotations = audited(gateway, f"audit-ok-{name}").get("annotations") or {}
    assert not [k for k in annotations if "policy" in k or k.startswith(name)], annotations


def test_type_checking_warnings_in_status(gateway, make):
    """kube's type-checking example: an expression naming a field the kind does not have
    gets a warning in status.typeChecking, written by the status controller."""
    name = f"typed-{uid()}"
    make(POLICIES, policy(name, [
        {"expression": "object.replicas > 1"},
        {"expression": "object.spec.replicas > 1",
         "messageExpression": "'replicas: ' + object.spec.replicas"},
        {"expression": "object.spec.image != ''"}], group=DEMO, resources=("deployments",)))

    def status() -> dict:
        obj = json.loads(gateway.kubectl("get", "validatingadmissionpolicy", name, "-o",
                                         "json").stdout)
        return obj.get("status") or {}

    eventually(lambda: status().get("observedGeneration") == 1, what="the policy's status")
    warnings = status()["typeChecking"]["expressionWarnings"]
    assert warnings == [
        {"fieldRef": "spec.validations[0].expression",
         "warning": f"{DEMO}/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field "
                    "'replicas'\n | object.replicas > 1\n | ......^\n"},
        {"fieldRef": "spec.validations[1].messageExpression",
         "warning": f"{DEMO}/v1, Kind=Deployment: ERROR: <input>:1:14: found no matching "
                    "overload for '_+_' applied to '(string, int)'\n"
                    " | 'replicas: ' + object.spec.replicas\n | .............^\n"},
    ], warnings
    # as kubectl shows it
    out = gateway.kubectl("get", "validatingadmissionpolicy", name, "-o",
                          "jsonpath={.status.typeChecking.expressionWarnings[0].warning}")
    assert "undefined field 'replicas'" in out.stdout


# -- the CEL environment ------------------------------------------------------------------------


def test_variables_match_conditions_and_request(api, make, ns):
    name, bind = f"vars-{uid()}", f"vars-b-{uid()}"
    make(POLICIES, policy(name, [
        {"expression": "variables.keys <= variables.limit",
         "messageExpression": "'at most ' + string(variables.limit) + ' keys, got ' + "
                              "string(variables.keys) + ' (' + request.operation + ')'"},
        {"expression": "quantity(object.data.?size.orValue('0')).isLessThan(quantity('1Gi'))",
         "message": "size must be below 1Gi"}],
        variables=[{"name": "keys", "expression": "size(object.data)"},
                   {"name": "limit", "expression": "2"}],
        matchConditions=[{"name": "skip-unlabelled", "expression":
                          "has(object.metadata.labels) && 'checked' in object.metadata.labels"}]))
    make(BINDINGS, binding(bind, name, namespace=ns))
    labels = {"checked": "yes"}
    message = denied(name, bind, "at most 2 keys, got 3 (CREATE)")
    expect_status(api.post(configmaps(ns), configmap("c", labels, a="1", b="2", c="3")), 422,
                  "Invalid", message=forbidden("configmaps", "c", message))
    message = denied(name, bind, "size must be below 1Gi")
    expect_status(api.post(configmaps(ns), configmap("c", labels, size="2Gi")), 422, "Invalid",
                  message=forbidden("configmaps", "c", message))
    assert api.post(configmaps(ns), configmap("c", labels, size="512Mi"))[0] == 201
    # the match condition: an unlabelled ConfigMap is not evaluated
    assert api.post(configmaps(ns), configmap("free", a="1", b="2", c="3"))[0] == 201
    message = denied(name, bind, "at most 2 keys, got 3 (UPDATE)")
    expect_status(api.patch(f"{configmaps(ns)}/c", {"data": {"a": "1", "b": "2"}},
                            "application/merge-patch+json"),
                  422, "Invalid", message=forbidden("configmaps", "c", message))


def test_authorizer_checks_are_answered_by_rbac(gateway, api, make, ns):
    """Only who may read Secrets in the namespace may create ConfigMaps there (bob may
    create ConfigMaps, not read Secrets); system:masters may."""
    gateway.kubectl("create", "role", "cm-writer", "-n", ns, "--verb=create,get",
                    "--resource=configmaps")
    gateway.kubectl("create", "rolebinding", "bob-cm-writer", "-n", ns, "--role=cm-writer",
                    "--user=bob")
    name, bind = f"authz-{uid()}", f"authz-b-{uid()}"
    make(POLICIES, policy(name, [{
        "expression": "authorizer.group('').resource('secrets')"
                      ".namespace(object.metadata.namespace).check('get').allowed()",
        "messageExpression": "'user ' + request.userInfo.username + ' may not read secrets "
                             "in ' + object.metadata.namespace",
        "reason": "Forbidden"}, {
        "expression": "authorizer.requestResource.check('create').allowed() && "
                      "!authorizer.serviceAccount(object.metadata.namespace, 'default')"
                      ".group('').resource('configmaps').check('create').allowed()",
        "message": "requestResource and serviceAccount checks"}]))
    make(BINDINGS, binding(bind, name, namespace=ns))
    code, body, _ = https(gateway, "POST", configmaps(ns), token=BOB,
                          body=configmap("from-bob", k="v"))
    message = denied(name, bind, f"user bob may not read secrets in {ns}")
    assert (code, body["reason"], body["message"]) == (
        403, "Forbidden", forbidden("configmaps", "from-bob", message)), body
    assert api.post(configmaps(ns), configmap("from-admin", k="v"))[0] == 201
    # once bob may read Secrets, bob may create ConfigMaps
    gateway.kubectl("create", "role", "secret-reader", "-n", ns, "--verb=get",
                    "--resource=secrets")
    gateway.kubectl("create", "rolebinding", "bob-secret-reader", "-n", ns,
                    "--role=secret-reader", "--user=bob")
    code, body, _ = https(gateway, "POST", configmaps(ns), token=BOB,
                          body=configmap("from-bob", k="v"))
    assert code == 201, body


# -- failures and misconfiguration ----------------------------------------------------------------


def test_failure_policy_decides_on_errors(api, make, ns):
    failing, ignoring = f"fail-{uid()}", f"ignore-{uid()}"
    expression = "object.data.missing == 'x'"
    make(POLICIES, policy(failing, [{"expression": expression}]))
    make(BINDINGS, binding(f"{failing}-b", failing, namespace=ns))
    message = denied(failing, f"{failing}-b",
                     f"expression '{expression}' resulted in error: no such key: missing")
    expect_status(api.post(configmaps(ns), configmap("c", k="v")), 422, "Invalid",
                  message=forbidden("configmaps", "c", message))
    api.delete(f"{BINDINGS}/{failing}-b")
    make(POLICIES, policy(ignoring, [{"expression": expression}], failurePolicy="Ignore"))
    make(BINDINGS, binding(f"{ignoring}-b", ignoring, namespace=ns))
    assert api.post(configmaps(ns), configmap("c", k="v"))[0] == 201


def test_params_by_selector_each_evaluated(api, make, ns):
    name, bind = f"selected-{uid()}", f"selected-b-{uid()}"
    for limit_name, limit in (("limit-a", "5"), ("limit-b", "2"), ("unselected", "0")):
        labels = {"policy": name} if limit_name != "unselected" else None
        make(configmaps(ns), configmap(limit_name, labels, max=limit))
    make(POLICIES, policy(name, [{
        "expression": "object.spec.replicas <= int(params.data.max)",
        "messageExpression": "'replicas over the limit of ' + params.metadata.name"}],
        group=DEMO, resources=("deployments",),
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"}))
    make(BINDINGS, binding(bind, name, namespace=ns, paramRef={
        "selector": {"matchLabels": {"policy": name}}, "parameterNotFoundAction": "Deny"}))
    assert api.post(deployments(ns), deployment("two", 2))[0] == 201
    message = denied(name, bind, "replicas over the limit of limit-b")
    expect_status(api.post(deployments(ns), deployment("three", 3)), 422, "Invalid",
                  message=forbidden(f"deployments.{DEMO}", "three", message))


def test_parameter_not_found_action(api, make, ns):
    name = f"missing-param-{uid()}"
    make(POLICIES, policy(name, [{"expression": "object.data.k == params.data.k"}],
                          paramKind={"apiVersion": "v1", "kind": "ConfigMap"}))
    make(BINDINGS, binding(f"{name}-deny", name, namespace=ns, paramRef={
        "name": "nowhere", "parameterNotFoundAction": "Deny"}))
    message = (f"ValidatingAdmissionPolicy '{name}' with binding '{name}-deny' denied "
               "request: failed to configure binding: no params found for policy binding "
               "with `Deny` parameterNotFoundAction")
    expect_status(api.post(configmaps(ns), configmap("c", k="v")), 422, "Invalid",
                  message=forbidden("configmaps", "c", message))
    api.delete(f"{BINDINGS}/{name}-deny")
    make(BINDINGS, binding(f"{name}-allow", name, namespace=ns, paramRef={
        "name": "nowhere", "parameterNotFoundAction": "Allow"}))
    assert api.post(configmaps(ns), configmap("c", k="v"))[0] == 201


def test_param_kind_that_is_not_served(api, make, ns):
    name = f"unknown-kind-{uid()}"
    make(POLICIES, policy(name, [{"expression": "true"}],
                          paramKind={"apiVersion": "nope.example.com/v1", "kind": "Nope"}))
    make(BINDINGS, binding(f"{name}-b", name, namespace=ns, paramRef={
        "name": "x", "parameterNotFoundAction": "Allow"}))
    message = (f"ValidatingAdmissionPolicy '{name}' denied request: failed to configure "
               "policy: failed to find resource referenced by paramKind: "
               "'nope.example.com/v1, Kind=Nope'")
    expect_status(api.post(configmaps(ns), configmap("c", k="v")), 422, "Invalid",
                  message=forbidden("configmaps", "c", message))


def test_equivalent_version_sees_the_converted_object(api, make, ns):
    """matchPolicy Equivalent: a policy naming v1beta1 judges a v1 request at v1beta1."""
    name, bind = f"equivalent-{uid()}", f"equivalent-b-{uid()}"
    make(POLICIES, policy(name, [{
        "expression": "object.apiVersion.endsWith('/v1beta1') && request.kind.version == "
                      "'v1beta1' && request.requestKind.version == 'v1' && "
                      "object.spec.replicas < 10",
        "message": "judged at v1beta1"}], group=DEMO, resources=("deployments",),
        versions=("v1beta1",)))
    make(BINDINGS, binding(bind, name, namespace=ns))
    assert api.post(deployments(ns), deployment("ok", 1))[0] == 201
    message = denied(name, bind, "judged at v1beta1")
    expect_status(api.post(deployments(ns), deployment("many", 12)), 422, "Invalid",
                  message=forbidden(f"deployments.{DEMO}", "many", message))


def test_policies_do_not_judge_policies(api, make):
    """A policy matching everything does not apply to policies and bindings themselves."""
    name = f"everything-{uid()}"
    make(POLICIES, {**policy(name, [{"expression": "false"}]), "spec": {
        "failurePolicy": "Fail", "validations": [{"expression": "false"}],
        "matchConstraints": {"resourceRules": [{
            "apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["*"],
            "operations": ["*"], "resources": ["*"]}]}}})
    make(BINDINGS, binding(f"{name}-b", name))
    make(POLICIES, policy(f"another-{uid()}", [{"expression": "true"}]))
    make(BINDINGS, binding(f"another-b-{uid()}", name))
