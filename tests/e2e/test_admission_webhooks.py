"""Admission webhooks called on writes: a real HTTPS webhook server, reached as a Service (the
gateway's own Endpoints, --enable-aggregator-routing) or by URL, driven by kubectl and raw
HTTPS as kube-apiserver's webhook admission is."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import API, CM
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
def hooks(tmp_path_factory: pytest.TempPathFactory, gateway: GatewayProcess) -> Iterator[
        WebhookServer]:
    """The webhook server, published as Service webhooks/hooks with Endpoints 127.0.0.1."""
    with WebhookServer(tmp_path_factory.mktemp("webhook")) as server:
        api = API(gateway)
        api.post("/api/v1/namespaces", {"metadata": {"name": "webhooks"}})
        api.post("/api/v1/namespaces/webhooks/services", {
            "metadata": {"name": "hooks"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}})
        code, body = api.post("/api/v1/namespaces/webhooks/endpoints", {
            "metadata": {"name": "hooks"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                         "ports": [{"name": "https", "port": server.port}]}]})
        assert code == 201, body
        yield server


@pytest.fixture(scope="module")
def api(gateway: GatewayProcess) -> API:
    return API(gateway)


@pytest.fixture
def ns(api: API) -> str:
    """A namespace of the test's own, labelled so that only its webhooks see it."""
    name = f"wh-{uuid.uuid4().hex[:8]}"
    code, body = api.post("/api/v1/namespaces", {"metadata": {"name": name,
                                                               "labels": {"hooked": name}}})
    assert code == 201, body
    return name


@pytest.fixture
def configure(api: API, hooks: WebhookServer) -> Iterator:
    """Create a webhook configuration; every one made is deleted after the test."""
    made: list[str] = []

    def create(kind: str, ns: str, *webhooks: dict) -> dict:
        collection = VALIDATING if kind == "validating" else MUTATING
        name = f"{kind}-{uuid.uuid4().hex[:8]}"
        for webhook in webhooks:
            webhook.setdefault("namespaceSelector", {"matchLabels": {"hooked": ns}})
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


def cm(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


# -- validating ---------------------------------------------------------------------------------


def test_validating_webhook_denies_and_nothing_is_stored(api, hooks, configure, ns, gateway,
                                                           tmp_path: Path):
    configure("validating", ns, webhook(hooks, "/deny", "deny.webhooks.test",
                                        objectSelector={"matchLabels": {"guard": "on"}}))
    code, status = api.post(CM.format(ns=ns), cm("guarded", guard="on"))
    assert code == 403, status
    assert status["reason"] == "Forbidden"
    assert status["message"] == 'admission webhook "deny.webhooks.test" denied the request: ' \
                                "no thanks"
    assert api.get(f"{CM.format(ns=ns)}/guarded")[0] == 404
    # the object selector: an unlabelled object is not sent
    assert api.post(CM.format(ns=ns), cm("free"))[0] == 201
    assert len(hooks.received("/deny")) == 1
    # as kubectl shows it
    result = gateway.kubectl("create", "configmap", "x", "-n", ns, "--dry-run=client", "-o",
                             "yaml")
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(result.stdout.replace("metadata:\n", "metadata:\n  labels:\n"
                                              "    guard: \"on\"\n", 1))
    denied = gateway.kubectl("apply", "-f", str(manifest), check=False)
    assert denied.returncode != 0
    assert 'admission webhook "deny.webhooks.test" denied the request: no thanks' in \
        denied.stderr


def test_denial_without_a_status_is_400(api, hooks, configure, ns):
    configure("validating", ns, webhook(hooks, "/deny-plain", "plain.webhooks.test"))
    code, status = api.post(CM.format(ns=ns), cm("c"))
    assert code == 400
    assert status["message"] == 'admission webhook "plain.webhooks.test" denied the request ' \
                                "without explanation"


def test_review_carries_the_request(api, hooks, configure, ns):
    configure("validating", ns, webhook(hooks, "/allow"))
    path = CM.format(ns=ns)
    assert api.post(f"{path}?fieldManager=tester", cm("seen"))[0] == 201
    _, current = api.get(f"{path}/seen")
    current["data"] = {"k": "changed"}
    assert api.put(f"{path}/seen", current)[0] == 200
    assert api.delete(f"{path}/seen")[0] == 200
    assert api.post(f"{path}?dryRun=All", cm("dry"))[0] == 201
    assert api.get(f"{path}/dry")[0] == 404
    create, update, delete, dry = hooks.received("/allow")
    assert create["apiVersion"] == "admission.k8s.io/v1"
    assert create["kind"] == "AdmissionReview"
    assert create["query"] == {"timeout": "10s"}
    request = create["request"]
    assert request["operation"] == "CREATE"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert (request["namespace"], request["name"]) == (ns, "seen")
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


def test_delete_denied_keeps_the_object(api, hooks, configure, ns):
    path = CM.format(ns=ns)
    assert api.post(path, cm("kept"))[0] == 201
    configure("validating", ns, webhook(hooks, "/deny", operations=("DELETE",)))
    assert api.delete(f"{path}/kept")[0] == 403
    assert api.get(f"{path}/kept")[0] == 200


def test_warnings_reach_kubectl(hooks, configure, ns, gateway):
    configure("validating", ns, webhook(hooks, "/warn"))
    result = gateway.kubectl("create", "configmap", "warned", "-n", ns)
    assert "Warning: configmaps are watched here" in result.stderr


def test_token_requests_are_admitted(api, hooks, configure, ns, gateway):
    assert api.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                    {"metadata": {"name": "robot"}})[0] == 201
    configure("validating", ns, webhook(hooks, "/deny", operations=("CREATE",),
                                        resources=("serviceaccounts/token",)))
    result = gateway.kubectl("create", "token", "robot", "-n", ns, check=False)
    assert result.returncode != 0
    assert 'admission webhook "check.webhooks.test" denied the request: no thanks' in \
        result.stderr
    (review,) = hooks.received("/deny")
    request = review["request"]
    assert request["kind"] == {"group": "authentication.k8s.io", "version": "v1",
                               "kind": "TokenRequest"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "serviceaccounts"}
    assert (request["subResource"], request["name"], request["namespace"]) == (
        "token", "robot", ns)
    assert request["object"]["kind"] == "TokenRequest"
    assert "token" not in (request["object"].get("status") or {})


# -- mutating ----------------------------------------------------------------------------------


def test_mutating_webhook_patches_the_object(api, hooks, configure, ns, gateway):
    configure("mutating", ns, webhook(hooks, "/mutate", "mutate.webhooks.test"))
    code, made = api.post(CM.format(ns=ns), cm("m"))
    assert code == 201, made
    assert made["metadata"]["labels"] == {"mutated": "yes"}
    assert api.get(f"{CM.format(ns=ns)}/m")[1]["metadata"]["labels"] == {"mutated": "yes"}
    # the change is the request's manager's
    fields = made["metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:mutated" in fields["f:metadata"]["f:labels"]
    # an update is mutated too, and the webhook sees the object before its patch
    gateway.kubectl("label", "configmap", "m", "-n", ns, "extra=1")
    labels = api.get(f"{CM.format(ns=ns)}/m")[1]["metadata"]["labels"]
    assert labels == {"mutated": "yes", "extra": "1"}
    update = hooks.received("/mutate")[-1]["request"]
    assert update["operation"] == "UPDATE"


def test_mutating_then_validating_sees_the_mutation(api, hooks, configure, ns):
    configure("mutating", ns, webhook(hooks, "/mutate", "mutate.webhooks.test"))
    configure("validating", ns, webhook(hooks, "/allow"))
    assert api.post(CM.format(ns=ns), cm("both"))[0] == 201
    (validated,) = hooks.received("/allow")
    assert validated["request"]["object"]["metadata"]["labels"] == {"mutated": "yes"}


@pytest.mark.parametrize("policy, seen, calls", [
    ("Never", "", 1),
    ("IfNeeded", "mutated", 2),
])
def test_reinvocation_policy(api, hooks, configure, ns, policy, seen, calls):
    # the first webhook records the labels it saw; the second adds one after it
    configure("mutating", ns,
              webhook(hooks, "/record-labels", "record.webhooks.test",
                      reinvocationPolicy=policy),
              webhook(hooks, "/mutate", "mutate.webhooks.test"))
    code, made = api.post(CM.format(ns=ns), cm("again"))
    assert code == 201, made
    assert made["metadata"]["annotations"] == {"labels-seen": seen}
    assert len(hooks.received("/record-labels")) == calls


def test_mutation_is_validated_again(api, hooks, configure, ns):
    configure("mutating", ns, webhook(hooks, "/mutate-invalid", "bad.webhooks.test"))
    code, status = api.post(CM.format(ns=ns), cm("checked"))
    assert code == 422, status
    assert status["reason"] == "Invalid"
    assert any(c["field"] == "metadata.labels" for c in status["details"]["causes"])
    assert api.get(f"{CM.format(ns=ns)}/checked")[0] == 404
    assert api.get(f"{CM.format(ns=ns)}/renamed")[0] == 404


# -- which requests are sent --------------------------------------------------------------------


def test_rules_choose_operations_and_resources(api, hooks, configure, ns):
    configure("validating", ns,
              webhook(hooks, "/allow", "create-only.webhooks.test", operations=("CREATE",)),
              webhook(hooks, "/deny", "secrets-only.webhooks.test", resources=("secrets",)),
              webhook(hooks, "/deny", "status-only.webhooks.test", resources=("*/status",)))
    path = CM.format(ns=ns)
    assert api.post(path, cm("r"))[0] == 201
    current = api.get(f"{path}/r")[1]
    current["data"] = {"k": "again"}
    assert api.put(f"{path}/r", current)[0] == 200
    assert [r["request"]["operation"] for r in hooks.received("/allow")] == ["CREATE"]
    assert hooks.received("/deny") == []
    code, _ = api.post(f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s"}})
    assert code == 403


def test_namespace_selector(api, hooks, configure, ns):
    configure("validating", ns, webhook(hooks, "/deny"))
    other = api.namespace()
    assert api.post(CM.format(ns=other), cm("elsewhere"))[0] == 201
    assert api.post(CM.format(ns=ns), cm("here"))[0] == 403


def test_cluster_scope_rule(api, hooks, configure, ns):
    cluster_only = webhook(hooks, "/deny", namespaceSelector={},
                           objectSelector={"matchLabels": {"scope-test": ns}})
    cluster_only["rules"] = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["configmaps", "namespaces"], "scope": "Cluster"}]
    configure("validating", ns, cluster_only)
    assert api.post(CM.format(ns=ns), cm("namespaced", **{"scope-test": ns}))[0] == 201
    code, _ = api.post("/api/v1/namespaces", {"metadata": {
        "name": f"{ns}-x", "labels": {"scope-test": ns}}})
    assert code == 403


def test_match_conditions(api, hooks, configure, ns):
    configure("validating", ns, webhook(hooks, "/deny", matchConditions=[
        {"name": "named-checked", "expression": 'object.metadata.name.startsWith("checked-")'},
        {"name": "on-create", "expression": 'request.operation == "CREATE"'},
    ]))
    assert api.post(CM.format(ns=ns), cm("checked-1"))[0] == 403
    assert api.post(CM.format(ns=ns), cm("other"))[0] == 201
    assert len(hooks.received("/deny")) == 1


@pytest.mark.parametrize("policy, expected", [("Fail", 500), ("Ignore", 201)])
def test_match_condition_errors_follow_the_failure_policy(api, hooks, configure, ns, policy,
                                                          expected):
    configure("validating", ns, webhook(hooks, "/deny", failurePolicy=policy, matchConditions=[
        {"name": "needs-data-x", "expression": 'object.data.x == "1"'}]))
    code, body = api.post(CM.format(ns=ns), cm("no-x"))
    assert code == expected, body
    if expected == 500:
        assert "failed evaluating match conditions" in body["message"]
    assert hooks.received("/deny") == []


def test_match_condition_that_does_not_compile_is_invalid(api, hooks):
    broken = webhook(hooks, "/allow", matchConditions=[
        {"name": "broken", "expression": "object.metadata.("}])
    code, status = api.post(VALIDATING, {"metadata": {"name": "broken-condition"},
                                         "webhooks": [broken]})
    assert code == 422
    (cause,) = status["details"]["causes"]
    assert cause["field"] == "webhooks[0].matchConditions[0].expression"
    assert "compilation failed" in cause["message"]


# -- failures -----------------------------------------------------------------------------------


def test_failure_policy(api, hooks, configure, ns):
    down = {"url": f"https://127.0.0.1:{free_port()}/allow", "caBundle": hooks.ca_bundle}
    configure("validating", ns, webhook(hooks, "", "down.webhooks.test", clientConfig=down,
                                        failurePolicy="Ignore"))
    assert api.post(CM.format(ns=ns), cm("ignored"))[0] == 201
    configure("validating", ns, webhook(hooks, "", "down-fail.webhooks.test",
                                        clientConfig=down))
    code, status = api.post(CM.format(ns=ns), cm("failed"))
    assert code == 500
    assert status["reason"] == "InternalError"
    assert status["message"].startswith(
        'Internal error occurred: failed calling webhook "down-fail.webhooks.test": '
        'failed to call webhook: Post "https://127.0.0.1:')
    assert api.get(f"{CM.format(ns=ns)}/failed")[0] == 404


def test_url_client_config_and_timeout(api, hooks, configure, ns):
    by_url = {"url": f"https://localhost:{hooks.port}/allow", "caBundle": hooks.ca_bundle}
    configure("validating", ns, webhook(hooks, "", "url.webhooks.test", clientConfig=by_url))
    assert api.post(CM.format(ns=ns), cm("by-url"))[0] == 201
    assert len(hooks.received("/allow")) == 1
    slow = {"url": f"https://localhost:{hooks.port}/slow", "caBundle": hooks.ca_bundle}
    configure("validating", ns, webhook(hooks, "", "slow.webhooks.test", clientConfig=slow,
                                        timeoutSeconds=1))
    code, status = api.post(CM.format(ns=ns), cm("too-slow"))
    assert code == 500
    assert "context deadline exceeded" in status["message"]
    assert hooks.received("/slow")[0]["query"] == {"timeout": "1s"}


@pytest.mark.parametrize("path, expected", [
    ("/bad-uid", 'expected response.uid='),
    ("/validating-patch", "validating webhooks may not return patches"),
])
def test_bad_responses_fail_the_write(api, hooks, configure, ns, path, expected):
    configure("validating", ns, webhook(hooks, path, "odd.webhooks.test"))
    code, status = api.post(CM.format(ns=ns), cm("odd"))
    assert code == 500
    assert expected in status["message"]


def test_untrusted_certificate_fails(api, hooks, configure, ns):
    other_ca = webhook(hooks, "/allow", "untrusted.webhooks.test")
    del other_ca["clientConfig"]["caBundle"]  # the system's roots do not know our CA
    configure("validating", ns, other_ca)
    code, status = api.post(CM.format(ns=ns), cm("untrusted"))
    assert code == 500
    assert "certificate verify failed" in status["message"]


def test_missing_service_fails(api, hooks, configure, ns):
    missing = webhook(hooks, "/allow", "missing.webhooks.test")
    missing["clientConfig"]["service"]["name"] = "nobody"
    configure("validating", ns, missing)
    code, status = api.post(CM.format(ns=ns), cm("unrouted"))
    assert code == 500
    assert 'service "nobody" not found' in status["message"]


def test_webhook_configurations_are_never_sent_to_webhooks(api, hooks, ns):
    everything = webhook(hooks, "/deny", "everything.webhooks.test", namespaceSelector={})
    everything["rules"] = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                            "resources": ["*/*"]}]
    name = f"everything-{ns}"
    code, body = api.post(VALIDATING, {"metadata": {"name": name}, "webhooks": [everything]})
    assert code == 201, body
    try:
        code, _ = api.post(CM.format(ns=ns), cm("blocked"))
        assert code == 403
    finally:
        code, body = api.delete(f"{VALIDATING}/{name}")
    assert code == 200, body
    assert api.post(CM.format(ns=ns), cm("unblocked"))[0] == 201
