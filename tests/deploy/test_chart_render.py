"""The gateway chart linted strictly and rendered by real Helm for every documented combination
(the defaults and the chart's ci/*-values.yaml), what it renders, and the values it refuses."""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

import pytest
from cryptography import x509

from tests.deploy import helm

COMBINATIONS = helm.combinations()
FULLNAME = f"{helm.RELEASE}-gateway"


def merged(values: dict[str, Any]) -> dict[str, Any]:
    return helm.chart().merge_values(values)


def test_the_documented_combinations_cover_every_tls_mode_and_storage_mode() -> None:
    pairs = {(merged(v)["tls"]["mode"], merged(v)["storage"]["mode"])
             for v in COMBINATIONS.values()}
    assert pairs == {(tls, storage) for tls in ("helm", "existingSecret", "cert-manager")
                     for storage in ("embedded", "etcd")}
    assert any(merged(v)["replicaCount"] > 1 for v in COMBINATIONS.values())
    assert any(v.get("apiServices") for v in COMBINATIONS.values())


@pytest.mark.parametrize("name", COMBINATIONS)
def test_lint_strict_finds_nothing(name: str) -> None:
    assert helm.lint(COMBINATIONS[name]) == []


@pytest.mark.parametrize("name", COMBINATIONS)
def test_the_gateway_pod_is_hardened_and_probed_over_https(name: str) -> None:
    values = merged(COMBINATIONS[name])
    manifests = helm.render(COMBINATIONS[name])
    pod = helm.one(manifests, "Deployment")["spec"]["template"]["spec"]
    gateway = pod["containers"][0]

    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = gateway["securityContext"]
    assert context["runAsNonRoot"] is True and isinstance(context["runAsUser"], int)
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(gateway["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(gateway["resources"]["limits"])

    assert gateway["ports"] == [{"name": "https", "containerPort": 6443, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz"),
                        ("startupProbe", "/livez")):
        if values["auth"]["anonymous"]:
            assert gateway[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
        else:  # the kubelet cannot authenticate: the port is all it can check
            assert gateway[probe]["tcpSocket"] == {"port": "https"}

    mounts = {m["mountPath"]: m for m in gateway["volumeMounts"]}
    assert "/tmp" in mounts
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    if values["storage"]["mode"] == "embedded":
        data = volumes[mounts["/var/lib/gateway"]["name"]]
        persistence = values["storage"]["embedded"]["persistence"]
        assert ("persistentVolumeClaim" in data) == persistence["enabled"]
        assert "--data-dir=/var/lib/gateway" in gateway["args"]
    else:
        assert "/var/lib/gateway" not in mounts


@pytest.mark.parametrize("name", COMBINATIONS)
def test_the_service_forwards_443_to_the_https_port(name: str) -> None:
    manifests = helm.render(COMBINATIONS[name])
    service = helm.one(manifests, "Service")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]
    selector = service["spec"]["selector"]
    labels = helm.one(manifests, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    account = helm.one(manifests, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    assert helm.one(manifests, "Deployment")["spec"]["template"]["spec"][
        "serviceAccountName"] == account["metadata"]["name"]
    # the gateway needs no permission in the host cluster
    assert not [m for m in manifests if m["kind"] in (
        "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_mounted_secret_and_configmap_is_rendered_or_named_in_the_values(
        name: str) -> None:
    manifests = helm.render(COMBINATIONS[name])
    values = merged(COMBINATIONS[name])
    external = {values["tls"]["existingSecret"]["name"],
                values["auth"]["tokenAuthFile"]["existingSecret"],
                values["auth"]["adminToken"]["existingSecret"],
                values["auth"]["clientCA"]["existingSecret"],
                values["auth"]["serviceAccountTokens"]["existingSecret"],
                values["aggregator"]["proxyClient"]["existingSecret"],
                values["storage"]["etcd"]["tls"]["existingSecret"]} - {""}
    if values["tls"]["mode"] == "cert-manager":  # cert-manager writes it
        external.add(helm.one(manifests, "Certificate", f"{FULLNAME}-tls")["spec"]["secretName"])
    for kind in ("Deployment", "Job"):
        for workload in helm.find(manifests, kind):
            for volume in workload["spec"]["template"]["spec"]["volumes"]:
                if "secret" in volume:
                    secret = volume["secret"]["secretName"]
                    assert helm.find(manifests, "Secret", secret) or secret in external, secret
                if "configMap" in volume:
                    assert helm.find(manifests, "ConfigMap", volume["configMap"]["name"])


def _pem(secret: dict[str, Any], key: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


def test_helm_mode_generates_a_ca_and_a_serving_certificate_for_the_service_names() -> None:
    manifests = helm.render({"tls": {"extraDNSNames": ["gateway.example.com"]}})
    secret = helm.one(manifests, "Secret", f"{FULLNAME}-tls")
    assert secret["type"] == "kubernetes.io/tls"
    cert, ca = _pem(secret, "tls.crt"), _pem(secret, "ca.crt")
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) >= {
        FULLNAME, f"{FULLNAME}.gateway.svc", f"{FULLNAME}.gateway.svc.cluster.local",
        "localhost", "gateway.example.com"}
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    # the proxy client certificate's CN is the name the gateway allows for front proxies
    proxy = helm.one(manifests, "Secret", f"{FULLNAME}-proxy-client")
    client, proxy_ca = _pem(proxy, "tls.crt"), _pem(proxy, "ca.crt")
    client.verify_directly_issued_by(proxy_ca)
    common_name = client.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
    assert common_name == "front-proxy-client"
    assert "--requestheader-allowed-names=front-proxy-client" in helm.container(manifests)["args"]


def test_existing_secret_mode_renders_no_certificate_and_mounts_the_named_secret() -> None:
    manifests = helm.render(COMBINATIONS["existingsecret-embedded"])
    assert not helm.find(manifests, "Secret", f"{FULLNAME}-tls")
    assert not helm.find(manifests, "Certificate")
    volumes = helm.one(manifests, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "gateway-serving", "defaultMode": 0o440}} \
        in volumes


def test_cert_manager_mode_makes_a_ca_issuer_and_a_certificate_for_the_service() -> None:
    manifests = helm.render({"tls": {"mode": "cert-manager"}})
    assert not helm.find(manifests, "Secret", f"{FULLNAME}-tls")
    assert helm.one(manifests, "Issuer", f"{FULLNAME}-selfsigned")["spec"] == {"selfSigned": {}}
    ca = helm.one(manifests, "Certificate", f"{FULLNAME}-ca")["spec"]
    assert ca["isCA"] is True
    assert helm.one(manifests, "Issuer", f"{FULLNAME}-ca")["spec"] == {
        "ca": {"secretName": ca["secretName"]}}
    serving = helm.one(manifests, "Certificate", f"{FULLNAME}-tls")["spec"]
    assert serving["secretName"] == f"{FULLNAME}-tls"
    assert f"{FULLNAME}.gateway.svc" in serving["dnsNames"]
    assert serving["issuerRef"] == {"name": f"{FULLNAME}-ca", "kind": "Issuer",
                                    "group": "cert-manager.io"}

    own = helm.render(COMBINATIONS["certmanager-embedded"])
    assert not helm.find(own, "Issuer")
    assert helm.one(own, "Certificate")["spec"]["issuerRef"] == {
        "name": "corporate-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}


def test_embedded_store_runs_one_pod_on_a_claim_that_outlives_the_release() -> None:
    manifests = helm.render({})
    deployment = helm.one(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = helm.one(manifests, "PersistentVolumeClaim", f"{FULLNAME}-data")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert not helm.find(manifests, "PodDisruptionBudget")


def test_etcd_store_passes_endpoints_and_client_certificates_and_adds_a_pdb() -> None:
    values = COMBINATIONS["helm-etcd"]
    manifests = helm.render(values)
    args = helm.container(manifests)["args"]
    endpoints = ",".join(values["storage"]["etcd"]["endpoints"])
    assert f"--etcd-servers={endpoints}" in args
    assert {"--etcd-cafile=/etc/gateway/etcd/ca.crt", "--etcd-certfile=/etc/gateway/etcd/tls.crt",
            "--etcd-keyfile=/etc/gateway/etcd/tls.key"} <= set(args)
    assert not any(a.startswith("--data-dir") for a in args)
    assert not helm.find(manifests, "PersistentVolumeClaim")
    deployment = helm.one(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    budget = helm.one(manifests, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()

    plain = helm.render(COMBINATIONS["existingsecret-etcd"])
    assert not any(a.startswith("--etcd-cafile") for a in helm.container(plain)["args"])
    assert helm.one(plain, "PodDisruptionBudget")["spec"]["minAvailable"] == "50%"


def test_values_become_gateway_flags() -> None:
    args = helm.container(helm.render({
        "auth": {"authorizationModes": ["RBAC", "AlwaysAllow"], "anonymous": False},
        "aggregator": {"enableAggregatorRouting": True},
        "server": {"maxRequestsInflight": 800, "maxMutatingRequestsInflight": 100,
                   "requestTimeout": "90s", "serviceClusterIPRange": "10.96.0.0/16"},
        "logging": {"format": "console", "verbosity": 4},
        "audit": {"enabled": True, "log": {"destination": "file", "maxSize": 50}},
        "extraArgs": ["--requestheader-uid-headers=X-Remote-Uid"],
    }))["args"]
    for flag in ("--authorization-mode=RBAC,AlwaysAllow", "--anonymous-auth=false",
                 "--enable-aggregator-routing=true", "--max-requests-inflight=800",
                 "--max-mutating-requests-inflight=100", "--request-timeout=90s",
                 "--service-cluster-ip-range=10.96.0.0/16", "--advertise-address=$(POD_IP)",
                 "--log-format=console", "--v=4",
                 "--audit-policy-file=/etc/gateway/audit/policy.yaml",
                 "--audit-log-path=/var/log/gateway/audit.log", "--audit-log-maxsize=50",
                 "--token-auth-file=/etc/gateway/tokens/tokens.csv",
                 "--requestheader-uid-headers=X-Remote-Uid"):
        assert flag in args, flag


def test_audit_policy_is_a_configmap_and_its_change_rolls_the_pods() -> None:
    first = helm.render({"audit": {"enabled": True}})
    policy = helm.one(first, "ConfigMap", f"{FULLNAME}-audit-policy")["data"]["policy.yaml"]
    assert policy.startswith("apiVersion: audit.k8s.io/v1\nkind: Policy\n")
    second = helm.render({"audit": {"enabled": True, "policy": {"rules": [{"level": "None"}]}}})
    checksum = [helm.one(m, "Deployment")["spec"]["template"]["metadata"]["annotations"][
        "checksum/audit-policy"] for m in (first, second)]
    assert checksum[0] != checksum[1]


def test_apiservices_from_values_are_applied_into_the_gateway_by_a_hook_job() -> None:
    values = COMBINATIONS["helm-embedded"]
    manifests = helm.render(values)
    objects = helm.embedded_apiservices(manifests)
    assert [o["metadata"]["name"] for o in objects] == [
        "v1alpha1.wardle.example.com", "v1beta1.metrics.example.com"]
    assert objects[0]["spec"] == {
        "group": "wardle.example.com", "version": "v1alpha1",
        "service": {"name": "wardle", "namespace": "wardle", "port": 443},
        "caBundle": values["apiServices"][0]["caBundle"],
        "groupPriorityMinimum": 1000, "versionPriority": 15}
    assert objects[1]["spec"]["service"]["port"] == 8443
    assert objects[1]["spec"]["insecureSkipTLSVerify"] is True
    assert (objects[1]["spec"]["groupPriorityMinimum"], objects[1]["spec"]["versionPriority"]) \
        == (100, 100)
    # they are objects of the gateway, never of the host cluster
    assert not helm.find(manifests, "APIService")

    job = helm.one(manifests, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    kubectl = job["spec"]["template"]["spec"]["containers"][0]
    assert kubectl["args"][:4] == ["apply", "--filename=/etc/gateway/registration/apiservices.yaml",
                                   "--prune",
                                   "--prune-allowlist=apiregistration.k8s.io/v1/APIService"]
    # each backend's Service exists in the gateway too (its availability check looks there),
    # as an ExternalName the cluster's DNS answers; namespaces once each
    backends = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                for o in helm.embedded_objects(manifests) if o["kind"] != "APIService"}
    expected = {("Namespace", "", s["service"]["namespace"]) for s in values["apiServices"]} | {
        ("Service", s["service"]["namespace"], s["service"]["name"])
        for s in values["apiServices"]}
    assert set(backends) == expected
    for entry in values["apiServices"]:
        service = backends["Service", entry["service"]["namespace"], entry["service"]["name"]]
        assert service["spec"] == {
            "type": "ExternalName",
            "externalName": f"{entry['service']['name']}.{entry['service']['namespace']}.svc",
            "ports": [{"name": "https", "port": entry["service"].get("port", 443)}]}
    assert "--selector=app.kubernetes.io/instance=gw,app.kubernetes.io/component=apiservice" \
        in kubectl["args"]
    assert all(o["metadata"]["labels"]["app.kubernetes.io/component"] == "apiservice"
               for o in helm.embedded_objects(manifests))
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_without_apiservices_no_job_runs_on_install_and_an_upgrade_deletes_them() -> None:
    assert not helm.find(helm.render({}), "Job")
    job = helm.one(helm.render({}, upgrade=True), "Job")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:4] == ["delete", "apiservices.apiregistration.k8s.io,services",
                        "--all-namespaces", "--ignore-not-found"]


def test_network_policy_opens_the_https_port_and_can_restrict_egress() -> None:
    default = helm.one(helm.render({}), "NetworkPolicy")["spec"]
    assert default["policyTypes"] == ["Ingress"]
    assert default["ingress"] == [{"ports": [{"port": "https", "protocol": "TCP"}]}]

    restricted = helm.one(helm.render(COMBINATIONS["helm-etcd"]), "NetworkPolicy")["spec"]
    assert restricted["policyTypes"] == ["Ingress", "Egress"]
    peers = [peer for rule in restricted["egress"] for peer in rule.get("to", [])]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "wardle"}}} \
        in peers
    assert any(port.get("port") == 53 for rule in restricted["egress"]
               for port in rule.get("ports", []))

    limited = helm.one(helm.render(COMBINATIONS["certmanager-etcd"]), "NetworkPolicy")["spec"]
    sources = limited["ingress"][0]["from"]
    assert sources[0] == {"namespaceSelector": {"matchLabels": {"gateway-access": "true"}}}
    assert sources[1]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == \
        "apiservice-registration"
    assert not helm.find(helm.render(COMBINATIONS["certmanager-embedded"]), "NetworkPolicy")


def test_notes_tell_how_to_get_a_kubeconfig() -> None:
    text = helm.notes({})
    assert f"kubectl -n gateway get secret {FULLNAME}-tls -o jsonpath='{{.data.ca\\.crt}}'" in text
    assert f"get secret {FULLNAME}-tokens -o jsonpath='{{.data.token}}'" in text
    assert "kubectl config --kubeconfig=gateway.kubeconfig set-credentials" in text
    assert f"port-forward service/{FULLNAME} 6443:443" in text
    assert f"--tls-server-name={FULLNAME}.gateway.svc" in text

    external = helm.notes(COMBINATIONS["existingsecret-etcd"])
    assert "get secret gateway-admin-token -o jsonpath='{.data.token}'" in external
    assert "tls.caKey is empty" in external
    assert "v1alpha1.wardle.example.com -> service wardle/wardle:443" in external


REJECTED = {
    "an unknown tls mode": ({"tls": {"mode": "self-signed"}},
                            "value must be one of 'helm', 'existingSecret', 'cert-manager'"),
    "an unknown storage mode": ({"storage": {"mode": "sqlite"}}, "'embedded', 'etcd'"),
    "an unknown log format": ({"logging": {"format": "text"}}, "'json', 'console'"),
    "an unknown authorizer": ({"auth": {"authorizationModes": ["Webhook"]}},
                              "'RBAC', 'AlwaysAllow', 'AlwaysDeny'"),
    "replicas on the embedded store": ({"replicaCount": 2},
                                       "replicaCount > 1 needs storage.mode=etcd"),
    "etcd without endpoints": ({"storage": {"mode": "etcd"}},
                               "storage.mode=etcd needs storage.etcd.endpoints"),
    "an existing secret without a name": ({"tls": {"mode": "existingSecret"}},
                                          "tls.mode=existingSecret needs tls.existingSecret.name"),
    "an unknown value": ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    "an unknown nested value": ({"tls": {"helm": {"lookup": True}}},
                                "additional properties 'lookup' not allowed"),
    "a negative replica count": ({"replicaCount": -1}, "minimum"),
    "a port out of range": ({"service": {"port": 70000}}, "maximum"),
    "a malformed duration": ({"server": {"requestTimeout": "a minute"}}, "/server/requestTimeout"),
    "an etcd URL without a port": (
        {"storage": {"mode": "etcd", "etcd": {"endpoints": ["https://etcd"]}}},
        "/storage/etcd/endpoints/0"),
    "an APIService without a service": (
        {"apiServices": [{"group": "wardle.example.com", "version": "v1alpha1"}]},
        "missing property 'service'"),
    "an APIService version that is not kube's": (
        {"apiServices": [{"group": "wardle.example.com", "version": "1.0",
                          "service": {"name": "w", "namespace": "w"}}]},
        "/apiServices/0/version"),
}


@pytest.mark.parametrize("case", REJECTED)
def test_values_schema_rejects(case: str) -> None:
    values, message = REJECTED[case]
    with pytest.raises(helm.HelmError) as caught:
        helm.render(values)
    assert "values don't meet the specifications of the schema" in str(caught.value)
    assert message in str(caught.value)


GUARDED = {
    "replicas on the embedded store": (
        {"replicaCount": 3}, "replicaCount=3 needs storage.mode=etcd: the embedded store is "
                             "one SQLite file on one volume and serves a single replica"),
    "etcd without endpoints": ({"storage": {"mode": "etcd"}},
                               "storage.mode=etcd needs storage.etcd.endpoints"),
    "a token file without an admin token": (
        {"auth": {"tokenAuthFile": {"existingSecret": "tokens"}},
         "apiServices": [{"group": "wardle.example.com", "version": "v1alpha1",
                          "service": {"name": "w", "namespace": "w"}}]},
        "registering apiServices needs auth.adminToken.existingSecret"),
    "an APIService listed twice": (
        {"apiServices": [{"group": "wardle.example.com", "version": "v1alpha1",
                          "service": {"name": name, "namespace": "w"}} for name in "ab"]},
        "apiServices: v1alpha1.wardle.example.com is listed twice"),
}


@pytest.mark.parametrize("case", GUARDED)
def test_templates_refuse_even_without_schema_validation(case: str) -> None:
    """`helm install --skip-schema-validation` still meets the templates' own checks."""
    values, message = GUARDED[case]
    with pytest.raises(helm.HelmError) as caught:
        helm.render(values, schema=False)
    assert message in str(caught.value)
