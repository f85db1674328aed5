"""An extension apiserver written on gateway.extension (examples/wardle, kube's
sample-apiserver) behind a real gateway, driven with kubectl (issue 20, item 5).

The example runs as its own process over TLS with its own certificates, registered by two
APIServices; it authenticates the gateway's front-proxy requests against the CA the gateway
publishes in kube-system/extension-apiserver-authentication, checks bearer tokens by
TokenReview and authorizes every request by SubjectAccessReview to the gateway, with an
identity of its own bound to system:auth-delegator (as the sample's deployment is)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.certs import CLIENT_AUTH, Issuer, Pair, issue_pair, pem
from tests.support.extension import DELEGATION_RBAC, GROUP, VERSIONS, WardleProcess
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.wait import eventually
from tests.support.webhook import WebhookServer

pytestmark = pytest.mark.slow

TOKENS = "viewer-token,token-viewer,uid-viewer\n"
#: flunders and fischers readable by whoever has the view ClusterRole (aggregated into it)
#: and editable by edit's holders, as an operator would ship them; "viewer" has view.
RBAC = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: wardle-view
  labels: {{rbac.authorization.k8s.io/aggregate-to-view: "true"}}
rules:
- {{apiGroups: [{GROUP}], resources: [flunders, fischers], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: viewers}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}}
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: token-viewer}}
"""
FLUNDER = """
apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {{name: {name}, namespace: default}}
spec: {{reference: {reference}, referenceType: Fischer}}
"""
FLUNDERS = f"/apis/{GROUP}/v1beta1/namespaces/default/flunders"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with token_gateway(tmp_path_factory.mktemp("gateway"), TOKENS,
                       "--enable-aggregator-routing") as proc:
        proc.kubectl("apply", "-f", "-", input=RBAC)
        yield proc


@pytest.fixture(scope="module")
def wardle(gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WardleProcess]:
    server = WardleProcess(tmp_path_factory.mktemp("wardle"), gw)
    try:
        server.start()
        gw.kubectl("apply", "-f", "-", input=server.manifests())
        for version in VERSIONS:
            gw.kubectl("wait", "--for=condition=Available", "--timeout=60s",
                       f"apiservice/{version}.{GROUP}")
        yield server
    finally:
        server.stop()
    assert "Traceback" not in server.log(), server.log()


def kubectl(gw: GatewayProcess, *args: str, check: bool = True, input: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    return gw.kubectl(*args, check=check, input=input)


def test_registered_and_discovered(gw: GatewayProcess, wardle: WardleProcess) -> None:
    """Both APIServices Available, the group in the gateway's /apis (v1beta1 preferred, by
    kube's version priority), and kubectl's discovery of it (aggregated)."""
    for version in VERSIONS:
        code, body = gw.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/"
                                       f"{version}.{GROUP}")
        assert code == 200, body
        conditions = json.loads(body)["status"]["conditions"]
        assert {"type": "Available", "status": "True"}.items() <= conditions[0].items()
    code, body = gw.request("GET", "/apis")
    assert code == 200, body
    groups = {g["name"]: g for g in json.loads(body)["groups"]}
    assert groups[GROUP]["preferredVersion"]["version"] == "v1beta1"
    assert [v["version"] for v in groups[GROUP]["versions"]] == ["v1beta1", "v1alpha1"]
    out = kubectl(gw, "api-resources", f"--api-group={GROUP}", "-o", "wide").stdout
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "fl" in lines["flunders"].split() and "wardle" in lines["flunders"]
    assert f"{GROUP}/v1beta1" in lines["flunders"] and "true" in lines["flunders"]
    assert f"{GROUP}/v1alpha1" in lines["fischers"] and "false" in lines["fischers"]
    kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="categorized", reference="c"))
    assert f"flunder.{GROUP}/categorized" in kubectl(gw, "get", "wardle", "-o", "name").stdout


def test_apply_get_wide_and_conversion(gw: GatewayProcess, wardle: WardleProcess) -> None:
    """Written at v1alpha1, read at v1beta1 (the preferred version) converted, with each
    version's printer columns; -o wide adds the priority-1 columns."""
    kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="converted", reference="fish"))
    obj = json.loads(kubectl(gw, "get", "flunder", "converted", "-o", "json").stdout)
    assert obj["apiVersion"] == f"{GROUP}/v1beta1"
    assert obj["spec"] == {"fischerReference": "fish", "referenceType": "Fischer"}
    narrow = kubectl(gw, "get", "fl", "converted").stdout.split("\n")[0].split()
    assert narrow == ["NAME", "REFERENCE-TYPE", "AGE"]
    wide = kubectl(gw, "get", "fl", "converted", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "REFERENCE-TYPE", "FLUNDER", "FISCHER", "AGE"]
    assert wide[1].split()[:3] == ["converted", "Fischer", "fish"]
    alpha = kubectl(gw, "get", f"flunders.v1alpha1.{GROUP}", "converted", "-o",
                    "wide").stdout.splitlines()
    assert alpha[0].split() == ["NAME", "REFERENCE-TYPE", "REFERENCE", "AGE"]
    # applied again with a change: kubectl's three-way patch through the proxy
    kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="converted", reference="fish2"))
    obj = json.loads(kubectl(gw, "get", "flunder", "converted", "-o", "json").stdout)
    assert obj["spec"]["fischerReference"] == "fish2" and obj["metadata"]["generation"] == 2


def test_explain_reads_the_merged_openapi(gw: GatewayProcess, wardle: WardleProcess) -> None:
    out = kubectl(gw, "explain", "flunders.spec").stdout
    assert "fischerReference" in out and "The Fischer referred to." in out
    out = kubectl(gw, "explain", "flunders.spec.reference",
                  f"--api-version={GROUP}/v1alpha1").stdout
    assert "The name of a Flunder or Fischer." in out
    code, body = gw.request("GET", "/openapi/v2")
    assert code == 200 and b"com.example.wardle.v1beta1.Flunder" in body
    code, body = gw.request("GET", "/openapi/v3")
    assert f"apis/{GROUP}/v1alpha1" in json.loads(body)["paths"]


def test_server_side_apply_and_status(gw: GatewayProcess, wardle: WardleProcess) -> None:
    """Field ownership by manager (a conflict names the other manager); status written
    through its subresource only."""
    doc = FLUNDER.format(name="ssa", reference="a")
    kubectl(gw, "apply", "--server-side", "--field-manager=one", "-f", "-", input=doc)
    clash = kubectl(gw, "apply", "--server-side", "--field-manager=two", "-f", "-",
                    input=FLUNDER.format(name="ssa", reference="b"), check=False)
    assert clash.returncode != 0 and "conflict" in clash.stderr.lower(), clash.stderr
    assert 'conflict with "one"' in clash.stderr, clash.stderr
    obj = json.loads(kubectl(gw, "get", "flunder", "ssa", "-o", "json",
                             "--show-managed-fields").stdout)
    assert {m["manager"] for m in obj["metadata"]["managedFields"]} == {"one"}
    kubectl(gw, "patch", "flunder", "ssa", "--type=merge", "-p",
            '{"status": {"phase": "ignored"}}')
    assert "status" not in json.loads(
        kubectl(gw, "get", "flunder", "ssa", "-o", "json").stdout)
    kubectl(gw, "patch", "flunder", "ssa", "--subresource=status", "--type=merge", "-p",
            '{"status": {"phase": "Ready"}}')
    obj = json.loads(kubectl(gw, "get", "flunder", "ssa", "-o", "json").stdout)
    assert obj["status"] == {"phase": "Ready"} and obj["metadata"]["generation"] == 1


def test_watch_through_the_gateway(gw: GatewayProcess, wardle: WardleProcess) -> None:
    """kubectl's watch, through the gateway's proxy, sees a flunder created after it began
    (the watch is open once kubectl has printed the list it starts with)."""
    kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="before-watch", reference="b"))
    watch = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(gw.kubeconfig), "get", "flunders", "--watch",
         "-o", "name"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        lines: list[str] = []

        def read_until(name: str) -> None:
            while f"flunder.{GROUP}/{name}" not in lines:
                line = watch.stdout.readline() if watch.stdout else ""
                assert line, f"the watch ended: {watch.stderr.read() if watch.stderr else ''}"
                lines.append(line.strip())

        read_until("before-watch")  # the list kubectl starts with: the watch is open next
        kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="watched", reference="w"))
        read_until("watched")
    finally:
        watch.kill()
        watch.wait()


def test_admission_and_validation(gw: GatewayProcess, wardle: WardleProcess) -> None:
    """BanFlunder refuses a name a fischer disallows (403); the strategy's validation 422."""
    kubectl(gw, "apply", "-f", "-", input=f"""
apiVersion: {GROUP}/v1alpha1
kind: Fischer
metadata: {{name: strict}}
disallowedFlunders: [banned]
""")
    refused = kubectl(gw, "create", "-f", "-", check=False,
                      input=FLUNDER.format(name="banned", reference="x"))
    assert refused.returncode != 0
    assert ('Error from server (Forbidden): error when creating "STDIN": flunders.'
            'wardle.example.com "banned" is forbidden: this name may not be used, please change '
            "the resource name") in refused.stderr, refused.stderr
    invalid = kubectl(gw, "create", "-f", "-", check=False, input=f"""
apiVersion: {GROUP}/v1beta1
kind: Flunder
metadata: {{name: invalid, namespace: default}}
spec: {{flunderReference: x, referenceType: Fischer}}
""")
    assert 'The Flunder "invalid" is invalid: spec.flunderReference: Invalid value: "x": ' \
           "cannot be set if referenceType is not Flunder" in invalid.stderr, invalid.stderr


def test_rbac_is_enforced_by_the_backends_subject_access_review(
        gw: GatewayProcess, wardle: WardleProcess) -> None:
    """"viewer" has the view ClusterRole, into which wardle-view aggregates flunders: through
    the gateway it lists (the gateway's RBAC lets it through, and the backend's
    SubjectAccessReview to the gateway allows it) but cannot create. Straight to the backend,
    as the front proxy (past the gateway's own authorization), the backend's review is what
    refuses the create, and refuses anyone unbound; a bearer token is checked by
    TokenReview."""
    kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="listed", reference="l"))
    assert "listed" in kubectl(gw, "get", "flunders", "--as=viewer", "-o", "name").stdout
    denied = kubectl(gw, "create", "--as=viewer", "-f", "-", check=False,
                     input=FLUNDER.format(name="by-viewer", reference="v"))
    assert "(Forbidden)" in denied.stderr, denied.stderr

    code, body, _ = wardle.request("GET", FLUNDERS, user="viewer",
                                   groups=("system:authenticated",))
    assert code == 200, body
    assert "listed" in [i["metadata"]["name"] for i in json.loads(body)["items"]]
    flunder = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Flunder",
               "metadata": {"name": "direct"}, "spec": {}}
    code, body, _ = wardle.request("POST", FLUNDERS, flunder, user="viewer",
                                   groups=("system:authenticated",))
    assert code == 403, body
    assert json.loads(body)["message"] == (
        f'flunders.{GROUP} is forbidden: User "viewer" cannot create resource "flunders" in '
        f'API group "{GROUP}" in the namespace "default"')
    code, body, _ = wardle.request("GET", FLUNDERS, user="nobody",
                                   groups=("system:authenticated",))
    assert code == 403, body
    code, body, _ = wardle.request("POST", FLUNDERS, flunder, user="admin",
                                   groups=("system:masters",))
    assert code == 201, body
    code, body, _ = wardle.request("GET", FLUNDERS, token="viewer-token")
    assert code == 200, body
    code, body, _ = wardle.request("POST", FLUNDERS, flunder, token="viewer-token")
    assert code == 403 and 'User "token-viewer" cannot create' in json.loads(body)["message"]
    code, body, _ = wardle.request("GET", FLUNDERS, token="not-a-token")
    assert code == 401, body
    # a client certificate of the gateway's client CA (the ConfigMap's client-ca-file): the
    # admin's, in system:masters
    admin = Pair(gw.cert_dir / "admin.crt", gw.cert_dir / "admin.key")
    code, body, _ = wardle.request("POST", FLUNDERS, {**flunder, "metadata": {"name": "by-cert"}},
                                   cert=admin)
    assert code == 201, body  # anonymous, it would be 403 (below)
    code, body, _ = wardle.request("GET", FLUNDERS)
    assert code == 403 and 'User "system:anonymous"' in json.loads(body)["message"]
    code, _, _ = wardle.request("GET", "/healthz")
    assert code == 200  # --authorization-always-allow-paths


def test_a_new_front_proxy_ca_in_the_configmap_counts_at_once(
        gw: GatewayProcess, wardle: WardleProcess, tmp_path: Path) -> None:
    """The backend follows kube-system/extension-apiserver-authentication: a front proxy
    certificate from a CA not yet published is refused (401); once the CA is added to the
    ConfigMap's requestheader-client-ca-file, the same certificate is trusted, without a
    restart."""
    other = Issuer.new("another-front-proxy-ca")
    proxy = issue_pair(tmp_path, "proxy", "front-proxy-client", other, usages=(CLIENT_AUTH,))
    code, body, _ = wardle.request("GET", FLUNDERS, user="admin", groups=("system:masters",),
                                   proxy=proxy)
    assert code == 401, body
    path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
    code, body = gw.request("GET", path)
    assert code == 200, body
    configmap = json.loads(body)
    configmap["data"]["requestheader-client-ca-file"] += pem(other.cert).decode()
    code, body = gw.request("PUT", path, configmap)
    assert code == 200, body

    def trusted() -> bool:
        code, body, _ = wardle.request("GET", FLUNDERS, user="admin",
                                       groups=("system:masters",), proxy=proxy)
        assert code == 200, body
        return True

    eventually(trusted, timeout=10, what="the new front-proxy CA trusted")


def test_namespace_lifecycle_reads_the_core_servers_namespaces(
        gw: GatewayProcess, wardle: WardleProcess) -> None:
    """kube's NamespaceLifecycle in the backend, over the gateway's namespaces: no flunder in
    a namespace the gateway does not have (404); one made a moment ago counts."""
    flunder = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Flunder", "metadata": {"name": "f"}}
    code, body = gw.request("POST", f"/apis/{GROUP}/v1beta1/namespaces/nowhere/flunders",
                            flunder)
    assert code == 404 and json.loads(body)["message"] == 'namespaces "nowhere" not found', body
    kubectl(gw, "create", "namespace", "just-made")
    code, body = gw.request("POST", f"/apis/{GROUP}/v1beta1/namespaces/just-made/flunders",
                            flunder)
    assert code == 201, body


POLICY = f"""
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: no-policed-flunders}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {{apiGroups: [{GROUP}], apiVersions: ["*"], operations: [CREATE], resources: [flunders]}}
  validations:
  - {{expression: "object.metadata.name != 'policed'", message: the policy refuses this name}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: no-policed-flunders}}
spec: {{policyName: no-policed-flunders, validationActions: [Deny]}}
"""


def test_the_core_servers_admission_policies_and_webhooks_apply(
        gw: GatewayProcess, wardle: WardleProcess, tmp_path: Path) -> None:
    """A ValidatingAdmissionPolicy and a mutating webhook configured in the gateway, for
    flunders: the gateway only proxies flunders, so what refuses or changes them is the
    backend, which follows the gateway's configurations as kube's extension apiservers do."""
    kubectl(gw, "apply", "-f", "-", input=POLICY)

    def refused() -> bool:
        out = kubectl(gw, "create", "--dry-run=server", "-f", "-", check=False,
                      input=FLUNDER.format(name="policed", reference="p"))
        assert ("ValidatingAdmissionPolicy 'no-policed-flunders' with binding "
                "'no-policed-flunders' denied request: the policy refuses this name"
                ) in out.stderr, out.stderr
        return True

    eventually(refused, timeout=15, what="the policy applied by the backend")
    with WebhookServer(tmp_path) as hooks:
        kubectl(gw, "apply", "-f", "-", input=f"""
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: label-flunders}}
webhooks:
- name: label.wardle.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {{url: "https://127.0.0.1:{hooks.port}/mutate", caBundle: {hooks.ca_bundle}}}
  objectSelector: {{matchLabels: {{hooked: "yes"}}}}
  rules:
  - {{apiGroups: [{GROUP}], apiVersions: ["*"], operations: [CREATE], resources: [flunders]}}
""")
        doc = FLUNDER.format(name="hooked", reference="h").replace(
            "namespace: default}", "namespace: default, labels: {hooked: 'yes'}}")

        def mutated() -> bool:
            out = kubectl(gw, "create", "--dry-run=server", "-o", "json", "-f", "-", input=doc)
            assert json.loads(out.stdout)["metadata"]["labels"].get("mutated") == "yes"
            return True

        eventually(mutated, timeout=15, what="the webhook called by the backend")
        review = hooks.received("/mutate")[-1]["request"]
        assert review["resource"] == {"group": GROUP, "version": "v1alpha1",
                                      "resource": "flunders"}
        assert review["userInfo"]["username"] == "admin"
        kubectl(gw, "delete", "mutatingwebhookconfiguration", "label-flunders")


def test_not_ready_until_the_core_servers_objects_are_read(tmp_path: Path) -> None:
    """/readyz's informer-sync check waits for the core server's namespaces, webhooks and
    policies, which admission reads (as kube's covers the shared informers): with an identity
    that may not list namespaces the server stays unready, its post-start hooks done, until it
    may."""
    rule = '- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}\n'
    assert rule in DELEGATION_RBAC
    with GatewayProcess(tmp_path / "gateway") as gateway:
        server = WardleProcess(tmp_path / "wardle", gateway)
        server.start(rbac=DELEGATION_RBAC.replace(rule, ""), wait=False)
        try:
            def readyz() -> tuple[int, bytes]:
                try:
                    code, body, _ = server.request("GET", "/readyz?verbose")
                except OSError as err:  # not listening yet
                    raise AssertionError(str(err)) from None
                return code, body

            def unready() -> bool:
                code, body = readyz()
                assert b"[+]poststarthook/start-extension-apiserver-informers ok" in body, body
                assert code == 500 and b"[-]informer-sync failed" in body, body
                return True

            eventually(unready, timeout=30, what="unready, its informers not synced")
            gateway.kubectl("apply", "-f", "-", input=DELEGATION_RBAC)
            eventually(lambda: readyz()[0] == 200, timeout=60, interval=0.2,
                       what="ready once it may list namespaces")
        finally:
            server.stop()
        assert "Traceback" not in server.log(), server.log()


def test_bad_input_gets_a_status_and_writes_nothing(gw: GatewayProcess,
                                                    wardle: WardleProcess) -> None:
    """Through the gateway to the example: a body that is not JSON is 400, one past kube's
    3 MiB limit 413, an object of another kind 422 (as kube's custom resource validation
    answers: the kind is a field that must be Flunder), each a metav1.Status with its code and
    reason; none of them leaves an object behind, and the server keeps serving."""
    headers = {"Content-Type": "application/json"}
    cases = [
        (b'{"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder", "metadata": {',
         400, "BadRequest"),
        (json.dumps({"apiVersion": f"{GROUP}/v1beta1", "kind": "Flunder",
                     "metadata": {"name": "oversize", "namespace": "default",
                                  "annotations": {"x": "y" * (3 * 1024 * 1024 + 10)}}}
                    ).encode(), 413, "RequestEntityTooLarge"),
        (json.dumps({"apiVersion": f"{GROUP}/v1beta1", "kind": "Fischer",
                     "metadata": {"name": "wrongkind", "namespace": "default"}}).encode(),
         422, "Invalid"),
    ]
    for body, code, reason in cases:
        got, raw = gw.request("POST", FLUNDERS, body, headers)
        assert got == code, raw[:300]
        status = json.loads(raw)
        assert status["kind"] == "Status" and status["code"] == code, status
        assert status["reason"] == reason, status
    names = kubectl(gw, "get", "flunders", "-o", "name").stdout
    assert "oversize" not in names and "wrongkind" not in names
    kubectl(gw, "apply", "-f", "-", input=FLUNDER.format(name="after-bad-input", reference="f"))
    assert "after-bad-input" in kubectl(gw, "get", "flunders", "-o", "name").stdout
