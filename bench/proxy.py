"""The aggregator's proxy path against nginx doing the same job, in the same run.

One small GET (a Flunder of about 500 bytes) is sent over keep-alive HTTPS

  (a) to the backend directly,
  (b) through nginx set up as an mTLS reverse proxy the way the gateway is one (bearer token
      checked, X-Remote-User/-Group and X-Forwarded-* set, the front-proxy client certificate
      shown to the backend, the backend's certificate verified for api.wardle.svc against its
      CA, keep-alive upstream connections; one worker),
  (c) through the gateway (one ``gateway serve`` process; the token user authorized by RBAC,
      the backend registered by a Service, Endpoints and an APIService),

with wrk for throughput and latency at a fixed number of connections, then at a fixed rate of
half the gateway's peak with an open-loop generator (latency counted from when each request
was due, so a stall is not hidden). The backend is nginx too (one worker, a fixed body), so
it is never the bottleneck.

    python bench/proxy.py [--seconds 5] [--rounds 3] [--paced-seconds 4] [--targets abcde]
                          [--connections 16] [--no-pin] [--profile FILE [--profile-native]]

Both measurements run in interleaved rounds; the output gives each target's spread over the
rounds, its CPU time per request, and how busy other work kept the machine (see
bench/README.md). Targets: c/b >= 0.5 in throughput (0.75 the goal); p99 added latency
(c - a) <= 2 ms at half the gateway's peak. Needs nginx and wrk
(``apt-get install -y nginx wrk``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import (
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
    redirect_stdout,
    suppress,
)
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, Pair, issue_pair, pem
from tests.support.gateway import GatewayProcess, free_port, token_gateway

GROUP, VERSION = "wardle.example.com", "v1alpha1"
SERVICE, NAMESPACE = "api", "wardle"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
APISERVICE = f"{VERSION}.{GROUP}"
PATH = f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders/one"
TOKEN = "bench-proxy-token-0123456789abcdef"
USER, USER_GROUP = "bench", "bench-readers"

#: The document the backend answers with: a Flunder of about 500 bytes.
FLUNDER = json.dumps({
    "apiVersion": f"{GROUP}/{VERSION}", "kind": "Flunder",
    "metadata": {"name": "one", "namespace": "default", "uid":
                 "6b1f3c9e-2d4a-4f7b-9c1e-0a2b3c4d5e6f", "resourceVersion": "12345",
                 "generation": 1, "creationTimestamp": "2024-01-01T00:00:00Z",
                 "labels": {"app": "bench", "tier": "backend"},
                 "annotations": {"example.com/note": "a small object, as most gets are"}},
    "spec": {"reference": "two", "referenceType": "Flunder",
             "description": "x" * 120},
    "status": {},
}, separators=(",", ":"))
#: Discovery of the group version, for the gateway's availability check.
RESOURCE_LIST = json.dumps({
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": True,
                   "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"]}],
}, separators=(",", ":"))


NOT_FOUND = '{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}'


# -- certificates -----------------------------------------------------------------------------


@dataclass
class PKI:
    front_proxy_ca: Path  # what the backend trusts for client certificates
    front_proxy_client: Pair  # what (b) and (c) show the backend
    backend_ca: Path  # the APIService's caBundle; (b)'s proxy_ssl_trusted_certificate
    backend_serving: Pair  # names api.wardle.svc
    proxy_serving: Pair  # (b)'s serving certificate

    @classmethod
    def make(cls, out: Path) -> PKI:
        front = Issuer.new("bench-front-proxy-ca")
        backend = Issuer.new(f"{SERVER_NAME}-ca")
        edge = Issuer.new("bench-edge-ca")
        out.mkdir(parents=True, exist_ok=True)
        (out / "front-proxy-ca.crt").write_bytes(pem(front.cert))
        (out / "backend-ca.crt").write_bytes(pem(backend.cert))
        return cls(
            front_proxy_ca=out / "front-proxy-ca.crt",
            front_proxy_client=issue_pair(out, "front-proxy-client", "front-proxy-client",
                                          front, usages=(CLIENT_AUTH,)),
            backend_ca=out / "backend-ca.crt",
            backend_serving=issue_pair(out, "backend-serving", SERVER_NAME, backend,
                                       usages=(SERVER_AUTH,),
                                       sans=(SERVER_NAME, f"{SERVICE}.{NAMESPACE}",
                                             "localhost", "127.0.0.1")),
            proxy_serving=issue_pair(out, "proxy-serving", "localhost", edge,
                                     usages=(SERVER_AUTH,), sans=("localhost", "127.0.0.1")),
        )


# -- processes and CPUs -----------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (nginx's master and its worker)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            with suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def pin(pid: int | None, cpus: set[int] | None) -> None:
    """Every thread of ``pid`` and of its children on ``cpus`` (None: leave them be)."""
    if pid is None or not cpus:
        return
    for proc in process_tree(pid):
        for task in Path(f"/proc/{proc}/task").glob("*"):
            with suppress(OSError):
                os.sched_setaffinity(int(task.name), cpus)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` and its children so far."""
    total = 0.0
    for proc in process_tree(pid):
        try:
            fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it lingers."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def wait_listening(port: int, proc: subprocess.Popen, log: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}: {log.read_text()[-2000:]}")


# -- nginx ------------------------------------------------------------------------------------


def nginx_main(workdir: Path, http: str) -> str:
    temp = "\n".join(f"  {kind}_temp_path {workdir}/{kind}_temp;"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    user = "user root;\n" if os.geteuid() == 0 else ""
    return f"""{user}daemon off;
master_process on;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  ssl_protocols TLSv1.2 TLSv1.3;
{temp}
{http}
}}
"""


def backend_http(pki: PKI, mtls_port: int, plain_port: int) -> str:
    """The backend: mTLS against the front-proxy CA on ``mtls_port``, as an extension
    apiserver; the same document without a client certificate on ``plain_port``, for wrk
    (which cannot present one) in row (a)."""
    locations = f"""    default_type application/json;
    location = {PATH} {{ return 200 '{FLUNDER}'; }}
    location = /apis/{GROUP}/{VERSION} {{ return 200 '{RESOURCE_LIST}'; }}
    location / {{ return 404 '{NOT_FOUND}'; }}"""
    serving = (f"    ssl_certificate {pki.backend_serving.cert};\n"
               f"    ssl_certificate_key {pki.backend_serving.key};")
    return f"""  server {{
    listen 127.0.0.1:{mtls_port} ssl;
{serving}
    ssl_client_certificate {pki.front_proxy_ca};
    ssl_verify_client on;
{locations}
  }}
  server {{
    listen 127.0.0.1:{plain_port} ssl;
{serving}
{locations}
  }}"""


def proxy_http(pki: PKI, port: int, backend_port: int) -> str:
    """(b): what the gateway does for this request, in nginx's words."""
    return f"""  map $http_authorization $bench_authorized {{
    "Bearer {TOKEN}" 1;
    default 0;
  }}
  upstream wardle {{
    server 127.0.0.1:{backend_port};
    keepalive 32;
  }}
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {pki.proxy_serving.cert};
    ssl_certificate_key {pki.proxy_serving.key};
    location / {{
      if ($bench_authorized = 0) {{ return 401; }}
      proxy_pass https://wardle;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "";
      proxy_set_header X-Remote-User {USER};
      proxy_set_header X-Remote-Group {USER_GROUP};
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto https;
      proxy_set_header X-Forwarded-Uri $request_uri;
      proxy_set_header Audit-ID $request_id;
      proxy_ssl_certificate {pki.front_proxy_client.cert};
      proxy_ssl_certificate_key {pki.front_proxy_client.key};
      proxy_ssl_trusted_certificate {pki.backend_ca};
      proxy_ssl_verify on;
      proxy_ssl_name {SERVER_NAME};
      proxy_ssl_server_name on;
      proxy_ssl_protocols TLSv1.2 TLSv1.3;
      proxy_ssl_session_reuse on;
    }}
  }}"""


class Nginx:
    def __init__(self, workdir: Path, http: str, port: int) -> None:
        self.workdir, self.port = workdir, port
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf = workdir / "nginx.conf"
        self.conf.write_text(nginx_main(workdir, http))
        self.proc: subprocess.Popen | None = None

    def start(self) -> Nginx:
        log = self.workdir / "error.log"
        check = subprocess.run(["nginx", "-t", "-q", "-p", str(self.workdir), "-e", str(log),
                                "-c", str(self.conf)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"nginx -t: {check.stderr}\n{self.conf.read_text()}")
        self.proc = subprocess.Popen(["nginx", "-p", str(self.workdir), "-e", str(log),
                                      "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_listening(self.port, self.proc, log)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)


# -- the gateway ------------------------------------------------------------------------------


def manifests(pki: PKI, backend_port: int) -> list[dict]:
    """What a platform team applies: the backend's Service, Endpoints and APIService, and
    read access to flunders for the benchmark's user."""
    import base64

    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": SERVICE, "namespace": NAMESPACE},
         "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443,
                                                  "protocol": "TCP",
                                                  "targetPort": backend_port}]}},
        {"apiVersion": "v1", "kind": "Endpoints",
         "metadata": {"name": SERVICE, "namespace": NAMESPACE},
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                      "ports": [{"name": "https", "port": backend_port, "protocol": "TCP"}]}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": APISERVICE},
         "spec": {"group": GROUP, "version": VERSION,
                  "service": {"namespace": NAMESPACE, "name": SERVICE, "port": 443},
                  "caBundle": base64.b64encode(pki.backend_ca.read_bytes()).decode(),
                  "groupPriorityMinimum": 1000, "versionPriority": 15}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "flunder-reader"},
         "rules": [{"apiGroups": [GROUP], "resources": ["flunders"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "bench-flunder-reader"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "flunder-reader"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": USER}]},
    ]


def start_gateway(workdir: Path, pki: PKI, backend_port: int) -> GatewayProcess:
    proc = token_gateway(workdir, f"{TOKEN},{USER},bench-uid,{USER_GROUP}\n",
                         "--enable-aggregator-routing",
                         "--proxy-client-cert-file", str(pki.front_proxy_client.cert),
                         "--proxy-client-key-file", str(pki.front_proxy_client.key)).start()
    proc.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests(pki, backend_port)))
    deadline = time.monotonic() + 60
    while True:
        code, body = proc.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/"
                                         f"{APISERVICE}")
        conditions = json.loads(body).get("status", {}).get("conditions", []) \
            if code == 200 else []
        if any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"APIService not Available: {conditions}\n{proc.log()}")
        time.sleep(0.2)
    return proc


def start_reference(mode: str, workdir: Path, pki: PKI, port: int,
                    backend_port: int) -> subprocess.Popen:
    """One of bench/reference_proxies.py's calibration points."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{mode}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("reference_proxies.py")), mode,
             str(port),
             str(backend_port), str(pki.proxy_serving.cert), str(pki.proxy_serving.key),
             str(pki.backend_ca), str(pki.front_proxy_client.cert),
             str(pki.front_proxy_client.key), TOKEN], stdout=out, stderr=subprocess.STDOUT)
    wait_listening(port, proc, log)
    return proc


# -- load -------------------------------------------------------------------------------------


def unverified() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def check_answers(port: int, token: bool) -> None:
    """One request as the load will send it: 200 and the backend's document."""
    headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
    deadline = time.monotonic() + 30
    while True:
        try:
            req = urllib.request.Request(f"https://127.0.0.1:{port}{PATH}", headers=headers)
            with urllib.request.urlopen(req, context=unverified(), timeout=10) as resp:
                body = resp.read()
            if json.loads(body) == json.loads(FLUNDER):
                return
            raise AssertionError(body[:300])
        except urllib.error.HTTPError as err:  # RBAC or routing may lag the apply a moment
            if time.monotonic() > deadline:
                raise AssertionError(f"{port}: {err.code} {err.read()[:300]!r}") from None
            time.sleep(0.2)


@dataclass
class Result:
    rps: float
    p50: float  # seconds
    p99: float
    errors: int = 0
    cpu: float | None = None  # the measured server's CPU use, in cores
    extra: dict = field(default_factory=dict)


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def _duration(text: str) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)([a-z]+)", text).groups()
    return float(number) * _UNITS[unit]


def parse_wrk(out: str) -> Result:
    percentiles = {int(p): _duration(v) for p, v in
                   re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M)}
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    errors = 0
    if match := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(match.group(1))
    if match := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), "
                          r"timeout (\d+)", out):
        errors += sum(int(g) for g in match.groups())
    return Result(rps, percentiles[50], percentiles[99], errors,
                  extra={"p75": percentiles[75], "p90": percentiles[90]})


def wrk(port: int, seconds: float, connections: int, token: bool, cpus: set[int] | None,
        server_pid: int | None) -> Result:
    args = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    if token:
        args += ["-H", f"Authorization: Bearer {TOKEN}"]
    args.append(f"https://127.0.0.1:{port}{PATH}")
    before, started = (cpu_seconds(server_pid) if server_pid else 0.0), time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60,
                          preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr}{done.stdout}")
    result = parse_wrk(done.stdout)
    if server_pid:
        result.cpu = (cpu_seconds(server_pid) - before) / (time.monotonic() - started)
    return result


async def paced(port: int, rate: float, seconds: float, connections: int, token: bool,
                server_pid: int | None) -> Result:
    """An open-loop load (as wrk2): request i is due at start + i/rate and goes out on the
    next idle keep-alive connection; its latency runs from when it was due to the end of its
    response, so time spent waiting for a connection counts."""
    head = (f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n" +
            (f"Authorization: Bearer {TOKEN}\r\n" if token else "") + "\r\n").encode()
    due: asyncio.Queue[float | None] = asyncio.Queue()
    latencies: list[float] = []
    errors = [0]
    context = unverified()

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       limit=2**20)
        try:
            while (when := await due.get()) is not None:
                writer.write(head)
                raw = await reader.readuntil(b"\r\n\r\n")
                if not raw.startswith(b"HTTP/1.1 200"):
                    errors[0] += 1
                length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", raw)
                if length is None:
                    raise RuntimeError(f"no Content-Length: {raw[:300]!r}")
                await reader.readexactly(int(length.group(1)))
                latencies.append(time.perf_counter() - when)
        finally:
            writer.close()

    workers = [asyncio.ensure_future(worker()) for _ in range(connections)]
    await asyncio.sleep(0.2)  # connected
    total = int(rate * seconds)
    before = cpu_seconds(server_pid) if server_pid else 0.0
    start = time.perf_counter()
    sent = 0
    while sent < total:
        now = time.perf_counter()
        while sent < total and start + sent / rate <= now:
            due.put_nowait(start + sent / rate)
            sent += 1
        await asyncio.sleep(max(0.0, start + sent / rate - time.perf_counter()))
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - start
    latencies.sort()
    cpu = (cpu_seconds(server_pid) - before) if server_pid else None
    return summarize([(latencies, errors[0], elapsed, cpu)])


def summarize(parts: list[tuple[list[float], int, float, float | None]]) -> Result:
    """Rounds of ``paced`` (latencies, errors, seconds, server CPU seconds) as one result."""
    latencies = sorted(x for part in parts for x in part[0])
    elapsed = sum(part[2] for part in parts)
    cpu = None if parts[0][3] is None else sum(part[3] for part in parts) / elapsed
    return Result(len(latencies) / elapsed, latencies[len(latencies) // 2],
                  latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
                  sum(part[1] for part in parts), cpu,
                  extra={"parts": [(part[0], part[1], part[2], part[3]) for part in parts]})


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Target:
    label: str
    port: int
    token: bool
    server_pid: int  # what (a), (b), (c) each measure: the backend, nginx, the gateway
    others: list[int]  # processes that are not measured (the backend behind b and c)


@asynccontextmanager
async def running(tmp: Path, wanted: str):
    """The targets in ``wanted`` (and the backend) started, in ``tmp``; stopped on exit."""
    pki = PKI.make(tmp / "pki")
    mtls_port, plain_port = free_port(), free_port()
    async with AsyncExitStack() as stack:
        backend = Nginx(tmp / "backend", backend_http(pki, mtls_port, plain_port),
                        mtls_port).start()
        stack.callback(backend.stop)
        assert backend.pid
        targets = {"a": Target("(a) backend directly", plain_port, False, backend.pid, [])}
        if "b" in wanted:
            port = free_port()
            proxy = Nginx(tmp / "proxy", proxy_http(pki, port, mtls_port), port).start()
            stack.callback(proxy.stop)
            assert proxy.pid
            targets["b"] = Target("(b) nginx mTLS proxy", port, True, proxy.pid, [backend.pid])
        if "c" in wanted:
            gateway = start_gateway(tmp / "gateway", pki, mtls_port)
            stack.callback(gateway.stop)
            assert gateway.proc
            targets["c"] = Target("(c) gateway", gateway.port, True, gateway.proc.pid,
                                  [backend.pid])
        for key, mode, label in (("d", "naive", "(d) naive aiohttp proxy"),
                                 ("e", "bare", "(e) bare asyncio proxy")):
            if key in wanted:
                port = free_port()
                reference = start_reference(mode, tmp / mode, pki, port, mtls_port)
                stack.callback(stop_process, reference)
                targets[key] = Target(label, port, True, reference.pid, [backend.pid])
        for target in targets.values():
            check_answers(target.port, target.token)
        yield targets


def cpu_plan(no_pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """(the measured server's CPU, everyone else's): the last CPU for the server, the rest for
    the load generator and the backend behind a proxy; no pinning on one CPU or when asked."""
    cpus = sorted(os.sched_getaffinity(0))
    if no_pin or len(cpus) < 2:
        return None, None
    return {cpus[-1]}, set(cpus[:-1])


def place(target: Target, server_cpu: set[int] | None, load_cpus: set[int] | None) -> None:
    pin(target.server_pid, server_cpu)
    for pid in target.others:
        pin(pid, load_cpus)
    if load_cpus:
        os.sched_setaffinity(0, load_cpus)


# -- how busy the machine was -----------------------------------------------------------------


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (every CPU, from /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu(pids: list[int]) -> float:
    """CPU seconds of the benchmark's own processes: ``pids`` (with their children), this
    process, and the children it waited for (wrk, py-spy)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(cpu_seconds(pid) for pid in pids) + me.ru_utime + me.ru_stime + \
        children.ru_utime + children.ru_stime


@contextmanager
def others_load(pids: list[int], into: list[float]):
    """Appends to ``into`` how many cores other work on the machine kept busy on average
    while the enclosed measurement ran (every CPU's busy time less the benchmark's own)."""
    busy, ours, started = machine_busy(), own_cpu(pids), time.monotonic()
    try:
        yield
    finally:
        elapsed = time.monotonic() - started
        if elapsed > 0:
            other = (machine_busy() - busy) - (own_cpu(pids) - ours)
            into.append(max(0.0, other) / elapsed)


@contextmanager
def profiled(out: Path | None, pid: int | None, seconds: float, native: bool = False):
    """py-spy sampling ``pid`` into ``out`` (collapsed stacks) for the enclosed run."""
    if out is None or pid is None:
        yield
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    # native frames need the process stopped while sampled (py-spy's blocking mode)
    mode = ["--native"] if native else ["--nonblocking"]
    spy = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate",
                            "250", *mode, "--output", str(out),
                            "--duration", str(max(1, round(seconds)))],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        _, err = spy.communicate(timeout=seconds + 30)
        if spy.returncode != 0:
            print(f"py-spy failed: {err.decode(errors='replace')[-500:]}", file=sys.stderr)


# -- the report -------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def cores(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def spread(values: list[float]) -> str:
    """min-max of the rounds, and that range as a share of the median."""
    if len(values) < 2:
        return "-"
    share = (max(values) - min(values)) / median(values) * 100
    return f"{min(values):,.0f}-{max(values):,.0f} ({share:.0f}%)"


def ratio_range(top: list[float], bottom: list[float]) -> str:
    """The ratio round by round (each round measures both targets a few seconds apart)."""
    ratios = [t / b for t, b in zip(top, bottom, strict=True)]
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else f"{ratios[0]:.2f}"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5,
                        help="length of each wrk run (one per target and round)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--peak-connections", type=int, default=32,
                        help="the gateway's peak is the best of --connections and this")
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds, of wrk and of the fixed-rate phase")
    parser.add_argument("--paced-seconds", type=float, default=4,
                        help="length of each fixed-rate run (one per target and round)")
    parser.add_argument("--targets", default="abcde",
                        help="which targets to run (a is always run: the others are read "
                             "against it)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not put the measured server on a CPU of its own")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="record the gateway with py-spy during its first wrk run at "
                             "--connections (collapsed stacks, for flamegraph.pl or speedscope)")
    parser.add_argument("--profile-native", action="store_true",
                        help="with --profile: native frames too (OpenSSL, the event loop)")
    parser.add_argument("--docs", action="store_true",
                        help="also write the report into docs/performance.md (the run before "
                             "it kept as the previous run)")
    args = parser.parse_args()
    missing = [tool for tool in ("nginx", "wrk") if shutil.which(tool) is None]
    if missing:
        print(f"bench/proxy.py needs {' and '.join(missing)}: apt-get install -y nginx wrk",
              file=sys.stderr)
        return 2
    wanted = "a" + "".join(k for k in "bcde" if k in args.targets)
    server_cpu, load_cpus = cpu_plan(args.no_pin)
    closed: dict[str, list[Result]] = {}
    rounds: dict[str, list] = {}
    load: list[float] = []
    loadavg = [Path("/proc/loadavg").read_text().split()[:3]]
    peak = rate = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        async with running(Path(tmp), wanted) as targets:
            pids = [t.server_pid for t in targets.values()]
            runs = [(key, args.connections) for key in targets]
            if "c" in targets:
                runs.append(("c_peak", args.peak_connections))
            for target in targets.values():
                place(target, server_cpu, load_cpus)
                wrk(target.port, args.warmup, args.connections, target.token, load_cpus, None)
            for number in range(args.rounds):  # interleaved: a busy moment hits every target
                for key, connections in runs:
                    target = targets[key[0]]
                    place(target, server_cpu, load_cpus)
                    profile = args.profile if key == "c" and number == 0 else None
                    with others_load(pids, load), \
                            profiled(profile, target.server_pid, args.seconds,
                                     args.profile_native):
                        closed.setdefault(key, []).append(
                            wrk(target.port, args.seconds, connections, target.token,
                                load_cpus, target.server_pid))
            # the fixed-rate phase: half the gateway's peak, or of the best proxy measured
            fastest = [key for key in ("c", "c_peak") if key in closed] or \
                [key for key in closed if key != "a"] or ["a"]
            peak = max(median([r.rps for r in closed[key]]) for key in fastest)
            rate = peak / 2
            paced_targets = {key: t for key, t in targets.items() if key in "abc"}
            rounds = {key: [] for key in paced_targets}
            for _ in range(args.rounds):
                for key, target in paced_targets.items():
                    place(target, server_cpu, load_cpus)
                    with others_load(pids, load):
                        one = await paced(target.port, rate, args.paced_seconds,
                                          args.connections, target.token, target.server_pid)
                    rounds[key] += one.extra["parts"]
    loadavg.append(Path("/proc/loadavg").read_text().split()[:3])
    opened = {key: summarize(parts) for key, parts in rounds.items()}
    printed = io.StringIO()
    with redirect_stdout(printed):
        report(args, closed, opened, rounds, peak, rate, server_cpu, load, loadavg)
    print(printed.getvalue(), end="")
    if args.docs:
        write_docs(printed.getvalue())
    return 0


def write_docs(printed: str) -> None:
    """The report as docs/performance.md's latest proxy run; the latest before it becomes the
    previous one."""
    from bench import report as docs

    previous = docs.read_block(docs.DOCS, "proxy latest")
    if previous is not None:
        docs.write_block(docs.DOCS, "proxy previous", previous.replace(
            "### Latest run", "### The run before", 1))
    docs.write_block(docs.DOCS, "proxy latest", (
        f"### Latest run\n\nRun: {docs.machine_line(docs.machine())}.\n\n"
        f"```\n{printed.rstrip()}\n```"))


LABELS = {"a": "(a) backend directly", "b": "(b) nginx mTLS proxy", "c": "(c) gateway",
          "d": "(d) naive aiohttp proxy", "e": "(e) bare asyncio proxy"}


def report(args, closed: dict[str, list[Result]], opened: dict[str, Result],
           rounds: dict[str, list], peak: float, rate: float, server_cpu: set[int] | None,
           load: list[float], loadavg: list[list[str]]) -> None:
    labels = {**LABELS, "c_peak": f"(c) gateway, {args.peak_connections} connections"}
    pinned = (f"the measured server alone on CPU {min(server_cpu)}" if server_cpu
              else "no CPU pinning")
    print(f"wrk -t1 -c{args.connections} -d{args.seconds:g}s x {args.rounds} interleaved "
          f"rounds, keep-alive HTTPS GET of {len(FLUNDER)} bytes; {pinned}")
    print(f"{'target':<36} {'req/s':>9} {'rounds min-max (spread)':>26} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'server CPU':>10} {'CPU us/req':>10} {'errors':>6}")
    rps = {key: [r.rps for r in results] for key, results in closed.items()}
    for key, results in closed.items():
        cpu = [r.cpu for r in results if r.cpu is not None]
        # the server's CPU time per request: steadier than req/s when the machine is shared
        # (none when a short run saw no clock tick of it)
        per_request = [r.cpu / r.rps * 1e6 for r in results if r.cpu and r.rps]
        shown = f"{median(per_request):.0f}" if per_request else "-"
        print(f"{labels[key]:<36} {median(rps[key]):>9,.0f} {spread(rps[key]):>26} "
              f"{ms(median([r.p50 for r in results])):>7} "
              f"{ms(median([r.p99 for r in results])):>7} "
              f"{cores(median(cpu) if cpu else None):>10} {shown:>10} "
              f"{sum(r.errors for r in results):>6}")
    med = {key: median(values) for key, values in rps.items()}
    if "c" in med and "b" in med:
        verdict = "met" if med["c"] / med["b"] >= 0.5 else "NOT met"
        goal = "met" if med["c"] / med["b"] >= 0.75 else "not yet"
        print(f"c/b = {med['c'] / med['b']:.2f} (rounds {ratio_range(rps['c'], rps['b'])}; "
              f"target >= 0.5: {verdict}; goal 0.75: {goal})   c/a = {med['c'] / med['a']:.2f}")
    pairs = [(x, y) for x, y in (("d", "b"), ("e", "b"), ("c", "d"), ("c", "e"))
             if x in med and y in med]
    if pairs:
        print("calibration: " + "   ".join(
            f"{x}/{y} = {med[x] / med[y]:.2f} (rounds {ratio_range(rps[x], rps[y])})"
            for x, y in pairs))
    if opened:
        print()
        print(f"fixed rate {rate:,.0f} req/s = half the peak of {peak:,.0f} (open loop, "
              f"{args.connections} connections, {args.rounds} interleaved rounds of "
              f"{args.paced_seconds:g} s; latency from when each request was due)")
        print(f"{'target':<36} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'server CPU':>11} "
              f"{'errors':>7} {'added p99 ms':>13} {'rounds':>16}")
        base = [_p99(part[0]) for part in rounds["a"]]
        for key, result in opened.items():
            added = "" if key == "a" else ms(result.p99 - opened["a"].p99)
            per_round = [_p99(part[0]) - a for part, a in zip(rounds[key], base, strict=True)]
            span = "" if key == "a" else f"{ms(min(per_round))}-{ms(max(per_round))}"
            print(f"{labels[key]:<36} {result.rps:>9,.0f} {ms(result.p50):>8} "
                  f"{ms(result.p99):>8} {cores(result.cpu):>11} {result.errors:>7} "
                  f"{added:>13} {span:>16}")
        if "c" in opened:
            added_c = opened["c"].p99 - opened["a"].p99
            verdict = "met" if added_c <= 0.002 else "NOT met"
            line = f"added p99: (c - a) = {ms(added_c)} ms (target <= 2 ms: {verdict})"
            if "b" in opened:
                line += f", (b - a) = {ms(opened['b'].p99 - opened['a'].p99)} ms"
            print(line)
    print()
    print(f"noise: other work on the machine kept {median(load):.2f} cores busy on average "
          f"during the measurements (max {max(load):.2f} of {os.cpu_count()}); load average "
          f"{' '.join(loadavg[0])} at the start, {' '.join(loadavg[-1])} at the end. Read the "
          f"rounds' spread before a single figure.")


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    sys.exit(asyncio.run(main()))
