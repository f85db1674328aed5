"""An extension apiserver written on gateway.extension beside one written on k8s.io/apiserver,
per core, on the same etcd, in the same run (issue 20, item 6).

Python: examples/wardle (``python -m examples.wardle``), Flunders at v1alpha1, its storage
version. Go: pizza-apiserver (``../shared/tools/go-reference.sh`` builds it), Pizzas, at
GOMAXPROCS=1. Both on one etcd (fsync on), both with one ``gateway serve`` as their core
apiserver (the authentication ConfigMap; Go's namespace informer), both called straight, as
the gateway's front proxy naming a user in system:masters (so neither asks the core server
to authorize: both delegating authorizers allow that group first). The object is about 1 KiB,
the payload in an annotation. The measured server is pinned alone to one CPU, etcd, the core
gateway and the load client (bench/gobench: Go, closed loop, 16 keep-alive connections) to
the other. Rounds are interleaved, the servers in a rotating order. Ratios are Python/Go:
above 1 the Python server is faster.

Like with like, mostly: a Flunder is a kind declared as data, so the Python server also walks
its OpenAPI schema (validation, pruning, defaulting) on every write, as the gateway does for
a custom resource; pizza-apiserver's Pizza is compiled Go with validation in code.

    python bench/extension.py [--quick] [--rounds 3] [--seconds 5] [--list-objects 1000]
                              [--reference go|none] [--pizza-apiserver PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gotools import Client, GoBench, ToolMissing, build_gobench
from bench.proxy import cpu_plan, cpu_seconds
from bench.servers import Kind, Placement, Server, ensure, find_pizza, start_pizza, stop_all
from tests.support.etcd import EtcdServer
from tests.support.extension import GROUP, NAME, NAMESPACE, WardleProcess
from tests.support.gateway import GatewayProcess

FLUNDER = Kind(f"{GROUP}/v1alpha1", "Flunder", "flunders", {})
OPERATIONS = ("get", "create", "list 500")


def start_wardle(workdir: Path, etcd: EtcdServer, core: GatewayProcess) -> Server:
    wardle = WardleProcess(workdir, core, "--etcd-servers", etcd.endpoint,
                           "--etcd-prefix", f"/registry/{GROUP}",
                           # as pizza-apiserver runs (bench/servers.py)
                           "--disable-admission-plugins",
                           "MutatingAdmissionWebhook,ValidatingAdmissionWebhook")
    wardle.start()
    assert wardle.proc is not None
    certs = core.cert_dir
    client = Client(f"https://127.0.0.1:{wardle.port}", wardle.ca_file,
                    certs / "front-proxy-client.crt", certs / "front-proxy-client.key",
                    servername=f"{NAME}.{NAMESPACE}.svc",
                    headers=["X-Remote-User: bench", "X-Remote-Group: system:masters"])
    return Server("python", "Python (examples/wardle)", FLUNDER, client, wardle.proc,
                  log_path=wardle.log_path)


class Run:
    def __init__(self, args: argparse.Namespace, servers: list[Server], gobench: GoBench,
                 placement: Placement) -> None:
        self.args, self.servers, self.gobench, self.placement = args, servers, gobench, placement

    def load(self, server: Server, path: str, **kwargs: Any) -> dict[str, Any]:
        """One closed-loop run with ``server`` alone on its CPU, and its CPU seconds."""
        self.placement.measure(server, self.servers)
        before = cpu_seconds(server.pid)
        result = self.gobench.load(server.client, path, connections=self.args.connections,
                                   seconds=self.args.seconds, **kwargs)
        result["cpu_s"] = cpu_seconds(server.pid) - before
        return result

    def prepare(self, server: Server) -> None:
        kind = server.kind
        ensure(server, "POST", kind.collection("bench"),
               json.loads(kind.body("one", "bench")), (201, 409))
        self.placement.measure(server, self.servers)
        done = self.gobench.load(server.client, kind.collection("list"), method="POST",
                                 body=kind.body("l-{n}", "list"), connections=32,
                                 seconds=3600, max_requests=self.args.list_objects)
        if done["codes"].get("201", 0) != self.args.list_objects:
            raise RuntimeError(f"{server.label}: filling the list: {done['codes']} "
                               f"{done['first_error']}\n{server.log_tail()}")
        self.load(server, kind.item("bench", "one"), max_requests=200)  # warm-up

    def rounds(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        out: dict[str, dict[str, list[dict[str, Any]]]] = {
            op: {s.key: [] for s in self.servers} for op in OPERATIONS}
        for r in range(self.args.rounds):
            order = self.servers[r % len(self.servers):] + self.servers[:r % len(self.servers)]
            for op in OPERATIONS:
                for server in order:
                    kind = server.kind
                    if op == "get":
                        res, ok = self.load(server, kind.item("bench", "one")), "200"
                    elif op == "create":
                        res, ok = self.load(server, kind.collection("bench"), method="POST",
                                            body=kind.body(f"c{r}-{{n}}", "bench")), "201"
                    else:
                        res, ok = self.load(server, kind.collection("list") + "?limit=500"), \
                            "200"
                    res["errors"] = sum(n for code, n in res["codes"].items() if code != ok)
                    if res["errors"] * 2 >= max(res["n"], 1):
                        raise RuntimeError(f"{server.label} failed {op}: {res['first_error']}"
                                           f" {res['codes']}\n{server.log_tail()[-3000:]}")
                    out[op][server.key].append(res)
                    print(f"  round {r + 1} {op:<9} {server.label:<26} {res['rps']:,.0f}/s "
                          f"p99 {res['p99_ms']:.1f} ms CPU "
                          f"{1e6 * res['cpu_s'] / max(res['n'], 1):,.0f} us/op",
                          file=sys.stderr)
        return out


def render(args: argparse.Namespace, servers: list[Server],
           results: dict[str, dict[str, list[dict[str, Any]]]], placement: Placement) -> str:
    def med(op: str, key: str, field: str) -> float:
        return statistics.median(x[field] for x in results[op][key])

    def cpu_us(op: str, key: str) -> float:
        return statistics.median(1e6 * x["cpu_s"] / max(x["n"], 1) for x in results[op][key])

    go = next((s for s in servers if s.key == "go"), None)
    head = ["operation", *(f"{s.label} /s" for s in servers),
            *(["Python / Go", "Python / Go by CPU per request"] if go else []),
            *(f"{s.label} p99 ms" for s in servers), *(f"{s.label} CPU us" for s in servers)]
    lines = [f"Settings: {args.rounds} round(s) of {args.seconds:g} s, {args.connections} "
             f"connections, a list of {args.list_objects:,} objects; {placement.describe()}.",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op in OPERATIONS:
        label = f"list, page of 500 (of {args.list_objects:,})" if op == "list 500" else op
        row = [label, *(f"{med(op, s.key, 'rps'):,.0f}" for s in servers)]
        if go:
            row += [f"**{med(op, 'python', 'rps') / med(op, 'go', 'rps'):.2f}**",
                    f"{cpu_us(op, 'go') / cpu_us(op, 'python'):.2f}"]
        row += [f"{med(op, s.key, 'p99_ms'):.1f}" for s in servers]
        row += [f"{cpu_us(op, s.key):,.0f}" for s in servers]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round of 1 s, 200 objects")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--list-objects", type=int)
    parser.add_argument("--reference", choices=("go", "none"), default="go")
    parser.add_argument("--pizza-apiserver", dest="pizza")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (1.0 if args.quick else 5.0)
    args.list_objects = args.list_objects or (200 if args.quick else 1000)
    try:
        pizza = find_pizza(args.pizza) if args.reference == "go" else None
    except ToolMissing as err:
        print(f"bench/extension.py: {err}", file=sys.stderr)
        return 2
    server_cpu, load_cpus = cpu_plan(args.no_pin)
    placement = Placement(server_cpu, load_cpus)
    servers: list[Server] = []
    etcd = core = None
    with tempfile.TemporaryDirectory(prefix="bench-extension-") as tmp:
        workdir = Path(tmp)
        try:
            gobench = GoBench(build_gobench(workdir), load_cpus)
            etcd = EtcdServer(fsync=True).start()
            core = GatewayProcess(workdir / "core", "--log-format", "json").start()
            assert etcd.proc is not None and core.proc is not None
            placement.others += [etcd.proc.pid, core.proc.pid]
            for namespace in ("bench", "list"):
                code, body = core.request("POST", "/api/v1/namespaces",
                                          {"metadata": {"name": namespace}})
                assert code in (201, 409), body
            if pizza is not None:
                servers.append(start_pizza(pizza, workdir / "pizza", etcd, core))
            servers.append(start_wardle(workdir / "wardle", etcd, core))
            run = Run(args, servers, gobench, placement)
            for server in servers:
                run.prepare(server)
            results = run.rounds()
        finally:
            stop_all(servers, etcd)
            if core is not None:
                core.stop()
    print(render(args, servers, results, placement))
    return 0


if __name__ == "__main__":
    sys.exit(main())
