"""The chart's output run for real: a `gateway serve` started with exactly the rendered
Deployment's arguments and the rendered Secrets and ConfigMaps as its files, the registration
job's kubectl command run against it, the NOTES' kubeconfig recipe followed, and `lookup`
keeping the generated keys across an upgrade (the gateway itself serves the Secrets Helm reads
back: it speaks the Kubernetes API).

Only the network identity differs from a pod: a free port on 127.0.0.1 instead of :6443, and
127.0.0.1 for the pod IP; the rendered server name (<release>-gateway.<namespace>.svc) is
still checked against the serving certificate through tls-server-name.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from tests.deploy import helm
from tests.support.gateway import free_port, gateway_command, send
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

VALUES = helm.combinations()["helm-embedded"]
SERVER_NAME = f"{helm.RELEASE}-gateway.{helm.NAMESPACE}.svc"
GROUPS = ["v1alpha1.wardle.example.com", "v1beta1.metrics.example.com"]


@dataclass
class Deployed:
    """A gateway started from one render of the chart."""

    workdir: Path
    manifests: list[dict[str, Any]]
    url: str
    ca: Path
    kubeconfig: Path  # the admin, through the rendered token and CA
    proc: subprocess.Popen[bytes]
    log_path: Path

    def kubectl(self, *args: str, kubeconfig: Path | None = None, check: bool = True
                ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", f"--kubeconfig={kubeconfig or self.kubeconfig}",
             f"--cache-dir={self.workdir / 'kubecache'}", *args],
            capture_output=True, text=True, timeout=60)
        if check:
            assert result.returncode == 0, f"kubectl {args}: {result.stderr}"
        return result

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _kubeconfig(path: Path, url: str, ca: Path, user: dict[str, str]) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gateway",
        "clusters": [{"name": "gateway", "cluster": {
            "server": url, "certificate-authority": str(ca), "tls-server-name": SERVER_NAME}}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "gateway", "context": {"cluster": "gateway", "user": "admin"}}],
    }))
    return path


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    workdir = tmp_path_factory.mktemp("chart-gateway")
    manifests = helm.render(VALUES)
    args, _ = helm.materialize(manifests, workdir / "pod", pod_ip="127.0.0.1")
    port = free_port()
    args = [a for a in args if not a.startswith(("--secure-port=", "--bind-address="))]
    args += [f"--secure-port={port}", "--bind-address=127.0.0.1",
             "--shutdown-delay-duration=0s"]  # a test does not wait for load balancers
    log_path = workdir / "gateway.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*gateway_command(), "serve", *args], stdout=log,
                                stderr=subprocess.STDOUT, cwd=workdir)
    ca = workdir / "pod/etc/gateway/tls/ca.crt"
    token = workdir / "admin.token"
    token.write_bytes(base64.b64decode(
        helm.one(manifests, "Secret", f"{helm.RELEASE}-gateway-tokens")["data"]["token"]))
    url = f"https://127.0.0.1:{port}"
    deployed = Deployed(workdir, manifests, url, ca,
                        _kubeconfig(workdir / "admin.kubeconfig", url, ca,
                                    {"tokenFile": str(token)}), proc, log_path)
    try:
        def ready() -> bool:
            assert proc.poll() is None, f"gateway exited:\n{deployed.log()[-4000:]}"
            try:  # as the kubelet probes: no credentials
                code, body, _ = send(f"{url}/readyz", "GET", ssl.create_default_context(
                    cafile=str(ca)), timeout=5)
            except OSError as err:
                raise AssertionError(str(err)) from None
            assert code == 200, body
            return True

        eventually(ready, timeout=90, interval=0.2, what="the gateway's /readyz")
        yield deployed
    finally:
        proc.terminate()
        proc.wait(30)


def run_registration_job(deployed: Deployed, manifests: list[dict[str, Any]], name: str
                         ) -> subprocess.CompletedProcess[str]:
    """The rendered job's kubectl command lines (its init containers', then its own),
    against the gateway: its volumes laid out as files, the rendered kubeconfig pointed at
    the test's port. The first that fails is the answer."""
    root = deployed.workdir / name
    pod = helm.one(manifests, "Job")["spec"]["template"]["spec"]
    for init in pod.get("initContainers", []):
        assert init["command"] == ["kubectl"]
        args, _ = helm.materialize(manifests, root, kind="Job", container_name=init["name"])
        _point_at_the_gateway(deployed, root)
        result = subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            return result
    args, _ = helm.materialize(manifests, root, kind="Job")
    _point_at_the_gateway(deployed, root)
    container = helm.container(manifests, "Job")
    assert container["command"] == ["kubectl"]
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=120)


def _point_at_the_gateway(deployed: Deployed, root: Path) -> None:
    """The rendered kubeconfig, pointed at the test's port, with its files under ``root``."""
    kubeconfig_path = root / "etc/gateway/registration/kubeconfig"
    kubeconfig = yaml.safe_load(kubeconfig_path.read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://{SERVER_NAME}:443"
    cluster.update(server=deployed.url, **{"tls-server-name": SERVER_NAME})
    cluster["certificate-authority"] = str(root / cluster["certificate-authority"].lstrip("/"))
    user = kubeconfig["users"][0]["user"]
    user["tokenFile"] = str(root / user["tokenFile"].lstrip("/"))
    kubeconfig_path.write_text(yaml.safe_dump(kubeconfig))


def store_release_secrets(deployed: Deployed) -> list[dict[str, Any]]:
    """The release's Secrets in the gateway, as `helm install` would have stored them in a
    cluster, so that `lookup` and the NOTES' commands find them."""
    deployed.kubectl("create", "namespace", helm.NAMESPACE, check=False)
    secrets = [m for m in deployed.manifests if m["kind"] == "Secret"]
    apply = subprocess.run(
        ["kubectl", f"--kubeconfig={deployed.kubeconfig}", "apply", "--server-side",
         "--force-conflicts", "-f", "-"],
        input=yaml.safe_dump_all(secrets), capture_output=True, text=True, timeout=60)
    assert apply.returncode == 0, apply.stderr
    return secrets


def backend_services(deployed: Deployed) -> list[str]:
    """namespace/name of the backends' Services the job registered in the gateway."""
    items = json.loads(deployed.kubectl(
        "get", "services", "--all-namespaces", "-l", "app.kubernetes.io/component=apiservice",
        "-o", "json").stdout)["items"]
    return sorted(f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in items)


def availability_reason(deployed: Deployed, name: str) -> str:
    conditions = registered(deployed)[name].get("status", {}).get("conditions", [])
    return next((c.get("reason", "") for c in conditions if c["type"] == "Available"), "")


def registered(deployed: Deployed) -> dict[str, dict[str, Any]]:
    items = json.loads(deployed.kubectl(
        "get", "apiservices", "-l", "app.kubernetes.io/component=apiservice",
        "-o", "json").stdout)["items"]
    return {item["metadata"]["name"]: item for item in items}


def test_probes_answer_without_credentials(deployed: Deployed) -> None:
    context = ssl.create_default_context(cafile=str(deployed.ca))
    for path in ("/livez", "/readyz"):
        code, body, _ = send(deployed.url + path, "GET", context)
        assert (code, body) == (200, b"ok")


def test_the_admin_token_is_a_system_master(deployed: Deployed) -> None:
    whoami = json.loads(deployed.kubectl("auth", "whoami", "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == "gateway-admin"
    assert "system:masters" in whoami["status"]["userInfo"]["groups"]


def test_backends_are_told_to_trust_the_charts_proxy_client(deployed: Deployed) -> None:
    configmap = json.loads(deployed.kubectl(
        "get", "configmap", "-n", "kube-system", "extension-apiserver-authentication",
        "-o", "json").stdout)["data"]
    proxy = helm.one(deployed.manifests, "Secret", f"{helm.RELEASE}-gateway-proxy-client")
    assert configmap["requestheader-client-ca-file"] == \
        base64.b64decode(proxy["data"]["ca.crt"]).decode()
    assert json.loads(configmap["requestheader-allowed-names"]) == ["front-proxy-client"]


def test_service_account_tokens_are_signed_with_the_charts_key(deployed: Deployed) -> None:
    deployed.kubectl("create", "namespace", "tokens")
    deployed.kubectl("create", "serviceaccount", "probe", "-n", "tokens")
    token = deployed.kubectl("create", "token", "probe", "-n", "tokens").stdout.strip()
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["alg"] == "ES256"
    as_probe = _kubeconfig(deployed.workdir / "probe.kubeconfig", deployed.url, deployed.ca,
                           {"token": token})
    whoami = json.loads(deployed.kubectl("auth", "whoami", "-o", "json",
                                         kubeconfig=as_probe).stdout)
    assert whoami["status"]["userInfo"]["username"] == "system:serviceaccount:tokens:probe"


def test_audit_events_go_to_the_container_output(deployed: Deployed) -> None:
    deployed.kubectl("get", "namespaces")

    def audited() -> bool:
        assert '"apiVersion":"audit.k8s.io/v1"' in deployed.log().replace(" ", "")
        return True

    eventually(audited, what="an audit event in the gateway's output")


def test_the_notes_recipe_gives_a_working_kubeconfig(deployed: Deployed) -> None:
    """Step 2 of NOTES.txt, run as written, against a "cluster" holding the release's Secrets
    (the gateway itself), with the port-forward's address replaced by the test's."""
    store_release_secrets(deployed)
    text = helm.notes(VALUES)
    step = text[text.index("2. Get a kubeconfig"):text.index("3. Reach it")]
    script = "\n".join(line for line in step.splitlines()[1:]).replace(
        "https://127.0.0.1:6443", deployed.url)
    workdir = deployed.workdir / "notes"
    workdir.mkdir()
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=workdir,
                            capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(deployed.kubeconfig),
                                 "HOME": str(workdir)})
    assert result.returncode == 0, result.stderr
    mine = workdir / "gateway.kubeconfig"
    whoami = json.loads(deployed.kubectl("auth", "whoami", "-o", "json", kubeconfig=mine).stdout)
    assert whoami["status"]["userInfo"]["username"] == "gateway-admin"
    assert deployed.kubectl("get", "--raw", "/readyz", kubeconfig=mine).stdout == "ok"


def test_registration_applies_prunes_and_lookup_keeps_the_keys(deployed: Deployed) -> None:
    first = run_registration_job(deployed, deployed.manifests, "job-install")
    assert first.returncode == 0, first.stderr
    services = registered(deployed)
    assert sorted(services) == sorted(GROUPS)
    wardle = services["v1alpha1.wardle.example.com"]["spec"]
    assert wardle["service"] == {"name": "wardle", "namespace": "wardle", "port": 443}
    assert wardle["caBundle"] == VALUES["apiServices"][0]["caBundle"]
    assert services["v1beta1.metrics.example.com"]["spec"]["insecureSkipTLSVerify"] is True
    # their Services are in the gateway too, so availability is checked against the backend
    # (which does not run here), not refused for want of a Service
    assert backend_services(deployed) == sorted(
        f"{e['service']['namespace']}/{e['service']['name']}" for e in VALUES["apiServices"])
    eventually(lambda: availability_reason(deployed, "v1alpha1.wardle.example.com") not in
               ("", "ServiceNotFound"), timeout=30, what="a check past the Service")

    secrets = store_release_secrets(deployed)

    config = helm_python.Config(kubeconfig_path=deployed.kubeconfig, namespace=helm.NAMESPACE)
    try:
        fewer = {**VALUES, "apiServices": VALUES["apiServices"][:1]}
        upgraded = helm.manifests_of(helm.render_files(fewer, upgrade=True, config=config))
        for secret in secrets:
            kept = helm.one(upgraded, "Secret", secret["metadata"]["name"])
            assert kept["data"] == secret["data"], secret["metadata"]["name"]
        # without the cluster to read back, every key and certificate would be new
        offline = helm.render(fewer, upgrade=True)
        assert helm.one(offline, "Secret", f"{helm.RELEASE}-gateway-tokens")["data"] != \
            helm.one(upgraded, "Secret", f"{helm.RELEASE}-gateway-tokens")["data"]

        second = run_registration_job(deployed, upgraded, "job-upgrade")
        assert second.returncode == 0, second.stderr
        assert sorted(registered(deployed)) == GROUPS[:1]
        kept = VALUES["apiServices"][0]["service"]
        assert backend_services(deployed) == [f"{kept['namespace']}/{kept['name']}"]

        emptied = helm.manifests_of(helm.render_files(
            {**VALUES, "apiServices": []}, upgrade=True, config=config))
        third = run_registration_job(deployed, emptied, "job-empty")
        assert third.returncode == 0, third.stderr
        assert registered(deployed) == {}
        assert backend_services(deployed) == []
    finally:
        config.close()
    # the gateway's own APIServices were never touched
    local = deployed.kubectl("get", "apiservices", "-o", "name").stdout
    assert re.search(r"apiservice.apiregistration.k8s.io/v1\.rbac\.authorization\.k8s\.io", local)
