"""deploy/kind, checked as far as a machine without a container engine allows: up.sh passes
shellcheck (strictest severity) and stops before touching anything when a tool is missing; the
chart accepts the values up.sh gives it and renders what up.sh then looks up (Secrets by
component, one Deployment, one Service); the example's manifest is valid for Kubernetes 1.32
and agrees with those values; and
the example server, started locally with the image's entrypoint and the manifest's arguments,
serves its readiness probe and trusts the gateway's front-proxy certificate."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy import helm
from tests.deploy.test_dockerfile import exec_form, instructions, stages, tool
from tests.support.gateway import free_port
from tests.support.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "deploy" / "kind"
UP = KIND / "up.sh"
MANIFEST = KIND / "example" / "wardle-apiserver.yaml"
EXAMPLE_DOCKERFILE = KIND / "example" / "Dockerfile"
#: shellcheck's optional checks that are not mere taste (brace style and the like are left off).
SHELLCHECK_OPTIONAL = ("quote-safe-variables,require-double-brackets,avoid-nullary-conditions,"
                       "deprecate-which,check-unassigned-uppercase,add-default-case")
TAG = "sha-0123456789ab"
SERVICE_NAME = "wardle-apiserver.wardle.svc"


def gateway_cli(*args: str) -> None:
    gateway = Path(sys.executable).parent / "gateway"
    subprocess.run([str(gateway), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What up.sh makes with the gateway image: a CA and the example's serving certificate
    (here also the front-proxy CA and client certificate of a development PKI, standing in for
    the chart's proxy client Secret)."""
    root = tmp_path_factory.mktemp("kind-pki")
    gateway_cli("certs", "--cert-dir", str(root / "ca"))
    gateway_cli("certs", "serving", "--cert-dir", str(root / "ca"), "--name",
                "wardle-apiserver", "--namespace", "wardle", "--out", str(root / "wardle"))
    return root


def kind_values(pki: Path) -> dict[str, Any]:
    """deploy/kind/values.yaml as up.sh passes it: the CA filled in, the image tag set."""
    ca_bundle = base64.b64encode((pki / "wardle" / "ca.crt").read_bytes()).decode()
    values = yaml.safe_load((KIND / "values.yaml").read_text().replace("@CA_BUNDLE@", ca_bundle))
    values["image"]["tag"] = TAG
    return values


def example_manifests() -> list[dict[str, Any]]:
    text = MANIFEST.read_text().replace("@WARDLE_IMAGE@", f"wardle-apiserver:{TAG}")
    text = text.replace("@FRONT_PROXY_CA_CHECKSUM@", "12345")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"{kind}: {len(found)}"
    return found[0]


# ---------------------------------------------------------------------------------------------
# up.sh
# ---------------------------------------------------------------------------------------------

def test_up_sh_passes_shellcheck() -> None:
    result = subprocess.run(
        [tool("shellcheck"), "--severity=style", "--shell=bash", "--external-sources",
         f"--enable={SHELLCHECK_OPTIONAL}", "--format=gcc", str(UP)],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"shellcheck:\n{result.stdout}{result.stderr}"


def test_shellcheck_reports_a_bad_script(tmp_path: Path) -> None:
    """The check runs for real: an unquoted expansion is reported."""
    bad = tmp_path / "up.sh"
    bad.write_text(UP.read_text().replace('mkdir -p "$STATE_DIR"', "cd $STATE_DIR"))
    result = subprocess.run([tool("shellcheck"), "--format=json", str(bad)],
                            capture_output=True, text=True, timeout=60)
    codes = {finding["code"] for finding in json.loads(result.stdout)}
    assert result.returncode != 0 and 2086 in codes, codes


def test_up_sh_is_strict_and_executable() -> None:
    text = UP.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert os.access(UP, os.X_OK)
    subprocess.run(["bash", "-n", str(UP)], check=True, timeout=30)


def test_up_sh_names_missing_tools_before_doing_anything(tmp_path: Path) -> None:
    """With only kubectl, base64 and sed on the PATH it stops at once, naming the others."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("kubectl", "base64", "sed"):
        found = shutil.which(name)
        assert found, name
        (bin_dir / name).symlink_to(found)
    state = tmp_path / "state"
    result = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(UP)], capture_output=True, text=True,
        timeout=30, cwd=tmp_path,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path), "STATE_DIR": str(state)})
    assert result.returncode == 1, result.stderr
    assert "missing on the PATH: docker kind helm " in result.stderr, result.stderr
    assert not state.exists()


def test_kind_cluster_config() -> None:
    config = yaml.safe_load((KIND / "cluster.yaml").read_text())
    assert config["kind"] == "Cluster"
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [node["role"] for node in config["nodes"]] == ["control-plane"]
    assert '--config "$ROOT/deploy/kind/cluster.yaml"' in UP.read_text()


# ---------------------------------------------------------------------------------------------
# the chart with up.sh's values
# ---------------------------------------------------------------------------------------------

def test_chart_renders_the_kind_values_as_up_sh_uses_them(pki: Path) -> None:
    values = kind_values(pki)
    manifests = helm.render(values, name="gateway", namespace="gateway")
    container = helm.container(manifests)
    assert container["image"] == f"gateway:{TAG}"
    assert container["imagePullPolicy"] == "Never"  # only what up.sh loaded into the node
    # the objects up.sh finds by the release's labels exist, once each
    instance = {"app.kubernetes.io/instance": "gateway"}

    def labelled(kind: str, **labels: str) -> list[dict[str, Any]]:
        wanted = {**instance, **labels}
        return [m for m in helm.find(manifests, kind)
                if wanted.items() <= (m["metadata"].get("labels") or {}).items()]

    assert len(labelled("Deployment")) == 1 and len(labelled("Service")) == 1
    for component, key in re.findall(r"secret_data ([a-z-]+) ([\w.]+)", UP.read_text()):
        secrets = labelled("Secret", **{"app.kubernetes.io/component": component})
        assert len(secrets) == 1, f"up.sh reads the Secret of component {component}"
        assert key in secrets[0]["data"], (component, key)
    # the APIService the chart registers names the example's Service
    (apiservice,) = helm.embedded_apiservices(manifests)
    service = by_kind(example_manifests(), "Service")
    ref = apiservice["spec"]["service"]
    assert (ref["namespace"], ref["name"]) == (service["metadata"]["namespace"],
                                                service["metadata"]["name"])
    assert ref["port"] in [port["port"] for port in service["spec"]["ports"]]
    assert base64.b64decode(apiservice["spec"]["caBundle"]) == (pki / "wardle/ca.crt").read_bytes()
    assert apiservice["metadata"]["name"] in UP.read_text()


# ---------------------------------------------------------------------------------------------
# the example server
# ---------------------------------------------------------------------------------------------

def test_example_manifest_is_valid_for_kubernetes_1_32() -> None:
    for doc in example_manifests():
        kubernetes_validate.validate(doc, helm.KUBE_VERSION.removeprefix("v"), strict=True)
    broken = by_kind(example_manifests(), "Deployment")
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # a typo'd field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, helm.KUBE_VERSION.removeprefix("v"), strict=True)


def test_example_manifest_is_consistent() -> None:
    docs = example_manifests()
    assert [doc["kind"] for doc in docs] == ["Namespace", "Service", "Deployment"]
    deployment, service = by_kind(docs, "Deployment"), by_kind(docs, "Service")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= \
        pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert container["image"] == f"wardle-apiserver:{TAG}"
    port_names = {port["name"] for port in container["ports"]}
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= port_names
    mounts = {mount["name"] for mount in container["volumeMounts"]}
    assert mounts == {volume["name"] for volume in pod["spec"]["volumes"]}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"]
    # up.sh creates what the pod mounts, under these names
    text = UP.read_text()
    for volume in pod["spec"]["volumes"]:
        source = volume.get("secret", {}).get("secretName") or volume["configMap"]["name"]
        assert source.replace("wardle-apiserver", "$EXAMPLE_NAME") in text, source


def https_get(port: int, path: str, context: ssl.SSLContext,
              headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET over TLS to 127.0.0.1, checking the certificate for the example Service's name, as
    the gateway does (the name is not in local DNS)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    conn.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                    server_hostname=SERVICE_NAME)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.slow
def test_example_server_runs_as_deployed(pki: Path, tmp_path: Path) -> None:
    """The image's entrypoint with the manifest's arguments, the mounted paths pointed at local
    files and the port at a free one: the readiness probe answers over the serving certificate
    for wardle-apiserver.wardle.svc, and a request over the gateway's front-proxy client
    certificate is served as the user it names."""
    entrypoint = exec_form(instructions(stages(EXAMPLE_DOCKERFILE)[-1], "ENTRYPOINT")[-1])
    assert entrypoint[0] == "python"
    pod = by_kind(example_manifests(), "Deployment")["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    port = free_port()
    volumes = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    local = {"serving": pki / "wardle", "front-proxy": tmp_path / "front-proxy"}
    local["front-proxy"].mkdir()
    shutil.copy(pki / "ca" / "front-proxy-ca.crt", local["front-proxy"] / "ca.crt")

    def localize(arg: str) -> str:
        for path, name in volumes.items():
            arg = arg.replace(path, str(local[name]))
        return arg.replace("=8443", f"={port}").replace("=0.0.0.0", "=127.0.0.1")

    args = [localize(arg) for arg in container["args"]]
    assert any(str(port) in arg for arg in args) and all("/etc/" not in arg for arg in args)
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, *entrypoint[1:], *args], cwd=tmp_path,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        trust = ssl.create_default_context(cafile=str(pki / "wardle" / "ca.crt"))
        probe = container["readinessProbe"]["httpGet"]
        assert probe["scheme"] == "HTTPS" and probe["port"] == "https"

        def ready() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                status, body = https_get(port, probe["path"], trust)
            except OSError as err:
                raise AssertionError(str(err)) from None
            assert status == 200, body
            return True

        eventually(ready, timeout=30, interval=0.1, what="the example's readiness probe")
        # the gateway's identity towards backends: the front-proxy client certificate
        gateway = ssl.create_default_context(cafile=str(pki / "wardle" / "ca.crt"))
        gateway.load_cert_chain(str(pki / "ca" / "front-proxy-client.crt"),
                                str(pki / "ca" / "front-proxy-client.key"))
        whoami = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/x/whoami"
        status, body = https_get(port, whoami, gateway, {"X-Remote-User": "jane",
                                                         "X-Remote-Group": "devs"})
        assert status == 200, body
        assert json.loads(body)["user"] == "jane"
        status, _ = https_get(port, whoami, trust, {"X-Remote-User": "jane"})
        assert status == 401  # no front-proxy certificate: the header counts for nothing
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
