"""Admission webhooks called on writes: a real HTTPS webhook server, reached as a Service (the
gateway's own Endpoints, --enable-aggregator-routing) or by URL, driven by kubectl and raw
HTTPS as kube-apiserver's webhook admission is."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import API, CM, configmap, expect_status
from tests.support.gateway import GatewayProcess, free_port
from tests.support.webhook import WebhookServer

GROUP = "admissionregistration.k8s.io"
VALIDATING = f"/apis/{GROUP}/v1/validatingwebhookconfigurations"
MUTATING = f"/apis/{GROUP}/v1/mutatingwebhookconfigurations"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(tmp_path_factory.mktemp("gateway"), "--enable-aggregator-routing")
    with proc:
        yield proc


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory, api: API) -> Iterator[WebhookServer]:
    """The webhook server, published as Service webhooks/hooks with Endpoints 127.0.0.1."""
    with WebhookServer(tmp_path_factory.mktemp("webhook")) as server:
        code, body = api.post("/api/v1/namespaces", {"metadata": {"name": "webhooks"}})
        assert code == 201, body
        code, body = api.post("/api/v1/namespaces/webhooks/services", {
            "metadata": {"name": "hooks"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}})
        assert code == 201, body
        code, body = api.post("/api/v1/namespaces/webhooks/endpoints", {
            "metadata": {"name": "hooks"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                         "ports": [{"name": "https", "port": server.port}]}]})
        assert code == 201, body
        yield server


@pytest.fixture
def configure(api: API, hooks: WebhookServer) -> Iterator:
    """Create a webhook configuration; every one made is deleted after the test."""
    made: list[str] = []

    def create(kind: str, namespace: str, *webhooks: dict) -> dict:
        collection = VALIDATING if kind == "validating" else MUTATING
        name = f"{kind}-{uuid.uuid4().hex[:8]}"
        for webhook in webhooks:
            webhook.setdefault("namespaceSelector", {"matchLabels": {"hooked": namespace}})
        code, body = api.post(collection, {"metadata": {"name": name},
                                           "webhooks": list(webhooks)})
        assert code == 201, body
        made.append(f"{collection}/{name}")
        return body

    hooks.clear()
    yield create
    for path in made:
        api.delete(path)


def webhook(hooks: WebhookServer, path: str, name: str = "check.webhooks.test", *,
            operations: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE"),
            resources: tuple[str, ...] = ("configmaps",), **extra) -> dict:
    """A webhook reached through the Service, unless ``clientConfig`` says otherwise."""
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "webhooks", "name": "hooks",
                                         "path": path}, "caBundle": hooks.ca_bundle},
            "rules": [{"operations": list(operations), "apiGroups": [""],
                       "apiVersions": ["v1"], "resources": list(resources)}], **extra}


def denied(webhook_name: str, why: str = "no thanks") -> str:
    """kube's message for a webhook's denial (webhookerrors.ToStatusErr)."""
    return f'admission webhook "{webhook_name}" denied the request: {why}'


def called(server: WebhookServer, path: str) -> list[tuple[str, str, str]]:
    """(operation, resource, name) of each review ``path`` received."""
    return [(r["request"]["operation"], r["request"]["resource"]["resource"],
             r["request"]["name"]) for r in server.received(path)]


# -- validating ---------------------------------------------------------------------------------


def test_validating_webhook_denies_and_nothing_is_stored(api, hooks, configure, hooked_ns,
                                                           gateway, tmp_path: Path):
    path = CM.format(ns=hooked_ns)
    configure("validating", hooked_ns, webhook(hooks, "/deny", "deny.webhooks.test",
                                               objectSelector={"matchLabels": {"guard": "on"}}))
    status = expect_status(api.post(path, configmap("guarded", {"guard": "on"}, k="v")),
                           403, "Forbidden", message=denied("deny.webhooks.test"))
    # the webhook's own status, as it sent it (kube omits the absent details; the gateway
    # sends "details": {})
    assert not status.get("details"), status
    assert api.get(f"{path}/guarded")[0] == 404
    # the object selector: an unlabelled object is not sent
    assert api.post(path, configmap("free", k="v"))[0] == 201
    assert called(hooks, "/deny") == [("CREATE", "configmaps", "guarded")]
    # as kubectl shows it
    result = gateway.kubectl("create", "configmap", "x", "-n", hooked_ns, "--dry-run=client",
                             "-o", "yaml")
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(result.stdout.replace("metadata:\n", "metadata:\n  labels:\n"
                                              "    guard: \"on\"\n", 1))
    refused = gateway.kubectl("apply", "-f", str(manifest), check=False)
    assert refused.returncode != 0
    assert denied("deny.webhooks.test") in refused.stderr
    assert api.get(f"{path}/x")[0] == 404


def test_denial_without_a_status_is_400(api, hooks, configure, hooked_ns):
    configure("validating", hooked_ns, webhook(hooks, "/deny-plain", "plain.webhooks.test"))
    code, status = api.post(CM.format(ns=hooked_ns), configmap("c", k="v"))
    # kube (webhookerrors.ToStatusErr): code 400, no reason, this message
    assert (code, status["kind"], status["code"], status["status"]) == (
        400, "Status", 400, "Failure"), status
    assert status.get("reason", "") == "", status
    assert status["message"] == 'admission webhook "plain.webhooks.test" denied the request ' \
                                "without explanation"
    assert api.get(f"{CM.format(ns=hooked_ns)}/c")[0] == 404


def test_review_carries_the_request(api, hooks, configure, hooked_ns):
    configure("validating", hooked_ns, webhook(hooks, "/allow"))
    path = CM.format(ns=hooked_ns)
    assert api.post(f"{path}?fieldManager=tester", configmap("seen", k="v"))[0] == 201
    _, current = api.get(f"{path}/seen")
    current["data"] = {"k": "changed"}
    assert api.put(f"{path}/seen", current)[0] == 200
    assert api.delete(f"{path}/seen")[0] == 200
    assert api.post(f"{path}?dryRun=All", configmap("dry", k="v"))[0] == 201
    assert api.get(f"{path}/dry")[0] == 404
    create, update, delete, dry = hooks.received("/allow")
    assert create["apiVersion"] == "admission.k8s.io/v1"
    assert create["kind"] == "AdmissionReview"
    assert create["query"] == {"timeout": "10s"}
    request = create["request"]
    assert request["operation"] == "CREATE"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert (request["namespace"], request["name"]) == (hooked_ns, "seen")
    assert request["userInfo"]["username"] == "admin"
    assert "system:masters" in request["userInfo"]["groups"]
    assert request["object"]["data"] == {"k": "v"}
    assert request["object"]["metadata"]["uid"]
    assert request["oldObject"] is None
    assert request["dryRun"] is False
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                                  "fieldManager": "tester"}
    assert update["request"]["operation"] == "UPDATE"
    assert update["request"]["object"]["data"] == {"k": "changed"}
    assert update["request"]["oldObject"]["data"] == {"k": "v"}
    assert update["request"]["options"]["kind"] == "UpdateOptions"
    assert delete["request"]["operation"] == "DELETE"
    assert delete["request"]["object"] is None
    assert delete["request"]["oldObject"]["data"] == {"k": "changed"}
    assert delete["request"]["options"]["kind"] == "DeleteOptions"
    assert dry["request"]["dryRun"] is True
    assert dry["request"]["options"]["dryRun"] == ["All"]
    assert len({r["request"]["uid"] for r in (create, update, delete, dry)}) == 4


def test_delete_denied_keeps_the_object(api, hooks, configure, hooked_ns):
    path = CM.format(ns=hooked_ns)
    assert api.post(path, configmap("kept", k="v"))[0] == 201
    configure("validating", hooked_ns, webhook(hooks, "/deny", operations=("DELETE",)))
    expect_status(api.delete(f"{path}/kept"), 403, "Forbidden",
                  message=denied("check.webhooks.test"))
    code, kept = api.get(f"{path}/kept")
    assert code == 200 and "deletionTimestamp" not in kept["metadata"]
    assert called(hooks, "/deny") == [("DELETE", "configmaps", "kept")]


def test_warnings_reach_kubectl(hooks, configure, hooked_ns, gateway):
    configure("validating", hooked_ns, webhook(hooks, "/warn"))
    result = gateway.kubectl("create", "configmap", "warned", "-n", hooked_ns)
    assert "Warning: configmaps are watched here" in result.stderr


def test_token_requests_are_admitted(api, hooks, configure, hooked_ns, gateway):
    assert api.post(f"/api/v1/namespaces/{hooked_ns}/serviceaccounts",
                    {"metadata": {"name": "robot"}})[0] == 201
    configure("validating", hooked_ns, webhook(hooks, "/deny", operations=("CREATE",),
                                               resources=("serviceaccounts/token",)))
    result = gateway.kubectl("create", "token", "robot", "-n", hooked_ns, check=False)
    assert result.returncode != 0
    assert denied("check.webhooks.test") in result.stderr
    (review,) = hooks.received("/deny")
    request = review["request"]
    assert request["kind"] == {"group": "authentication.k8s.io", "version": "v1",
                               "kind": "TokenRequest"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "serviceaccounts"}
    assert (request["subResource"], request["name"], request["namespace"]) == (
        "token", "robot", hooked_ns)
    assert request["object"]["kind"] == "TokenRequest"
    assert "token" not in (request["object"].get("status") or {})


# -- mutating ----------------------------------------------------------------------------------


def test_mutating_webhook_patches_the_object(api, hooks, configure, hooked_ns, gateway):
    path = CM.format(ns=hooked_ns)
    configure("mutating", hooked_ns, webhook(hooks, "/mutate", "mutate.webhooks.test"))
    code, made = api.post(path, configmap("m", k="v"))
    assert code == 201, made
    assert made["metadata"]["labels"] == {"mutated": "yes"}
    assert api.get(f"{path}/m")[1]["metadata"]["labels"] == {"mutated": "yes"}
    # the change is the request's manager's
    fields = made["metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:mutated" in fields["f:metadata"]["f:labels"]
    # an update is mutated too, and the webhook sees the update as sent
    gateway.kubectl("label", "configmap", "m", "-n", hooked_ns, "extra=1")
    labels = api.get(f"{path}/m")[1]["metadata"]["labels"]
    assert labels == {"mutated": "yes", "extra": "1"}
    update = hooks.received("/mutate")[-1]["request"]
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["metadata"]["labels"] == {"mutated": "yes"}
    assert update["object"]["metadata"]["labels"] == {"mutated": "yes", "extra": "1"}


def test_mutating_then_validating_sees_the_mutation(api, hooks, configure, hooked_ns):
    configure("mutating", hooked_ns, webhook(hooks, "/mutate", "mutate.webhooks.test"))
    configure("validating", hooked_ns, webhook(hooks, "/allow"))
    assert api.post(CM.format(ns=hooked_ns), configmap("both", k="v"))[0] == 201
    (validated,) = hooks.received("/allow")
    assert validated["request"]["object"]["metadata"]["labels"] == {"mutated": "yes"}


@pytest.mark.parametrize("policy, seen, calls", [
    ("Never", "", 1),
    ("IfNeeded", "mutated", 2),
])
def test_reinvocation_policy(api, hooks, configure, hooked_ns, policy, seen, calls):
    # the first webhook records the labels it saw; the second adds one after it
    configure("mutating", hooked_ns,
              webhook(hooks, "/record-labels", "record.webhooks.test",
                      reinvocationPolicy=policy),
              webhook(hooks, "/mutate", "mutate.webhooks.test"))
    code, made = api.post(CM.format(ns=hooked_ns), configmap("again", k="v"))
    assert code == 201, made
    assert made["metadata"]["annotations"] == {"labels-seen": seen}
    assert len(hooks.received("/record-labels")) == calls


def test_mutation_is_validated_again(api, hooks, configure, hooked_ns):
    path = CM.format(ns=hooked_ns)
    configure("mutating", hooked_ns, webhook(hooks, "/mutate-invalid", "bad.webhooks.test"))
    key = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
           "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
           "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    status = expect_status(api.post(path, configmap("checked", k="v")), 422, "Invalid")
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid",
                                            "message": f'Invalid value: "bad key!": {key}',
                                            "field": "metadata.labels"}]
    assert status["message"].endswith(
        f' is invalid: metadata.labels: Invalid value: "bad key!": {key}')
    assert api.get(f"{path}/checked")[0] == 404
    assert api.get(f"{path}/renamed")[0] == 404


# -- which requests are sent --------------------------------------------------------------------


def test_rules_choose_operations_and_resources(api, hooks, configure, hooked_ns):
    configure("validating", hooked_ns,
              webhook(hooks, "/allow", "create-only.webhooks.test", operations=("CREATE",)),
              webhook(hooks, "/deny", "secrets-only.webhooks.test", resources=("secrets",)),
              webhook(hooks, "/deny", "status-only.webhooks.test", resources=("*/status",)))
    path = CM.format(ns=hooked_ns)
    assert api.post(path, configmap("r", k="v"))[0] == 201
    current = api.get(f"{path}/r")[1]
    current["data"] = {"k": "again"}
    assert api.put(f"{path}/r", current)[0] == 200
    assert called(hooks, "/allow") == [("CREATE", "configmaps", "r")]
    assert called(hooks, "/deny") == []
    expect_status(api.post(f"/api/v1/namespaces/{hooked_ns}/secrets",
                           {"metadata": {"name": "s"}}), 403, "Forbidden",
                  message=denied("secrets-only.webhooks.test"))
    assert called(hooks, "/deny") == [("CREATE", "secrets", "s")]


def test_namespace_selector(api, hooks, configure, hooked_ns):
    configure("validating", hooked_ns, webhook(hooks, "/deny"))
    other = api.namespace()
    assert api.post(CM.format(ns=other), configmap("elsewhere", k="v"))[0] == 201
    expect_status(api.post(CM.format(ns=hooked_ns), configmap("here", k="v")), 403,
                  "Forbidden", message=denied("check.webhooks.test"))
    assert [r["request"]["namespace"] for r in hooks.received("/deny")] == [hooked_ns]


def test_cluster_scope_rule(api, hooks, configure, hooked_ns):
    cluster_only = webhook(hooks, "/deny", namespaceSelector={},
                           objectSelector={"matchLabels": {"scope-test": hooked_ns}})
    cluster_only["rules"] = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["configmaps", "namespaces"], "scope": "Cluster"}]
    configure("validating", hooked_ns, cluster_only)
    marked = {"scope-test": hooked_ns}
    assert api.post(CM.format(ns=hooked_ns), configmap("namespaced", marked, k="v"))[0] == 201
    expect_status(api.post("/api/v1/namespaces", {"metadata": {
        "name": f"{hooked_ns}-x", "labels": marked}}), 403, "Forbidden",
        message=denied("check.webhooks.test"))
    assert called(hooks, "/deny") == [("CREATE", "namespaces", f"{hooked_ns}-x")]


def test_match_conditions(api, hooks, configure, hooked_ns):
    configure("validating", hooked_ns, webhook(hooks, "/deny", matchConditions=[
        {"name": "named-checked", "expression": 'object.metadata.name.startsWith("checked-")'},
        {"name": "on-create", "expression": 'request.operation == "CREATE"'},
    ]))
    path = CM.format(ns=hooked_ns)
    expect_status(api.post(path, configmap("checked-1", k="v")), 403, "Forbidden",
                  message=denied("check.webhooks.test"))
    assert api.post(path, configmap("other", k="v"))[0] == 201
    assert called(hooks, "/deny") == [("CREATE", "configmaps", "checked-1")]


def test_match_conditions_ask_the_authorizer(api, hooks, configure, hooked_ns, gateway):
    """The webhook is called only for namespaces whose default ServiceAccount may create
    ConfigMaps there, as the gateway's RBAC says; a condition that errs is worded as kube's."""
    configure("validating", hooked_ns, webhook(hooks, "/deny", matchConditions=[{
        "name": "sa-may-write",
        "expression": "authorizer.serviceAccount(object.metadata.namespace, 'default')"
                      ".group('').resource('configmaps').namespace(object.metadata.namespace)"
                      ".check('create').allowed()"}]))
    path = CM.format(ns=hooked_ns)
    assert api.post(path, configmap("before", k="v"))[0] == 201
    assert hooks.received("/deny") == []
    gateway.kubectl("create", "rolebinding", "sa-edit", "-n", hooked_ns, "--clusterrole=edit",
                    f"--serviceaccount={hooked_ns}:default")
    expect_status(api.post(path, configmap("after", k="v")), 403, "Forbidden",
                  message=denied("check.webhooks.test"))
    assert called(hooks, "/deny") == [("CREATE", "configmaps", "after")]


@pytest.mark.parametrize("policy, expected", [("Fail", 500), ("Ignore", 201)])
def test_match_condition_errors_follow_the_failure_policy(api, hooks, configure, hooked_ns,
                                                          policy, expected):
    configure("validating", hooked_ns, webhook(hooks, "/deny", failurePolicy=policy,
                                               matchConditions=[{
                                                   "name": "needs-data-x",
                                                   "expression": 'object.data.x == "1"'}]))
    answer = api.post(CM.format(ns=hooked_ns), configmap("no-x", k="v"))
    if expected == 500:
        expect_status(answer, 500, "InternalError", message=(
            'Internal error occurred: failed calling webhook "check.webhooks.test": failed '
            "evaluating match conditions: expression 'object.data.x == \"1\"' resulted in "
            "error: no such key: x"))
    else:
        assert answer[0] == 201, answer
    assert hooks.received("/deny") == []


def test_match_condition_that_does_not_compile_is_invalid(api, hooks):
    broken = webhook(hooks, "/allow", matchConditions=[
        {"name": "broken", "expression": "object.metadata.("}])
    status = expect_status(api.post(VALIDATING, {"metadata": {"name": "broken-condition"},
                                                 "webhooks": [broken]}), 422, "Invalid")
    (cause,) = status["details"]["causes"]
    assert (cause["field"], cause["reason"]) == ("webhooks[0].matchConditions[0].expression",
                                                 "FieldValueInvalid")
    assert cause["message"].startswith('Invalid value: "object.metadata.(": compilation failed')
    assert api.get(f"{VALIDATING}/broken-condition")[0] == 404


# -- failures -----------------------------------------------------------------------------------


def failed_calling(webhook_name: str) -> str:
    """How kube's message for a webhook it could not use begins (a 500, InternalError)."""
    return f'Internal error occurred: failed calling webhook "{webhook_name}": '


def test_failure_policy(api, hooks, configure, hooked_ns):
    path = CM.format(ns=hooked_ns)
    down = {"url": f"https://127.0.0.1:{free_port()}/allow", "caBundle": hooks.ca_bundle}
    configure("validating", hooked_ns, webhook(hooks, "", "down.webhooks.test", clientConfig=down,
                                               failurePolicy="Ignore"))
    assert api.post(path, configmap("ignored", k="v"))[0] == 201
    configure("validating", hooked_ns, webhook(hooks, "", "down-fail.webhooks.test",
                                               clientConfig=down))
    status = expect_status(api.post(path, configmap("failed", k="v")), 500, "InternalError")
    assert status["message"].startswith(
        f'{failed_calling("down-fail.webhooks.test")}failed to call webhook: Post "'
        f'{down["url"]}?timeout=10s": ')
    assert api.get(f"{path}/failed")[0] == 404


def test_url_client_config_and_timeout(api, hooks, configure, hooked_ns):
    path = CM.format(ns=hooked_ns)
    by_url = {"url": f"https://localhost:{hooks.port}/allow", "caBundle": hooks.ca_bundle}
    configure("validating", hooked_ns, webhook(hooks, "", "url.webhooks.test",
                                               clientConfig=by_url))
    assert api.post(path, configmap("by-url", k="v"))[0] == 201
    assert called(hooks, "/allow") == [("CREATE", "configmaps", "by-url")]
    slow = {"url": f"https://localhost:{hooks.port}/slow", "caBundle": hooks.ca_bundle}
    configure("validating", hooked_ns, webhook(hooks, "", "slow.webhooks.test", clientConfig=slow,
                                               timeoutSeconds=1))
    status = expect_status(api.post(path, configmap("too-slow", k="v")), 500, "InternalError")
    assert status["message"] == (f'{failed_calling("slow.webhooks.test")}failed to call '
                                 f'webhook: Post "{slow["url"]}?timeout=1s": context deadline '
                                 "exceeded")
    assert hooks.received("/slow")[0]["query"] == {"timeout": "1s"}
    assert api.get(f"{path}/too-slow")[0] == 404


@pytest.mark.parametrize("path, expected", [
    ("/bad-uid", 'expected response.uid='),
    ("/validating-patch", "validating webhooks may not return patches"),
])
def test_bad_responses_fail_the_write(api, hooks, configure, hooked_ns, path, expected):
    configure("validating", hooked_ns, webhook(hooks, path, "odd.webhooks.test"))
    status = expect_status(api.post(CM.format(ns=hooked_ns), configmap("odd", k="v")),
                           500, "InternalError")
    assert status["message"].startswith(failed_calling("odd.webhooks.test"))
    assert expected in status["message"]
    assert api.get(f"{CM.format(ns=hooked_ns)}/odd")[0] == 404


def test_untrusted_certificate_fails(api, hooks, configure, hooked_ns):
    other_ca = webhook(hooks, "/allow", "untrusted.webhooks.test")
    del other_ca["clientConfig"]["caBundle"]  # the system's roots do not know our CA
    configure("validating", hooked_ns, other_ca)
    status = expect_status(api.post(CM.format(ns=hooked_ns), configmap("untrusted", k="v")),
                           500, "InternalError")
    # kube's TLS error is Go's ("x509: certificate signed by unknown authority")
    assert status["message"].startswith(failed_calling("untrusted.webhooks.test"))
    assert status["message"].endswith("tls: failed to verify certificate: x509: certificate "
                                      "signed by unknown authority")
    assert hooks.received("/allow") == []


def test_missing_service_fails(api, hooks, configure, hooked_ns):
    missing = webhook(hooks, "/allow", "missing.webhooks.test")
    missing["clientConfig"]["service"]["name"] = "nobody"
    configure("validating", hooked_ns, missing)
    status = expect_status(api.post(CM.format(ns=hooked_ns), configmap("unrouted", k="v")),
                           500, "InternalError")
    # kube resolves the Service when it dials: a dial error of the URL it built
    assert status["message"] == (f'{failed_calling("missing.webhooks.test")}failed to call '
                                 'webhook: Post "https://nobody.webhooks.svc:443/allow?timeout'
                                 '=10s": service "nobody" not found')


def test_webhook_configurations_are_never_sent_to_webhooks(api, hooks, hooked_ns):
    everything = webhook(hooks, "/deny", "everything.webhooks.test", namespaceSelector={})
    everything["rules"] = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                            "resources": ["*/*"]}]
    name = f"everything-{hooked_ns}"
    code, body = api.post(VALIDATING, {"metadata": {"name": name}, "webhooks": [everything]})
    assert code == 201, body
    try:
        expect_status(api.post(CM.format(ns=hooked_ns), configmap("blocked", k="v")), 403,
                      "Forbidden", message=denied("everything.webhooks.test"))
    finally:
        code, body = api.delete(f"{VALIDATING}/{name}")
    assert code == 200, body
    assert api.post(CM.format(ns=hooked_ns), configmap("unblocked", k="v"))[0] == 201
    sent = {r["request"]["resource"]["resource"] for r in hooks.received("/deny")}
    assert "configmaps" in sent
    assert not sent & {"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, sent


def test_a_webhook_scoped_by_the_namespace_name_label_is_called(api, hooks, gateway):
    """The common idiom: a failurePolicy Fail webhook scoped to one namespace by
    kubernetes.io/metadata.name (which the gateway sets on every namespace) is called there,
    and only there, when kubectl writes."""
    team = f"team-{uuid.uuid4().hex[:6]}"
    gateway.kubectl("create", "namespace", team)
    api.wait_for_defaults(team)  # the root CA is published there before the webhook comes
    other = api.namespace()
    hook = webhook(hooks, "/deny", "team.webhooks.test", failurePolicy="Fail",
                   namespaceSelector={"matchExpressions": [{
                       "key": "kubernetes.io/metadata.name", "operator": "In",
                       "values": [team]}]})
    config = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": f"team-{team}"}, "webhooks": [hook]}
    gateway.kubectl("apply", "-f", "-", input=json.dumps(config))
    try:
        hooks.clear()
        refused = gateway.kubectl("create", "configmap", "c", "-n", team, check=False)
        assert refused.returncode == 1
        assert denied("team.webhooks.test") in refused.stderr, refused.stderr
        assert gateway.kubectl("create", "configmap", "c", "-n", other).returncode == 0
        assert [r["request"]["namespace"] for r in hooks.received("/deny")] == [team]
    finally:
        gateway.kubectl("delete", "validatingwebhookconfiguration", f"team-{team}")
