"""The images built and run (issue 19, item 1): deploy/Dockerfile built with podman on the
stand-in Python base, the kind example's image built on it, and both run as their manifests
run them (tests/deploy/pod.py: the chart's rendered command, arguments, Secrets, securityContext
and volumes), then checked from outside with kubectl:

- the image: no compiler anywhere in it, the compiled proxy extension in it, a numeric non-root
  user (the chart's), its HEALTHCHECK in the image config;
- the chart's embedded mode: /readyz, kubectl over an admin client certificate, the HEALTHCHECK
  passing (and failing against a port nothing listens on); the kind example's container
  (examples/wardle) with the identity and kubeconfig up.sh's step 6 gives it in the gateway,
  delegating to the gateway's container (the front-proxy CA, SubjectAccessReviews, admission)
  and served through it over the chart's proxy-client certificate: kubectl gets and applies
  flunders in both versions, RBAC in the gateway decides who may; and a ConfigMap still there
  after the gateway's container is stopped (SIGTERM, exit 0 within the grace period) and a new
  one started on the same data volume, the example served through the new one;
- the chart's etcd mode: a TLS etcd (client certificates required) reached under the chart's
  endpoint names, the ConfigMap found in etcd under the chart's prefix;
- the image run as the docs say (`docker run` with two volumes): its own entrypoint, the
  development PKI and its admin kubeconfig.

Only the network differs from a cluster: the container's ports are published on free
127.0.0.1 ports, the Service names the containers dial (etcd's, the example's, the gateway's)
resolve to the host's loopback, and the example's APIServices and kubeconfig name the published
ports instead of 443.

podman must work (root, runc: tests/support/podman.py); when it cannot, these tests fail with
the reason. The first build on a machine takes minutes (the base image, apt and PyPI); later
ones reuse podman's layer cache.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import ssl
import subprocess
import time
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import helm
from tests.deploy.pod import Objects, Pod, objects_of, pod_of
from tests.deploy.test_kind import run_identity_step
from tests.support import podman
from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, issue_pair, pem
from tests.support.etcd import EtcdCluster, etcd_binary, member_names
from tests.support.gateway import free_port, send
from tests.support.reliability import record
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
EXAMPLE_DOCKERFILE = ROOT / "deploy" / "kind" / "example" / "Dockerfile"
EXAMPLE_MANIFEST = ROOT / "deploy" / "kind" / "example" / "wardle-apiserver.yaml"
KIND_VALUES = ROOT / "deploy" / "kind" / "values.yaml"
GATEWAY_TAG = "localhost/gateway:image-test"
WARDLE_TAG = "localhost/wardle-apiserver:image-test"
SERVER_NAME = f"{helm.RELEASE}-gateway.{helm.NAMESPACE}.svc"
WARDLE_SERVICE = "wardle-apiserver.wardle.svc"
CLIENT_CA_SECRET = "gateway-client-ca"
ETCD_SECRET = "gateway-etcd-client"
ADMIN = "image-test-admin"
GROUP = "wardle.example.com"
#: In the gateway's RBAC, which the example asks by SubjectAccessReview: reader may read
#: flunders and nothing more.
FLUNDER_READER = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: flunder-reader}}
rules: [{{apiGroups: [{GROUP}], resources: [flunders], verbs: [get, list, watch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: flunder-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flunder-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: reader}}]
"""
FLUNDER = f"""
apiVersion: {GROUP}/v1alpha1
kind: Flunder
metadata: {{name: through-the-image, namespace: default}}
spec: {{reference: other, referenceType: Flunder}}
"""
#: Executables of a C toolchain or Cython, by file name (versioned and triplet-prefixed too).
COMPILER = re.compile(r"(?:x86_64-linux-gnu-)?(?:gcc|g\+\+|cc|c\+\+|cpp|clang|tcc|cc1|cc1plus"
                      r"|ld|as|cython|cythonize)(?:-\d+)?")


# ---------------------------------------------------------------------------------------------
# the images and what the tests share
# ---------------------------------------------------------------------------------------------

@dataclass
class Images:
    gateway: podman.Build
    wardle: podman.Build


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Images:
    """Both images, built when their inputs changed since the last build on this machine
    (podman's layer cache then rebuilds only what changed)."""
    podman.require()
    logs = tmp_path_factory.mktemp("image-builds")
    gateway = podman.build(DOCKERFILE, GATEWAY_TAG, log=logs / "gateway.log",
                           build_args={"PYTHON_IMAGE": podman.BASE_IMAGE},
                           keep_stages=("builder",))
    wardle = podman.build(EXAMPLE_DOCKERFILE, WARDLE_TAG, log=logs / "wardle.log",
                          build_args={"GATEWAY_IMAGE": GATEWAY_TAG})
    podman.remove_chains(*wardle.replaced, *gateway.replaced)
    return Images(gateway, wardle)


@dataclass
class PKI:
    """What exists before the release: the client CA and an admin signed by it (the chart's
    auth.clientCA.existingSecret), and the example backend's serving certificate."""

    dir: Path
    client_ca: Path
    admin_cert: Path
    admin_key: Path
    wardle_ca: Path
    wardle_cert: Path
    wardle_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    out = tmp_path_factory.mktemp("image-pki")
    client_ca = Issuer.new("image-test-client-ca")
    (out / "client-ca.crt").write_bytes(pem(client_ca.cert))
    admin = issue_pair(out, "admin", ADMIN, client_ca, orgs=("system:masters",),
                       usages=(CLIENT_AUTH,))
    wardle_ca = Issuer.new("wardle-ca")
    (out / "wardle-ca.crt").write_bytes(pem(wardle_ca.cert))
    wardle = issue_pair(out, "wardle", "wardle-apiserver", wardle_ca, usages=(SERVER_AUTH,),
                        sans=(WARDLE_SERVICE,))
    return PKI(out, out / "client-ca.crt", admin.cert, admin.key, out / "wardle-ca.crt",
               wardle.cert, wardle.key)


def chart_values(**overrides: Any) -> dict[str, Any]:
    """The release's values: client certificates from the test's CA, a short shutdown delay
    (the default 10 s only waits for load balancers), audit events on stdout."""
    values: dict[str, Any] = {
        "auth": {"clientCA": {"existingSecret": CLIENT_CA_SECRET}},
        "server": {"shutdownDelayDuration": "2s"},
        "audit": {"enabled": True},
    }
    values.update(overrides)
    return values


def cluster_objects(manifests: list[dict[str, Any]], pki: PKI,
                    extra: dict[str, dict[str, bytes]] | None = None) -> Objects:
    """The rendered Secrets and ConfigMaps, plus the Secrets the values name as existing."""
    objects = objects_of(manifests)
    objects["Secret"][CLIENT_CA_SECRET] = {"ca.crt": pki.client_ca.read_bytes()}
    objects["Secret"].update(extra or {})
    return objects


@dataclass
class Gateway:
    """The gateway's container as the chart runs it, and kubectl against it."""

    container: podman.Container
    pod: Pod
    manifests: list[dict[str, Any]]
    workdir: Path
    kubeconfig: Path
    ca: Path

    @property
    def url(self) -> str:
        return self.pod.url("https")

    def kubectl(self, *args: str, check: bool = True, input: str | None = None
                ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}",
             f"--cache-dir={self.workdir / 'kubecache'}", *args],
            capture_output=True, text=True, timeout=60, input=input)
        if check:
            assert result.returncode == 0, (
                f"kubectl {' '.join(args)}: {result.stderr}\n--- gateway:\n"
                f"{self.container.logs()}")
        return result

    def probe(self, path: str = "") -> tuple[int, bytes]:
        """A request without credentials, as the kubelet probes (here verifying the serving
        certificate for the Service's name as well)."""
        status, body, _ = send(self.url + path, "GET", trusting(self.ca), timeout=10)
        return status, body

    def wait_ready(self, timeout: float = 120) -> float:
        """Seconds until the readiness probe's path answers 200."""
        return wait_ready(self.container, self.pod, trusting(self.ca), timeout)


def wait_ready(container: podman.Container, pod: Pod, context: ssl.SSLContext,
               timeout: float = 120) -> float:
    """Seconds until the pod's readiness probe (an HTTPS GET without credentials) answers
    200; the container's log in the failure when it exits or never does."""
    probe = pod.container["readinessProbe"]["httpGet"]
    assert probe["scheme"] == "HTTPS"
    url = pod.url(probe["port"], probe["path"])
    started = time.monotonic()

    def ready() -> bool:
        if not container.running:  # not an AssertionError: no point waiting any longer
            raise RuntimeError(f"the container exited:\n{container.logs()}")
        try:
            status, body, _ = send(url, "GET", context, timeout=10)
        except OSError as err:
            raise AssertionError(str(err)) from None
        assert status == 200, body
        return True

    try:
        eventually(ready, timeout=timeout, interval=0.25, what=f"{url} (readiness probe)")
    except AssertionError as err:
        raise AssertionError(f"{err}\n--- container log:\n{container.logs()}") from None
    return time.monotonic() - started


class ServiceNameContext(ssl.SSLContext):
    """Checks the serving certificate for a Service's DNS name whatever address is dialed
    (kubectl's tls-server-name, for urllib)."""

    server_name = SERVER_NAME

    def wrap_socket(self, sock: Any, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        kwargs["server_hostname"] = self.server_name
        return super().wrap_socket(sock, *args, **kwargs)


def trusting(ca: Path, server_name: str = SERVER_NAME) -> ServiceNameContext:
    context = ServiceNameContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(ca))
    context.server_name = server_name
    return context


def admin_kubeconfig(path: Path, url: str, ca: Path, pki: PKI) -> Path:
    """A kubeconfig of the admin client certificate, checking the serving certificate for
    the Service's name as a client inside the cluster would."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gateway",
        "clusters": [{"name": "gateway", "cluster": {
            "server": url, "certificate-authority": str(ca), "tls-server-name": SERVER_NAME}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(pki.admin_cert),
                                             "client-key": str(pki.admin_key)}}],
        "contexts": [{"name": "gateway", "context": {"cluster": "gateway", "user": "admin"}}],
    }))
    return path


def start_gateway(workdir: Path, manifests: list[dict[str, Any]], objects: Objects, pki: PKI,
                  *, claims: dict[str, Path] | None = None, services: tuple[str, ...] = (),
                  ports: dict[int, int] | None = None) -> Gateway:
    """The chart's Deployment from the gateway's image; ``services``: the names it dials that
    the cluster's DNS would answer (here the host's loopback)."""
    pod = pod_of(helm.one(manifests, "Deployment"), objects, workdir / "volumes",
                 claims=claims, services=services, ports=ports)
    ca = workdir / "serving-ca.crt"
    ca.write_bytes(objects["Secret"][f"{helm.RELEASE}-gateway-tls"]["ca.crt"])
    kubeconfig = admin_kubeconfig(workdir / "admin.kubeconfig", pod.url("https"), ca, pki)
    container = podman.Container(GATEWAY_TAG, pod.options, pod.args).start()
    return Gateway(container, pod, manifests, workdir, kubeconfig, ca)


def start_wardle(workdir: Path, pki: PKI, port: int, kubeconfig: bytes
                 ) -> tuple[podman.Container, Pod]:
    """The kind example's Deployment (deploy/kind/example/wardle-apiserver.yaml) from its
    image, with the Secrets up.sh creates for it: its serving certificate, and the kubeconfig
    of its identity in the gateway, whose server is the gateway Service's name (here the
    host's loopback, where the gateway's container is published)."""
    manifest = [doc for doc in yaml.safe_load_all(EXAMPLE_MANIFEST.read_text()) if doc]
    deployment = helm.one(manifest, "Deployment")
    objects: Objects = {"Secret": {
        "wardle-apiserver-serving": {"tls.crt": pki.wardle_cert.read_bytes(),
                                     "tls.key": pki.wardle_key.read_bytes()},
        "wardle-apiserver-kubeconfig": {"kubeconfig": kubeconfig}}}
    pod = pod_of(deployment, objects, workdir / "wardle-volumes", services=(SERVER_NAME,),
                 ports={8443: port})
    return podman.Container(WARDLE_TAG, pod.options, pod.args).start(), pod


def kind_api_services(port: int, pki: PKI) -> list[dict[str, Any]]:
    """deploy/kind/values.yaml's APIServices, naming the example's published port."""
    entries = yaml.safe_load(KIND_VALUES.read_text())["apiServices"]
    ca_bundle = base64.b64encode(pki.wardle_ca.read_bytes()).decode()
    return [{**entry, "service": {**entry["service"], "port": port}, "caBundle": ca_bundle}
            for entry in entries]


def healthcheck_command(image: str) -> list[str]:
    test = podman.inspect_image(image)["Healthcheck"]["Test"]  # docker format keeps it
    assert test[0] == "CMD", test
    return test[1:]


# ---------------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------------

def test_the_image_holds_no_compiler_and_runs_as_the_charts_user(images: Images) -> None:
    config = podman.inspect_image(GATEWAY_TAG)["Config"]
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())["podSecurityContext"]
    assert config["User"] == f"{values['runAsUser']}:{values['runAsGroup']}"  # numeric, not 0
    assert values["runAsUser"] != 0
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert config["Labels"]["org.opencontainers.image.version"] == version
    assert healthcheck_command(GATEWAY_TAG)[0] == "python"  # kept: a docker-format image
    with podman.mounted(GATEWAY_TAG) as rootfs:
        found = []
        for directory, dirs, files in os.walk(rootfs):
            found += [f"{directory}/{name}" for name in files if COMPILER.fullmatch(name)]
            found += [f"{directory}/{name}" for name in dirs if name in ("Cython", "pyximport")]
        compiled = list(rootfs.glob(
            "opt/gateway/lib/python3*/site-packages/gateway/transport/_wire.*.so"))
    compilers = [path.removeprefix(str(rootfs)) for path in found]
    record(item="1", load="none", fault="none",
           outcome="no compiler or Cython in the gateway image; its compiled extension in it"
           if not compilers and compiled else "a compiler in the image, or no extension",
           image_mb=round(podman.inspect_image(GATEWAY_TAG)["Size"] / 1e6),
           rebuilt=not images.gateway.current,
           gateway_build_seconds=round(images.gateway.seconds, 1),
           example_build_seconds=round(images.wardle.seconds, 1))
    assert compilers == [], f"a compiler or Cython in the image: {compilers}"
    # the builder stage's compiler did its work: the proxy's compiled HTTP heads are in
    assert compiled, "gateway/transport/_wire (the Cython extension) is not in the image"
    wardle = podman.inspect_image(WARDLE_TAG)["Config"]
    assert wardle["User"] == config["User"]
    assert wardle["Entrypoint"] == ["python", "-m", "examples.wardle"]


def test_embedded_mode_as_the_chart_runs_it(images: Images, pki: PKI, tmp_path: Path) -> None:
    wardle_port = free_port()
    api_services = kind_api_services(wardle_port, pki)
    manifests = helm.render(chart_values(apiServices=api_services))
    objects = cluster_objects(manifests, pki)
    claim = helm.one(manifests, "PersistentVolumeClaim")["metadata"]["name"]
    claims = {claim: tmp_path / "data-volume"}
    containers: list[podman.Container] = []
    try:
        gateway = start_gateway(tmp_path, manifests, objects, pki, claims=claims,
                                services=(WARDLE_SERVICE,))
        containers.append(gateway.container)
        first_ready = gateway.wait_ready()

        # kubectl over the admin client certificate (the chart's --client-ca-file)
        whoami = json.loads(gateway.kubectl("auth", "whoami", "-o", "json").stdout)
        assert whoami["status"]["userInfo"]["username"] == ADMIN
        assert "system:masters" in whoami["status"]["userInfo"]["groups"]

        # the image's HEALTHCHECK passes; its command fails where nothing listens
        health = gateway.container.healthcheck()
        assert health.returncode == 0, health.stdout + health.stderr
        command = healthcheck_command(GATEWAY_TAG)
        elsewhere = gateway.container.exec(*command[:-1], command[-1].replace("6443", "6444"))
        assert elsewhere.returncode != 0

        # what the chart's registration job applies in the gateway (the example's namespace,
        # Service and APIServices), then up.sh's step 6: the example's identity in the
        # gateway and the kubeconfig of it, naming the gateway's Service
        applied = gateway.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            helm.embedded_objects(manifests)))
        apiservices = [f"{entry['version']}.{GROUP}" for entry in api_services]
        for name in apiservices:
            assert f"apiservice.apiregistration.k8s.io/{name}" in applied.stdout
        state = tmp_path / "kind-state"
        step = run_identity_step(state, gateway.kubeconfig, gateway.ca, SERVER_NAME,
                                 gateway.pod.ports[6443])
        assert step.returncode == 0, step.stderr

        # the example's container, delegating to the gateway's: ready once it has read the
        # front-proxy CA and the gateway's namespaces, webhooks and policies
        wardle, wardle_pod = start_wardle(tmp_path, pki, wardle_port,
                                          (state / "wardle" / "kubeconfig").read_bytes())
        containers.append(wardle)
        wait_ready(wardle, wardle_pod, trusting(pki.wardle_ca, WARDLE_SERVICE))

        # served through the gateway's container, which shows it the chart's proxy-client
        # certificate: kubectl applies and gets flunders, in both versions
        for name in apiservices:
            gateway.kubectl("wait", "--for=condition=Available", "--timeout=120s",
                            f"apiservice/{name}")
        gateway.kubectl("apply", "-f", "-", input=FLUNDER)
        names = gateway.kubectl("get", "flunders", "-n", "default", "-o", "name").stdout
        assert names.split() == [f"flunder.{GROUP}/through-the-image"]
        beta = json.loads(gateway.kubectl("get", f"flunders.v1beta1.{GROUP}",
                                          "through-the-image", "-n", "default", "-o",
                                          "json").stdout)
        assert beta["spec"] == {"referenceType": "Flunder", "flunderReference": "other"}, beta
        # who may is the gateway's RBAC, asked by the example (SubjectAccessReview)
        gateway.kubectl("apply", "-f", "-", input=FLUNDER_READER)
        read = gateway.kubectl("--as=reader", "get", "flunders", "-n", "default", "-o", "name")
        assert read.stdout.split() == names.split()
        denied = gateway.kubectl("--as=reader", "apply", "-f", "-", check=False,
                                 input=FLUNDER.replace("through-the-image", "denied"))
        assert denied.returncode != 0 and 'User "reader" cannot create' in denied.stderr, \
            denied.stderr

        # the data volume outlives the container: a stop as the kubelet stops it (SIGTERM,
        # then the grace period), and a new container on the same volume
        gateway.kubectl("create", "configmap", "survivor", "-n", "default",
                        "--from-literal=written=before-the-restart")
        before = json.loads(gateway.kubectl("get", "configmap", "survivor", "-n", "default",
                                            "-o", "json").stdout)
        code, stop_seconds = gateway.container.stop(gateway.pod.grace)
        assert code == 0, f"the gateway did not exit cleanly on SIGTERM ({code}):\n" \
                          f"{gateway.container.logs()}"
        gateway.container.remove()
        gateway = start_gateway(tmp_path, manifests, objects, pki, claims=claims,
                                services=(WARDLE_SERVICE,), ports={6443: gateway.pod.ports[6443]})
        containers.append(gateway.container)
        second_ready = gateway.wait_ready()
        read = gateway.kubectl("get", "configmap", "survivor", "-n", "default", "-o", "json",
                               check=False)
        after = json.loads(read.stdout) if read.returncode == 0 else {"error": read.stderr}
        survived = after.get("metadata", {}).get("uid") == before["metadata"]["uid"] and \
            after.get("data") == before["data"]
        record(item="1", load="one gateway container (chart: embedded store) and the example "
                              "(examples/wardle) container behind it",
               fault="container stopped (SIGTERM) and replaced on the same data volume",
               outcome="ConfigMap kept" if survived else "ConfigMap lost",
               ready_seconds=round(first_ready, 1), stop_seconds=round(stop_seconds, 1),
               ready_after_restart_seconds=round(second_ready, 1))
        assert survived, (before, after)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        # the example, which kept running, delegates to the new container as to the old
        for name in apiservices:
            gateway.kubectl("wait", "--for=condition=Available", "--timeout=120s",
                            f"apiservice/{name}")
        assert wardle.running, wardle.logs()
        eventually(lambda: gateway.kubectl("--as=reader", "get", "flunders", "-n", "default",
                                           "-o", "name").stdout.split() == names.split(),
                   timeout=60, interval=1, what="flunders through the new gateway as reader")
    finally:
        for container in reversed(containers):
            container.remove()


def test_etcd_mode_as_the_chart_runs_it(images: Images, pki: PKI, tmp_path: Path) -> None:
    with EtcdCluster(1) as etcd:
        member = etcd.members[0]
        name = member_names(0)[0]  # the chart's example endpoint name, in etcd's certificate
        values = chart_values(storage={"mode": "etcd", "etcd": {
            "endpoints": [f"https://{name}:{member.port}"],
            "tls": {"existingSecret": ETCD_SECRET}}})
        manifests = helm.render(values)
        assert not helm.find(manifests, "PersistentVolumeClaim")
        objects = cluster_objects(manifests, pki, {ETCD_SECRET: {
            "ca.crt": etcd.tls.ca.read_bytes(), "tls.crt": etcd.tls.client.cert.read_bytes(),
            "tls.key": etcd.tls.client.key.read_bytes()}})
        gateway = start_gateway(tmp_path, manifests, objects, pki,
                                services=(name,))
        try:
            ready = gateway.wait_ready()
            status, body = gateway.probe("/readyz?verbose")
            assert status == 200 and b"[+]etcd ok" in body, body
            namespace = f"image-{uuid.uuid4().hex[:8]}"
            gateway.kubectl("create", "namespace", namespace)
            gateway.kubectl("create", "configmap", "in-etcd", "-n", namespace,
                            "--from-literal=k=v")
            prefix = helm.container(manifests)["args"]
            prefix = next(a.split("=", 1)[1] for a in prefix if a.startswith("--etcd-prefix="))
            etcdctl = subprocess.run(
                [str(Path(etcd_binary()).parent / "etcdctl"), f"--endpoints={member.endpoint}",
                 f"--cacert={etcd.tls.ca}", f"--cert={etcd.tls.client.cert}",
                 f"--key={etcd.tls.client.key}", "get", "--prefix", f"{prefix}/",
                 "--keys-only"], capture_output=True, text=True, timeout=30)
            assert etcdctl.returncode == 0, etcdctl.stderr
            stored = [key for key in etcdctl.stdout.split()
                      if key.endswith(f"/configmaps/{namespace}/in-etcd")]
            # the pod's address ($(POD_IP) in the chart's --advertise-address) in the
            # kubernetes Service's endpoints, from its lease in etcd
            endpoints = json.loads(gateway.kubectl("get", "endpoints", "kubernetes", "-n",
                                                   "default", "-o", "json").stdout)
            addresses = [a["ip"] for s in endpoints.get("subsets", [])
                         for a in s.get("addresses", [])]
            record(item="1", load="one gateway container (chart: etcd mode) on a TLS etcd",
                   fault="none", outcome="stored in etcd" if stored else "not in etcd",
                   ready_seconds=round(ready, 1))
            assert stored, f"no key of the ConfigMap under {prefix}/:\n{etcdctl.stdout}"
            assert addresses == [podman.CONTAINER_IP], endpoints
        finally:
            gateway.container.remove()


def test_the_documented_docker_run(images: Images, tmp_path: Path) -> None:
    """docs/deploy.md's command without Kubernetes, with podman for docker: the image's own
    entrypoint, a development PKI written to the certs volume, its admin kubeconfig."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    match = re.search(r"```sh\n(docker run [^`]*?)\n```", text)
    assert match, "docs/deploy.md has no docker run command"
    words = shlex.split(match.group(1).replace("\\\n", " "))
    assert words[:2] == ["docker", "run"] and words[-1] == "<image>", words
    port, suffix = free_port(), uuid.uuid4().hex[:8]
    volumes: dict[str, str] = {}
    options = []
    for word in words[2:-1]:
        if word == "6443:6443":
            word = f"127.0.0.1:{port}:6443"  # a free port on this shared machine
        elif ":/" in word:
            volume, target = word.split(":", 1)
            volumes[target] = f"{volume}-{suffix}"  # not another run's volume
            word = f"{volumes[target]}:{target}"
        options.append(word)
    assert set(volumes) == {"/var/lib/gateway", "/etc/gateway/certs"}, volumes
    container = podman.Container(GATEWAY_TAG, options, [])
    try:
        container.start()
        certs = Path(podman.podman("volume", "inspect", "--format", "{{.Mountpoint}}",
                                   volumes["/etc/gateway/certs"]).stdout.strip())
        written = eventually(lambda: (certs / "admin.kubeconfig").exists() and
                             yaml.safe_load((certs / "admin.kubeconfig").read_text()),
                             timeout=60, what="the development PKI's admin kubeconfig")
        cluster = written["clusters"][0]["cluster"]
        assert cluster["server"] == "https://127.0.0.1:6443"  # as the docs say
        cluster["server"] = f"https://127.0.0.1:{port}"
        kubeconfig = tmp_path / "admin.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(written))

        def kubectl(*args: str) -> str:
            result = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", *args],
                                    capture_output=True, text=True, timeout=60)
            assert result.returncode == 0, f"{result.stderr}\n{container.logs()}"
            return result.stdout

        eventually(lambda: kubectl("get", "--raw", "/readyz") == "ok", timeout=120,
                   interval=0.5, what="/readyz through the admin kubeconfig")
        whoami = json.loads(kubectl("auth", "whoami", "-o", "json"))
        assert "system:masters" in whoami["status"]["userInfo"]["groups"]
        health = container.healthcheck()
        assert health.returncode == 0, health.stdout + health.stderr
    finally:
        container.remove()
        for volume in volumes.values():
            podman.podman("volume", "rm", "-f", volume, check=False)
