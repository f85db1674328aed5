"""deploy/kind, checked as far as a machine without a container engine allows: up.sh passes
shellcheck (strictest severity) and stops before touching anything when a tool is missing; the
chart accepts the values up.sh gives it and renders what up.sh then looks up (Secrets by
component, one Deployment, one Service); the example's manifests (its Deployment, and its
identity in the gateway) are valid for Kubernetes 1.32 and agree with those values and with
up.sh; up.sh's step that gives the example its identity in the gateway, run as written against
a real gateway, makes a kubeconfig the gateway takes for that ServiceAccount, keeps it while it
works and mints a new token when it does not; and the example server (examples/wardle),
started locally with the image's entrypoint, the manifest's arguments and that kubeconfig,
delegates to that gateway: ready once it has read the gateway's front-proxy CA, requests over
the gateway's front-proxy certificate served as the user they name and authorized by
SubjectAccessReview, bearer tokens checked by TokenReview."""

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy import helm
from tests.deploy.test_dockerfile import exec_form, instructions, stages, tool
from tests.support.gateway import GatewayProcess, free_port
from tests.support.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "deploy" / "kind"
UP = KIND / "up.sh"
MANIFEST = KIND / "example" / "wardle-apiserver.yaml"
IDENTITY = KIND / "example" / "wardle-apiserver-identity.yaml"
EXAMPLE_DOCKERFILE = KIND / "example" / "Dockerfile"
#: shellcheck's optional checks that are not mere taste (brace style and the like are left off).
SHELLCHECK_OPTIONAL = ("quote-safe-variables,require-double-brackets,avoid-nullary-conditions,"
                       "deprecate-which,check-unassigned-uppercase,add-default-case")
TAG = "sha-0123456789ab"
SERVICE_NAME = "wardle-apiserver.wardle.svc"
EXAMPLE_USER = "system:serviceaccount:wardle:wardle-apiserver"
FLUNDERS = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders"
#: jane may list and create flunders (in the gateway's RBAC, which the example asks).
FLUNDER_EDITOR = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flunder-editor}
rules: [{apiGroups: [wardle.example.com], resources: [flunders], verbs: [get, list, create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: jane-edits-flunders}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flunder-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: jane}]
"""


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


def kind_values_raw() -> dict[str, Any]:
    return yaml.safe_load((KIND / "values.yaml").read_text())


def kind_values(pki: Path) -> dict[str, Any]:
    """deploy/kind/values.yaml as up.sh passes it: the CA filled in, the image tag set."""
    ca_bundle = base64.b64encode((pki / "wardle" / "ca.crt").read_bytes()).decode()
    values = yaml.safe_load((KIND / "values.yaml").read_text().replace("@CA_BUNDLE@", ca_bundle))
    values["image"]["tag"] = TAG
    return values


def example_manifests() -> list[dict[str, Any]]:
    text = MANIFEST.read_text().replace("@WARDLE_IMAGE@", f"wardle-apiserver:{TAG}")
    text = text.replace("@KUBECONFIG_CHECKSUM@", "12345")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def identity_manifests() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(IDENTITY.read_text()) if doc]


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
    # the APIServices the chart registers, one per version the example serves, name the
    # example's Service, and up.sh waits for each
    apiservices = helm.embedded_apiservices(manifests)
    names = {apiservice["metadata"]["name"] for apiservice in apiservices}
    assert names == {"v1alpha1.wardle.example.com", "v1beta1.wardle.example.com"}
    service = by_kind(example_manifests(), "Service")
    for apiservice in apiservices:
        ref = apiservice["spec"]["service"]
        assert (ref["namespace"], ref["name"]) == (service["metadata"]["namespace"],
                                                    service["metadata"]["name"])
        assert ref["port"] in [port["port"] for port in service["spec"]["ports"]]
        assert base64.b64decode(apiservice["spec"]["caBundle"]) == \
            (pki / "wardle/ca.crt").read_bytes()
    (waited,) = re.findall(r"^APISERVICES=\((.*)\)$", UP.read_text(), re.MULTILINE)
    assert set(waited.split()) == names


# ---------------------------------------------------------------------------------------------
# the example server
# ---------------------------------------------------------------------------------------------

def test_example_manifests_are_valid_for_kubernetes_1_32() -> None:
    for doc in example_manifests() + identity_manifests():
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
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    assert mounts.keys() == volumes.keys()
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"]
    # every path it writes is a volume of its own (the root filesystem is read-only)
    args = dict(arg.removeprefix("--").split("=", 1) for arg in container["args"])
    assert args["data-dir"] in [mounts[name] for name, volume in volumes.items()
                                if "emptyDir" in volume]
    # the three kubeconfigs are the one up.sh puts in the Secret, under the key it uses
    text = UP.read_text()
    kubeconfigs = {args[flag] for flag in ("authentication-kubeconfig",
                                           "authorization-kubeconfig", "kubeconfig")}
    assert len(kubeconfigs) == 1, kubeconfigs
    folder, key = kubeconfigs.pop().rsplit("/", 1)
    (holder,) = [name for name, path in mounts.items() if path == folder]
    secret = volumes[holder]["secret"]["secretName"]
    secret = re.escape(secret.replace("wardle-apiserver", "$EXAMPLE_NAME"))
    assert re.search(rf'create secret generic "{secret}"[\s\\]+--from-file="{key}=', text)
    # up.sh creates what the pod mounts, under these names, and fills in every placeholder
    for volume in volumes.values():
        if "emptyDir" not in volume:
            source = volume["secret"]["secretName"]
            assert source.replace("wardle-apiserver", "$EXAMPLE_NAME") in text, source
    placeholders = set(re.findall(r"@[A-Z_]+@", MANIFEST.read_text()))
    assert placeholders == set(re.findall(r'-e "s\|(@[A-Z_]+@)\|', text)), placeholders
    assert mounts["tmp"] == "/tmp"


def test_example_identity_is_what_up_sh_checks() -> None:
    """The ServiceAccount up.sh mints a token of, in the namespace the chart's registration job
    creates in the gateway, bound as kube's sample-apiserver is."""
    docs = identity_manifests()
    (account,) = [doc for doc in docs if doc["kind"] == "ServiceAccount"]
    namespace, name = account["metadata"]["namespace"], account["metadata"]["name"]
    assert f"system:serviceaccount:{namespace}:{name}" == EXAMPLE_USER
    assert f"EXAMPLE_NAMESPACE={namespace}\n" in UP.read_text()
    assert f"EXAMPLE_NAME={name}\n" in UP.read_text()
    assert {ref["service"]["namespace"] for ref in kind_values_raw()["apiServices"]} == \
        {namespace}
    roles = set()
    for binding in docs:
        if binding["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                            "namespace": namespace}]
            roles.add((binding["roleRef"]["kind"], binding["roleRef"]["name"],
                       binding["metadata"].get("namespace")))
    assert ("ClusterRole", "system:auth-delegator", None) in roles
    assert ("Role", "extension-apiserver-authentication-reader", "kube-system") in roles


def https_get(port: int, path: str, context: ssl.SSLContext,
              headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET over TLS to 127.0.0.1, checking the certificate for the example Service's name, as
    the gateway does (the name is not in local DNS)."""
    return https_request(port, "GET", path, context, headers)


def https_request(port: int, method: str, path: str, context: ssl.SSLContext,
                  headers: dict[str, str] | None = None, body: Any = None
                  ) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    conn.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                    server_hostname=SERVICE_NAME)
    data = None if body is None else json.dumps(body).encode()
    try:
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# against a real gateway: up.sh's identity step, and the example server delegating to it
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The gateway the example delegates to, with the namespace the chart's registration job
    creates in it for the example's APIServices."""
    with GatewayProcess(tmp_path_factory.mktemp("kind-gateway")) as proc:
        proc.kubectl("create", "namespace", "wardle")
        yield proc


def run_identity_step(state: Path, admin_kubeconfig: Path, ca: Path, server_name: str,
                      port: int) -> subprocess.CompletedProcess[str]:
    """up.sh's step 6 as it is written, with what steps 1 to 5 would have set: the state
    directory, the gateway's CA (``ca``), its Service's name (``server_name``, which its
    serving certificate holds) and port, the local port forwarded to it (here the same
    ``port``), and ``gw``: kubectl as the gateway's admin."""
    text = UP.read_text()
    start, end = text.index("# -- 6. "), text.index("# -- 7. ")
    helpers = re.findall(r"^(?:say|die)\(\) .*$", text, re.MULTILINE)
    names = re.findall(r"^EXAMPLE_(?:NAMESPACE|NAME)=.*$", text, re.MULTILINE)
    assert len(helpers) == 2 and len(names) == 2
    (state / "wardle").mkdir(parents=True, exist_ok=True)
    shutil.copy(ca, state / "gateway-ca.crt")
    script = "\n".join([
        "set -euo pipefail", *helpers, *names,
        f"ROOT={ROOT}", f"STATE_DIR={state}", f"SERVER_NAME={server_name}",
        f"SERVICE_PORT={port}", f"port={port}",
        f'gw() {{ kubectl --kubeconfig "{admin_kubeconfig}" "$@"; }}',
        text[start:end]])
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(state)})


def run_identity_step_for(gateway: GatewayProcess, state: Path
                          ) -> subprocess.CompletedProcess[str]:
    """The step against a local gateway, whose certificate names localhost."""
    return run_identity_step(state, gateway.kubeconfig, gateway.cert_dir / "ca.crt",
                             "localhost", gateway.port)


def whoami(kubeconfig: Path, gateway: GatewayProcess) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--server", gateway.url, "auth", "whoami",
         "-o", "jsonpath={.status.userInfo.username}"],
        capture_output=True, text=True, timeout=60)
    return result.stdout if result.returncode == 0 else f"error: {result.stderr}"


@pytest.mark.slow
def test_up_sh_gives_the_example_an_identity_in_the_gateway(gateway: GatewayProcess,
                                                             tmp_path: Path) -> None:
    """Its kubeconfig names the gateway's Service and CA and carries a token the gateway takes
    for the example's ServiceAccount; run again, it keeps that token; with a token the gateway
    no longer takes, it mints a new one."""
    first = run_identity_step_for(gateway, tmp_path)
    assert first.returncode == 0, first.stderr
    kubeconfig = tmp_path / "wardle" / "kubeconfig"
    config = yaml.safe_load(kubeconfig.read_text())
    assert (kubeconfig.stat().st_mode & 0o777) == 0o600
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == f"https://localhost:{gateway.port}"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == \
        (gateway.cert_dir / "ca.crt").read_bytes()
    (user,) = config["users"]
    token = user["user"]["token"]
    assert whoami(kubeconfig, gateway) == EXAMPLE_USER
    # the ServiceAccount's token is a year long (kubectl create token --duration)
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert 364 * 86400 <= claims["exp"] - claims["iat"] <= 366 * 86400, claims

    again = run_identity_step_for(gateway, tmp_path)
    assert again.returncode == 0, again.stderr
    assert yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"] == token

    (tmp_path / "wardle" / "token").write_text("not-a-token-the-gateway-signed\n")
    renewed = run_identity_step_for(gateway, tmp_path)
    assert renewed.returncode == 0, renewed.stderr
    new_token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    assert new_token not in (token, "not-a-token-the-gateway-signed")
    assert whoami(kubeconfig, gateway) == EXAMPLE_USER


@pytest.mark.slow
def test_example_server_runs_as_deployed(pki: Path, gateway: GatewayProcess,
                                         tmp_path: Path) -> None:
    """The image's entrypoint with the manifest's arguments, the mounted paths pointed at local
    files (the kubeconfig up.sh's step makes, its server the local gateway) and the port at a
    free one: the readiness probe answers over the serving certificate for
    wardle-apiserver.wardle.svc once the server has read the gateway's front-proxy CA, a
    request over the gateway's front-proxy client certificate is served as the user it names
    and authorized by the gateway (SubjectAccessReview), and a bearer token is checked by the
    gateway (TokenReview)."""
    entrypoint = exec_form(instructions(stages(EXAMPLE_DOCKERFILE)[-1], "ENTRYPOINT")[-1])
    assert entrypoint == ["python", "-m", "examples.wardle"]
    state = tmp_path / "state"
    step = run_identity_step_for(gateway, state)
    assert step.returncode == 0, step.stderr
    pod = by_kind(example_manifests(), "Deployment")["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    port = free_port()
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    local = {"serving": pki / "wardle", "gateway": tmp_path / "gateway",
             "data": tmp_path / "data", "tmp": tmp_path / "tmp"}
    assert local.keys() == set(mounts.values())
    for folder in local.values():
        folder.mkdir(exist_ok=True)
    shutil.copy(state / "wardle" / "kubeconfig", local["gateway"] / "kubeconfig")

    def localize(arg: str) -> str:
        flag, _, value = arg.partition("=")
        for path, name in mounts.items():
            if value == path or value.startswith(path + "/"):
                value = str(local[name]) + value.removeprefix(path)
                break
        return f"{flag}={value.replace('0.0.0.0', '127.0.0.1').replace('8443', str(port))}"

    args = [localize(arg) for arg in container["args"]]
    assert any(str(port) in arg for arg in args) and all("/etc/" not in arg for arg in args)
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, *entrypoint[1:], *args], cwd=tmp_path,
                                env={**os.environ, "PYTHONPATH": str(ROOT),
                                     "TMPDIR": str(local["tmp"])},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        trust = ssl.create_default_context(cafile=str(pki / "wardle" / "ca.crt"))
        probe = container["readinessProbe"]["httpGet"]
        assert probe["scheme"] == "HTTPS" and probe["port"] == "https"
        assert container["livenessProbe"]["httpGet"]["path"] == "/livez"

        def ready() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                status, body = https_get(port, probe["path"], trust)
            except OSError as err:
                raise AssertionError(str(err)) from None
            assert status == 200, body
            return True

        eventually(ready, timeout=30, interval=0.1, what="the example's readiness probe")
        assert https_get(port, "/livez", trust)[0] == 200
        # jane may list and create flunders in the gateway's RBAC, bob may not
        gateway.kubectl("apply", "-f", "-", input=FLUNDER_EDITOR)
        # the gateway's identity towards backends: the front-proxy client certificate
        front_proxy = ssl.create_default_context(cafile=str(pki / "wardle" / "ca.crt"))
        front_proxy.load_cert_chain(str(gateway.cert_dir / "front-proxy-client.crt"),
                                    str(gateway.cert_dir / "front-proxy-client.key"))

        def as_user(user: str, method: str = "GET", body: Any = None) -> tuple[int, bytes]:
            return https_request(port, method, FLUNDERS, front_proxy,
                                 {"X-Remote-User": user, "X-Remote-Group": "devs"}, body)

        flunder = {"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
                   "metadata": {"name": "local"}}
        status, body = as_user("jane", "POST", flunder)
        assert status == 201, body
        status, body = as_user("jane")
        assert status == 200, body
        assert [item["metadata"]["name"] for item in json.loads(body)["items"]] == ["local"]
        status, body = as_user("bob")
        assert status == 403 and b'User \\"bob\\" cannot list' in body, body
        # without the front-proxy certificate the header counts for nothing: anonymous
        status, body = https_get(port, FLUNDERS, trust, {"X-Remote-User": "jane"})
        assert status == 403 and b"system:anonymous" in body, body
        # a bearer token is the gateway's to check: the example's own, which may not list
        token = yaml.safe_load((local["gateway"] / "kubeconfig").read_text())["users"][0][
            "user"]["token"]
        status, body = https_get(port, FLUNDERS, trust, {"Authorization": f"Bearer {token}"})
        assert status == 403 and EXAMPLE_USER.encode() in body, body
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
    assert "Traceback" not in log.read_text(), log.read_text()
