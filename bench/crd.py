"""Custom resources against ConfigMaps carrying the same data, through one gateway, in one run.

A custom resource costs more than a built-in object per request: its body is defaulted,
pruned and validated against the CRD's OpenAPI schema, its CEL rules are run, and it is
defaulted again whenever it is read. This measures what that costs next to the cheapest
built-in kind, a ConfigMap, holding the same data: one ``gateway serve`` (embedded SQLite
store), a namespaced CRD of one version whose ``spec`` has 20 fields of mixed types (strings
with maxLength, pattern or enum, integers with minimum and maximum, a boolean, a nested
object, a list of strings with maxItems, a date-time, two defaults) and two CEL rules
(``self.minReplicas <= self.maxReplicas``, ``self.name.startsWith(self.prefix)``), and
ConfigMaps with those 20 values as 20 data keys. The custom resources leave the two
defaulted fields out, as clients do, so the gateway fills them in and both kinds store the
same 20 values.

Over keep-alive HTTPS with a minimal client (bench/rawhttp.py), in interleaved rounds (a busy
moment on the machine hits both kinds): create one at a time, create with 16 in flight, get
one at a time, and a list of all N. Printed per kind and operation: objects/s (for lists, of
the median list), p50/p99 latency and the gateway's CPU time per object (steadier than
throughput on a shared machine); the last columns are custom resource/ConfigMap speed
(objects/s) and CPU time per object.

    python bench/crd.py [--objects 1000] [--rounds 5] [--concurrency 16] [--lists 10]
                        [--profile FILE]

Target: custom resource/ConfigMap >= 0.8 for create. ``--profile FILE`` records the gateway
with py-spy (collapsed stacks, for flamegraph.pl or speedscope) while it creates 2N more
custom resources after the measurements (N one at a time, N with --concurrency in flight, in
the same interleaved rounds), and the same work with ConfigMaps into FILE's sibling
``<stem>-configmaps<suffix>``, for a differential reading; the gateway's CPU time per object
while recorded is printed beside each, to turn sample shares into microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from bench.proxy import cpu_seconds
from bench.rawhttp import RawConnection
from tests.support.gateway import GatewayProcess

GROUP, VERSION, PLURAL, KIND = "bench.example.com", "v1", "benchapps", "BenchApp"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: Where each part of the work goes: lists count what the one-at-a-time creates made.
SEQUENTIAL, CONCURRENT, WARM, PROFILED = "bench-seq", "bench-par", "bench-warm", "bench-prof"
KINDS = ("configmaps", "custom resources")
OPERATIONS = ("create", "create-concurrent", "get", "list")

Object = dict[str, Any]


# -- the CRD and the two kinds of object ------------------------------------------------------


def crd() -> Object:
    """20 spec fields of mixed types, two defaults, two CEL rules."""
    string = {"type": "string"}
    spec = {
        "type": "object",
        "required": ["name", "prefix", "tier", "image", "minReplicas", "maxReplicas"],
        "x-kubernetes-validations": [
            {"rule": "self.minReplicas <= self.maxReplicas",
             "message": "minReplicas must not exceed maxReplicas"},
            {"rule": "self.name.startsWith(self.prefix)",
             "message": "name must start with prefix"},
        ],
        "properties": {
            "name": {**string, "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "prefix": {**string, "maxLength": 20},
            "tier": {**string, "enum": ["frontend", "backend", "cache", "batch"]},
            "region": {**string, "enum": ["eu-west-1", "eu-central-1", "us-east-1",
                                          "us-west-2", "ap-south-1"]},
            "image": {**string, "maxLength": 256},
            "owner": {**string, "maxLength": 128, "pattern": "^[^@\\s]+@[^@\\s]+$"},
            "description": {**string, "maxLength": 1024},
            "endpoint": {**string, "maxLength": 256, "pattern": "^https?://"},
            "checksum": {**string, "maxLength": 64, "pattern": "^[0-9a-f]+$"},
            "policy": {**string, "enum": ["Retain", "Delete", "Orphan"], "default": "Retain"},
            "createdAt": {**string, "format": "date-time"},
            "replicas": {"type": "integer", "minimum": 0, "maximum": 1000},
            "minReplicas": {"type": "integer", "minimum": 0, "maximum": 100},
            "maxReplicas": {"type": "integer", "minimum": 1, "maximum": 1000},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "priority": {"type": "integer", "minimum": 0, "maximum": 10},
            "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 3600,
                               "default": 30},
            "enabled": {"type": "boolean"},
            "resources": {"type": "object", "properties": {
                "cpu": {**string, "pattern": "^[0-9]+m?$"},
                "memory": {**string, "pattern": "^[0-9]+(Ki|Mi|Gi)?$"},
                "gpus": {"type": "integer", "minimum": 0, "maximum": 8}}},
            "tags": {"type": "array", "maxItems": 16,
                     "items": {**string, "maxLength": 32}},
        },
    }
    schema = {"type": "object", "properties": {"spec": spec}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": PLURAL, "singular": "benchapp", "kind": KIND},
                 "versions": [{"name": VERSION, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}]},
    }


DEFAULTED = {"policy": "Retain", "timeoutSeconds": 30}


def spec_of(name: str) -> Object:
    """The 20 values of one object (the two defaulted ones included)."""
    return {
        "name": f"app-{name}", "prefix": "app-", "tier": "backend", "region": "eu-west-1",
        "image": f"registry.example.com/team/service-{name}:1.24.3",
        "owner": "platform-team@example.com",
        "description": f"benchmark object {name}: " + "a service of the platform " * 5,
        "endpoint": f"https://{name}.svc.example.com:8443/healthz",
        "checksum": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "createdAt": "2024-05-01T12:34:56Z", "replicas": 3, "minReplicas": 2,
        "maxReplicas": 10, "port": 8443, "priority": 5, "enabled": True,
        "resources": {"cpu": "500m", "memory": "256Mi", "gpus": 0},
        "tags": ["web", "team-a", "tier-backend", "eu", "benchmark"],
        **DEFAULTED,
    }


def custom_resource(name: str, namespace: str) -> Object:
    spec = {k: v for k, v in spec_of(name).items() if k not in DEFAULTED}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def configmap(name: str, namespace: str) -> Object:
    data = {k: v if isinstance(v, str) else orjson.dumps(v).decode()
            for k, v in spec_of(name).items()}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def collection(kind: str, namespace: str) -> str:
    if kind == "configmaps":
        return f"/api/v1/namespaces/{namespace}/configmaps"
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"


def body(kind: str, name: str, namespace: str) -> Object:
    return (configmap if kind == "configmaps" else custom_resource)(name, namespace)


# -- client -----------------------------------------------------------------------------------


class Http:
    """Keep-alive connections to the gateway, each request timed."""

    def __init__(self, proc: GatewayProcess, size: int) -> None:
        host, port = proc.url.removeprefix("https://").rsplit(":", 1)
        self.address = (host, int(port))
        self.ssl = proc.ssl_context()
        self.size = size
        self.pool: asyncio.Queue[RawConnection] = asyncio.Queue()

    async def open(self) -> Http:
        for _ in range(self.size):
            self.pool.put_nowait(await RawConnection(*self.address, self.ssl).connect())
        return self

    async def call(self, method: str, path: str, payload: Object | None = None,
                   expect: int = 200) -> tuple[Object, float]:
        """The decoded answer and the request's latency in seconds."""
        data = orjson.dumps(payload) if payload is not None else b""
        conn = await self.pool.get()
        try:
            start = time.perf_counter()
            code, answer = await conn.request(method, path, data)
            elapsed = time.perf_counter() - start
        finally:
            self.pool.put_nowait(conn)
        if code != expect:
            raise AssertionError(f"{method} {path}: {code} {answer[:500]!r}")
        return orjson.loads(answer), elapsed

    async def close(self) -> None:
        while not self.pool.empty():
            await self.pool.get_nowait().close()


# -- measurements -----------------------------------------------------------------------------


@dataclass
class Figures:
    """One kind's one operation over all rounds."""

    objects: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.objects / self.seconds if self.seconds else 0.0

    @property
    def median_rate(self) -> float:
        """Objects per second of the median request (for lists: a few long requests, where
        one stall would weigh on the total)."""
        per_request = self.objects / len(self.latencies)
        return per_request / statistics.median(self.latencies)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


async def measured(figures: Figures, pid: int, objects: int,
                   work: Awaitable[list[float]]) -> None:
    """Run ``work`` (not started yet) and add its time, CPU and latencies to ``figures``."""
    cpu, start = cpu_seconds(pid), time.perf_counter()
    latencies = await work
    figures.seconds += time.perf_counter() - start
    figures.cpu += cpu_seconds(pid) - cpu
    figures.objects += objects
    figures.latencies += latencies


async def one_at_a_time(http: Http, method: str, paths: list[str],
                        payloads: list[Object | None], expect: int) -> list[float]:
    out = []
    for path, payload in zip(paths, payloads, strict=True):
        out.append((await http.call(method, path, payload, expect))[1])
    return out


async def in_flight(http: Http, paths: list[str], payloads: list[Object],
                    concurrency: int) -> list[float]:
    """POSTs with ``concurrency`` in flight (the pool holds that many connections)."""
    out: list[float] = []
    queue = list(zip(paths, payloads, strict=True))
    queue.reverse()

    async def client() -> None:
        while queue:
            path, payload = queue.pop()
            out.append((await http.call("POST", path, payload, 201))[1])

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return out


def creates(kind: str, namespace: str, names: list[str]) -> tuple[list[str], list[Object]]:
    return [collection(kind, namespace)] * len(names), [body(kind, n, namespace) for n in names]


async def run_rounds(http: Http, pid: int, args: argparse.Namespace
                     ) -> dict[str, dict[str, Figures]]:
    figures = {kind: {op: Figures() for op in OPERATIONS} for kind in KINDS}
    chunk = args.objects // args.rounds
    for r in range(args.rounds):
        order = KINDS if r % 2 == 0 else KINDS[::-1]
        names = [f"o-{i:06d}" for i in range(r * chunk, (r + 1) * chunk)]
        for kind in order:
            paths, payloads = creates(kind, SEQUENTIAL, names)
            await measured(figures[kind]["create"], pid, chunk, one_at_a_time(
                http, "POST", paths, payloads, 201))
        for kind in order:
            paths, payloads = creates(kind, CONCURRENT, names)
            await measured(figures[kind]["create-concurrent"], pid, chunk, in_flight(
                http, paths, payloads, args.concurrency))
        for kind in order:
            paths = [f"{collection(kind, SEQUENTIAL)}/{n}" for n in names]
            await measured(figures[kind]["get"], pid, chunk, one_at_a_time(
                http, "GET", paths, [None] * len(paths), 200))
    total = chunk * args.rounds
    for r in range(args.lists):
        for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
            await measured(figures[kind]["list"], pid, total,
                           list_all(http, kind, total))
    return figures


async def list_all(http: Http, kind: str, expected: int) -> list[float]:
    listed, elapsed = await http.call("GET", collection(kind, SEQUENTIAL))
    count = sum(1 for item in listed["items"] if item["metadata"]["name"].startswith("o-"))
    assert count == expected, f"{kind}: listed {count} of {expected}"
    return [elapsed]


# -- setup ------------------------------------------------------------------------------------


async def prepare(http: Http) -> None:
    """Namespaces, the CRD (established and served), a check that its rules and defaults
    are in force, and a warm-up of both kinds."""
    for namespace in (SEQUENTIAL, CONCURRENT, WARM, PROFILED):
        await http.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}},
                        201)
    await http.call("POST", CRD_PATH, crd(), 201)
    deadline = time.monotonic() + 60
    while True:
        got, _ = await http.call("GET", f"{CRD_PATH}/{CRD_NAME}")
        conditions = {c["type"]: c["status"] for c in got.get("status", {}).get(
            "conditions", [])}
        conn = await http.pool.get()
        try:
            code, _ = await conn.request("GET", collection("custom resources", WARM))
        finally:
            http.pool.put_nowait(conn)
        if conditions.get("Established") == "True" and code == 200:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{CRD_NAME} not established and served: {got.get('status')}")
        await asyncio.sleep(0.1)
    bad = custom_resource("bad", WARM)
    bad["spec"].update(minReplicas=20, maxReplicas=10, prefix="other-")
    rejected, _ = await http.call("POST", collection("custom resources", WARM), bad, 422)
    messages = orjson.dumps(rejected).decode()
    assert "minReplicas must not exceed maxReplicas" in messages, messages
    assert "name must start with prefix" in messages, messages
    created, _ = await http.call("POST", collection("custom resources", WARM),
                                 custom_resource("w-defaults", WARM), 201)
    assert created["spec"] == spec_of("w-defaults"), created["spec"]
    for kind in KINDS:
        names = [f"w-{i:04d}" for i in range(200)]
        paths, payloads = creates(kind, WARM, names)
        await one_at_a_time(http, "POST", paths, payloads, 201)
        await one_at_a_time(http, "GET", [f"{p}/{n}" for p, n in zip(paths, names,
                                                                     strict=True)],
                            [None] * len(names), 200)
        await http.call("GET", collection(kind, WARM))


# -- profile ----------------------------------------------------------------------------------


@asynccontextmanager
async def profiled(out: Path, pid: int, rate: int):
    """py-spy sampling ``pid`` into ``out`` (collapsed stacks) until the block ends.

    ``--gil`` keeps the samples in which a thread holds the GIL (the Python work, not threads
    waiting on a queue or in fsync); blocking mode (no ``--nonblocking``: the process is
    paused for each sample) keeps every stack whole down from ``<module>``, which a differential
    reading of inclusive time needs. Both cost the gateway time, which is why the profile is
    recorded after the measurements.
    """
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    with tempfile.TemporaryFile() as log:
        spy = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--format", "raw",
                                "--rate", str(rate), "--gil", "--output", str(out)],
                               stdout=subprocess.DEVNULL, stderr=log)
        await asyncio.sleep(1)  # py-spy attaches
        try:
            if spy.poll() is not None:
                raise RuntimeError(f"py-spy exited with {spy.returncode}")
            yield
        finally:
            spy.send_signal(signal.SIGINT)  # stops and writes the file
            code = spy.wait(60)
            if code != 0 or not out.exists():
                log.seek(0)
                raise RuntimeError(f"py-spy failed ({code}): "
                                   f"{log.read().decode(errors='replace')[-2000:]}")


async def profile_creates(http: Http, pid: int, args: argparse.Namespace, workdir: Path
                          ) -> dict[str, tuple[Path, float]]:
    """The measured creates once more (N one at a time, N with --concurrency in flight), in
    the same interleaved rounds so that both kinds are recorded in the same conditions; each
    kind's stacks summed into a file of its own, with the gateway's CPU time per object
    meanwhile, to read the samples' shares in microseconds."""
    files = {"custom resources": args.profile,
             "configmaps": args.profile.with_name(
                 f"{args.profile.stem}-configmaps{args.profile.suffix}")}
    stacks: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    cpu = dict.fromkeys(KINDS, 0.0)
    chunk = args.objects // args.rounds
    for r in range(args.rounds):
        for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
            names = [f"p-{r}-{i:06d}" for i in range(2 * chunk)]
            paths, payloads = creates(kind, PROFILED, names)
            part = workdir / f"profile-{r}-{kind.replace(' ', '-')}.txt"
            async with profiled(part, pid, args.profile_rate):
                start = cpu_seconds(pid)
                await one_at_a_time(http, "POST", paths[:chunk], payloads[:chunk], 201)
                await in_flight(http, paths[chunk:], payloads[chunk:], args.concurrency)
                cpu[kind] += cpu_seconds(pid) - start
            for line in part.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                stacks[kind][stack] += int(count)
    for kind, file in files.items():
        file.write_text("".join(f"{stack} {count}\n"
                                for stack, count in sorted(stacks[kind].items())))
    return {kind: (file, cpu[kind] / (2 * chunk * args.rounds) * 1e6)
            for kind, file in files.items()}


# -- report -----------------------------------------------------------------------------------


def report(figures: dict[str, dict[str, Figures]], args: argparse.Namespace,
           sizes: dict[str, int]) -> None:
    chunk = args.objects // args.rounds
    total = chunk * args.rounds
    print(f"{total} objects of each kind in {args.rounds} interleaved rounds; request bodies: "
          f"custom resource {sizes['custom resources']} bytes, ConfigMap "
          f"{sizes['configmaps']} bytes (20 fields / 20 data keys)")
    labels = {"create": "create one at a time",
              "create-concurrent": f"create, {args.concurrency} in flight",
              "get": "get one at a time", "list": f"list of {total} (x{args.lists})"}
    head = f"{'objects/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'CPU µs/obj':>11}"
    print(f"{'':<26} {'ConfigMaps':^40} {'custom resources':^40}")
    print(f"{'operation':<26} {head} {head}  CR/CM   CR/CM CPU")
    ratios = {}
    for op in OPERATIONS:
        cells, rates = [], []
        for kind in KINDS:
            f = figures[kind][op]
            rates.append(f.median_rate if op == "list" else f.rate)
            cells.append(f"{rates[-1]:>10,.0f} {statistics.median(f.latencies) * 1000:>8.2f} "
                         f"{pct(f.latencies, 99) * 1000:>8.2f} "
                         f"{f.cpu / f.objects * 1e6:>11,.0f}")
        cm, cr = figures["configmaps"][op], figures["custom resources"][op]
        ratios[op] = rates[1] / rates[0]
        cpu_ratio = (cr.cpu / cr.objects) / (cm.cpu / cm.objects) if cm.cpu else 0.0
        print(f"{labels[op]:<26} {cells[0]} {cells[1]}  {ratios[op]:>5.2f}   {cpu_ratio:>9.2f}")
    for op in ("create", "create-concurrent"):
        verdict = "met" if ratios[op] >= 0.8 else "NOT met"
        print(f"{labels[op]}: custom resource/ConfigMap = {ratios[op]:.2f} "
              f"(target >= 0.8: {verdict})")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000, help="of each kind")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--lists", type=int, default=10, help="lists of all N per kind")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="record the gateway with py-spy while it creates 2N more custom "
                             "resources (collapsed stacks), and the same for ConfigMaps into "
                             "<stem>-configmaps<suffix>")
    parser.add_argument("--profile-rate", type=int, default=500, help="py-spy samples/s")
    args = parser.parse_args()
    if args.objects < args.rounds:
        parser.error("--objects must be at least --rounds")
    sizes = {kind: len(orjson.dumps(body(kind, "o-000000", SEQUENTIAL))) for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="bench-crd-") as tmp:
        proc = GatewayProcess(Path(tmp) / "gw").start()
        assert proc.proc is not None
        pid = proc.proc.pid
        http = await Http(proc, max(1, args.concurrency)).open()
        try:
            await prepare(http)
            figures = await run_rounds(http, pid, args)
            files = (await profile_creates(http, pid, args, Path(tmp)) if args.profile
                     else {})
        finally:
            await http.close()
            proc.stop()
    report(figures, args, sizes)
    for kind, (file, cpu) in files.items():
        total = 2 * (args.objects // args.rounds) * args.rounds
        print(f"profile of {total} {kind} creates: {file} (gateway CPU {cpu:,.0f} "
              "µs/object while recorded)")
    return 0


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    sys.exit(asyncio.run(main()))
