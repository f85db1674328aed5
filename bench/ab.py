"""Two versions of the gateway side by side: the server's CPU per request, in the same run.

On a shared machine the time a request takes moves with everyone else's load; two gateways
measured in interleaved rounds (the order swapped each round), each pinned alone to one CPU
while measured, and compared by their own CPU time per request, see the same machine. That is
how an idea is measured before it is kept:

    python bench/ab.py --before REV_OR_DIR [--after REV_OR_DIR] [--stores sqlite,etcd]
                       [--ops get,list500,...] [--rounds 3] [--seconds 5] [--objects 10000]

A version is a git revision (its ``gateway/`` is extracted into a temporary directory) or a
directory holding a ``gateway/`` package; ``--after`` defaults to the working tree. Each
gateway runs with ``PYTHONPATH`` at its version; the load is bench/gobench (16 connections, 2
for the lists of 10,000). On etcd both gateways share one etcd under their own prefixes.

Operations (ConfigMaps of about 1 KiB, the payload in an annotation): ``get``; ``list500``
(a page of 500 from the store) and ``list10k`` (the ``--objects`` whole, from the store);
``cached10k`` and ``cached500`` (``resourceVersion=0``: from the watch cache, the 10,000 of
one namespace, and a namespace of 500 beside them); ``pbcached10k`` and ``pbcached500`` (the
same in protobuf); ``watch`` (1,000 watchers, 100 creates a second for 5 s: CPU per event
delivered, the watches' opening left out).
Printed: every run, then per store and operation the medians and after/before (below 1: the
after version spends less CPU per request).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gotools import GoBench, ToolMissing, build_gobench
from bench.proxy import cpu_plan, cpu_seconds, pin
from bench.servers import CONFIGMAP, SENT_KEY, Server, ensure, gateway_client
from tests.support.etcd import EtcdServer
from tests.support.gateway import GatewayProcess

ROOT = Path(__file__).resolve().parent.parent
OPS = ("get", "list500", "list10k", "cached10k", "cached500", "pbcached10k", "pbcached500",
       "watch")
PROTOBUF = "Accept: application/vnd.kubernetes.protobuf"


def source(version: str, into: Path) -> str:
    """A directory whose ``gateway/`` is ``version`` (a directory, or a git revision)."""
    if Path(version, "gateway").is_dir():
        return str(Path(version).resolve())
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", version, "gateway"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into)


def start(workdir: Path, tree: str, extra: list[str]) -> Server:
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = tree
    try:
        gw = GatewayProcess(workdir, "--log-format", "json", *extra).start()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved
    assert gw.proc is not None
    return Server(tree, tree, CONFIGMAP, gateway_client(gw), gw.proc, gateway=gw)


def fill(gobench: GoBench, server: Server, objects: int) -> None:
    for ns in ("bench", "list", "small", "watch"):
        ensure(server, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, (201, 409))
    ensure(server, "POST", CONFIGMAP.collection("bench"),
           json.loads(CONFIGMAP.body("one", "bench")), (201, 409))
    for ns, count in (("list", objects), ("small", min(objects, 500))):
        done = gobench.load(server.client, CONFIGMAP.collection(ns), method="POST",
                            body=CONFIGMAP.body("l-{n}", ns), connections=32, seconds=3600,
                            max_requests=count)
        if done["codes"].get("201", 0) != count:
            raise RuntimeError(f"filling {ns}: {done['codes']} {done['first_error']}")


PATHS = {"get": CONFIGMAP.item("bench", "one"),
         "list500": CONFIGMAP.collection("list") + "?limit=500",
         "list10k": CONFIGMAP.collection("list"),
         "cached10k": CONFIGMAP.collection("list") + "?resourceVersion=0",
         "cached500": CONFIGMAP.collection("small") + "?resourceVersion=0"}


def run_op(gobench: GoBench, server: Server, op: str, args: argparse.Namespace,
           tag: str) -> tuple[float, str]:
    """CPU microseconds per request (per event delivered for watch), and a summary."""
    if op == "watch":
        body = CONFIGMAP.body(f"w{tag}-{{n}}", "watch", annotations={SENT_KEY: "{sent}"})
        start_cpu = cpu_seconds(server.pid)
        res = gobench.watch(server.client, CONFIGMAP.collection("watch"), body,
                            watchers=args.watchers, rate=args.rate, seconds=args.watch_seconds,
                            pid=server.pid)
        cpu = res.get("server_cpu_s") or (cpu_seconds(server.pid) - start_cpu)
        return cpu / max(res["events"], 1) * 1e6, \
            f"{res['complete']}/{res['opened']} complete, p99 {res['p99_ms']:.0f} ms"
    client = server.client
    if op.startswith("pb"):
        client = dataclasses.replace(client, headers=[*client.headers, PROTOBUF])
    path = PATHS[op.removeprefix("pb")]
    start_cpu = cpu_seconds(server.pid)
    res = gobench.load(client, path, seconds=args.seconds,
                       connections=2 if "10k" in op else 16)
    cpu = cpu_seconds(server.pid) - start_cpu
    errors = sum(n for code, n in res["codes"].items() if code != "200")
    return cpu / max(res["n"], 1) * 1e6, \
        f"{res['rps']:.1f}/s p50 {res['p50_ms']:.1f} ms" + (f", {errors} errors" if errors else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision or directory")
    parser.add_argument("--after", default=str(ROOT), help="git revision or directory")
    parser.add_argument("--stores", default="sqlite,etcd")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100, help="creates a second in watch")
    parser.add_argument("--watch-seconds", type=float, default=5)
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)
    ops = [op for op in args.ops.split(",") if op]
    unknown = set(ops) - set(OPS)
    if unknown:
        parser.error(f"unknown operations: {sorted(unknown)}")
    server_cpu, load_cpus = cpu_plan(args.no_pin)
    samples: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp_name:
        tmp = Path(tmp_name)
        trees = {"before": source(args.before, tmp / "before-src"),
                 "after": source(args.after, tmp / "after-src")}
        try:
            gobench = GoBench(build_gobench(tmp / "gobench"), load_cpus)
        except ToolMissing as err:
            print(err, file=sys.stderr)
            return 2
        for store in [s for s in args.stores.split(",") if s]:
            etcd = EtcdServer().start() if store == "etcd" else None
            servers: dict[str, Server] = {}
            try:
                for label, tree in trees.items():
                    extra = [] if etcd is None else [
                        "--etcd-servers", etcd.endpoint, "--etcd-prefix", f"/{label}"]
                    servers[label] = start(tmp / f"{store}-{label}", tree, extra)
                others = [etcd.proc.pid] if etcd is not None and etcd.proc is not None else []
                for server in servers.values():
                    fill(gobench, server, args.objects)
                    gobench.load(server.client, PATHS["get"], seconds=1)  # warm-up
                for r in range(args.rounds):
                    order = list(servers.items())
                    if r % 2:
                        order.reverse()
                    for op in ops:
                        for label, server in order:
                            if server_cpu:
                                for pid in [s.pid for s in servers.values()] + others:
                                    pin(pid, load_cpus)
                                pin(server.pid, server_cpu)
                            per, summary = run_op(gobench, server, op, args, f"{r}{label}")
                            samples.setdefault((store, op, label), []).append(per)
                            unit = "event" if op == "watch" else "request"
                            print(f"{store:<6} round {r + 1} {op:<11} {label:<6} "
                                  f"{per:>11,.1f} us CPU per {unit}  ({summary})", flush=True)
            finally:
                for server in servers.values():
                    with contextlib.suppress(Exception):
                        assert server.gateway is not None
                        server.gateway.stop()
                if etcd is not None:
                    etcd.stop()
                    etcd.cleanup()
    print(f"\nbefore: {args.before}; after: {args.after}; {time.strftime('%Y-%m-%d %H:%M')}")
    print("median gateway CPU per request (us); after/before below 1: the after version is "
          "cheaper")
    for store in [s for s in args.stores.split(",") if s]:
        for op in ops:
            before = statistics.median(samples[(store, op, "before")])
            after = statistics.median(samples[(store, op, "after")])
            print(f"{store:<6} {op:<11} before {before:>11,.1f}  after {after:>11,.1f}  "
                  f"after/before {after / before:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
