"""bench/vs_go.py's sweeps: how each cost grows with list size, watchers, APIServices behind
the proxy and object size. Each returns rows (one per size and server), rendered as a table
and plotted; one round each, the servers measured one after the other at every size.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import report
from bench.gotools import Client
from bench.servers import ensure, request
from tests.support.gateway import free_port, gateway_command

if TYPE_CHECKING:
    from bench.vs_go import Bench

Rows = dict[str, Any]
SWEEP_CONNECTIONS = 2  # big lists: a few at a time, as controllers list
ANNOTATIONS_LIMIT = 256 * 1024  # kube's limit on all of an object's annotations together


def _ints(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x})


def _per(res: dict[str, Any], count: str = "n") -> float:
    return 1e6 * res["cpu_s"] / max(res[count], 1)


def _note(part: str, x: int, label: str, values: dict[str, Any]) -> None:
    shown = ", ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in values.items())
    print(f"  {part} {x:>7,} {label:<22} {shown}", file=sys.stderr)


# -- list size --------------------------------------------------------------------------------


def lists(bench: Bench) -> Rows:
    """A whole list of N objects of 1 KiB, N growing (the same objects, more added)."""
    sizes = _ints(bench.args.list_sizes)
    bench.namespace("sweep-list")
    have = {s.key: 0 for s in bench.servers}
    rows = []
    for size in sizes:
        for server in bench.servers:
            bench.fill(server, "sweep-list", "s", size - have[server.key],
                       start=have[server.key])
            have[server.key] = size
            res = bench.load(server, server.kind.collection("sweep-list"),
                             connections=SWEEP_CONNECTIONS)
            values = {"list_ms": res["p50_ms"], "lists_per_s": res["rps"],
                      "cpu_ms_per_list": _per(res) / 1000, "errors": _errors(res)}
            _note("list", size, server.label, values)
            rows.append({"x": size, "server": server.label, **values})
    return {"x": "objects listed", "rows": rows}


def _errors(res: dict[str, Any]) -> int:
    return sum(n for code, n in res["codes"].items() if not code.startswith("2"))


# -- watchers ---------------------------------------------------------------------------------


def watchers(bench: Bench) -> Rows:
    """N watchers of one collection while creates go in at a fixed rate."""
    args = bench.args
    bench.namespace("sweep-watch")
    rows = []
    for count in _ints(args.watcher_counts):
        for server in bench.servers:
            res = bench.watch(server, "sweep-watch", f"n{count}", count, args.sweep_watch_rate,
                              args.watch_seconds)
            expected = max(res["expected_events"], 1)
            values = {"p50_ms": res["p50_ms"], "p99_ms": res["p99_ms"],
                      "delivered_pct": 100 * res["events"] / expected,
                      "cpu_us_per_event": _per(res, "events"),
                      "complete": f"{res['complete']}/{count}"}
            _note("watchers", count, server.label, values)
            rows.append({"x": count, "server": server.label, **values})
    return {"x": f"watchers (creates at {args.sweep_watch_rate:g}/s)", "rows": rows}


# -- APIServices behind the proxy ------------------------------------------------------------


def apiservices(bench: Bench) -> Rows:
    """GETs through the gateway's proxy spread over N APIServices of one backend."""
    gateway = next((s for s in bench.servers if s.key == "sqlite"), None)
    if gateway is None or gateway.gateway is None:
        print("  apiservices: needs the gateway on SQLite (--stores ...,sqlite); skipped",
              file=sys.stderr)
        return {"x": "APIServices", "rows": []}
    gw = gateway.gateway
    certs = bench.workdir / "things-serving"
    done = subprocess.run([*gateway_command(), "certs", "serving", "--name", "things",
                           "--namespace", "bench-apis", "--out", str(certs), "--cert-dir",
                           str(gw.cert_dir)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"gateway certs serving: {done.stderr}")
    port = free_port()
    backend = bench.gobench.serve(port, certs / "tls.crt", certs / "tls.key",
                                  gw.cert_dir / "front-proxy-ca.crt",
                                  bench.workdir / "things.log")
    bench.placement.others.append(backend.pid)
    try:
        _wait_port(port, backend)
        _register_service(gateway, port)
        direct = Client(f"https://127.0.0.1:{port}", certs / "ca.crt",
                        gw.cert_dir / "front-proxy-client.crt",
                        gw.cert_dir / "front-proxy-client.key", servername="things.bench-apis.svc")
        rows = []
        registered = 0
        ca = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        for count in _ints(bench.args.apiservice_counts):
            for i in range(registered, count):
                ensure(gateway, "POST", "/apis/apiregistration.k8s.io/v1/apiservices",
                       _apiservice(i, ca), (201, 409))
            registered = count
            _wait_available(gateway, count)
            path = "/apis/g{m}.bench.example.com/v1/namespaces/default/things/one"
            res = bench.load(gateway, path, mod=count)
            values = {"rps": res["rps"], "p50_ms": res["p50_ms"], "p99_ms": res["p99_ms"],
                      "cpu_us_per_request": _per(res), "errors": _errors(res)}
            _note("apiservices", count, gateway.label, values)
            rows.append({"x": count, "server": gateway.label, **values})
            ref = bench.gobench.load(direct, path.replace("{m}", "0"),
                                     connections=bench.args.connections,
                                     seconds=bench.args.seconds)
            values = {"rps": ref["rps"], "p50_ms": ref["p50_ms"], "p99_ms": ref["p99_ms"],
                      "cpu_us_per_request": None, "errors": _errors(ref)}
            _note("apiservices", count, "backend directly", values)
            rows.append({"x": count, "server": "backend directly (Go)", **values})
    finally:
        backend.terminate()
        backend.wait(10)
        bench.placement.others.remove(backend.pid)
    return {"x": "APIServices registered to the backend", "rows": rows}


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gobench serve exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"gobench serve: nothing listens on {port}")


def _register_service(gateway: Any, port: int) -> None:
    """The backend's namespace, Service and Endpoints (the gateway routes by Endpoints)."""
    ensure(gateway, "POST", "/api/v1/namespaces", {"metadata": {"name": "bench-apis"}},
           (201, 409))
    ensure(gateway, "POST", "/api/v1/namespaces/bench-apis/services", {
        "metadata": {"name": "things"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}, (201, 409))
    ensure(gateway, "POST", "/api/v1/namespaces/bench-apis/endpoints", {
        "metadata": {"name": "things"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                     "ports": [{"name": "https", "port": port}]}]}, (201, 409))


def _apiservice(i: int, ca: str) -> dict[str, Any]:
    group = f"g{i}.bench.example.com"
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"v1.{group}"},
            "spec": {"group": group, "version": "v1", "caBundle": ca,
                     "service": {"namespace": "bench-apis", "name": "things", "port": 443},
                     "groupPriorityMinimum": 1000, "versionPriority": 15}}


def _wait_available(gateway: Any, count: int) -> None:
    import json

    deadline = time.monotonic() + 120 + count
    missing: list[str] = []
    while time.monotonic() < deadline:
        code, raw = request(gateway, "GET", "/apis/apiregistration.k8s.io/v1/apiservices")
        items = json.loads(raw).get("items", []) if code == 200 else []
        available = {i["metadata"]["name"] for i in items
                     if any(c["type"] == "Available" and c["status"] == "True"
                            for c in i.get("status", {}).get("conditions", []))}
        missing = [f"v1.g{i}.bench.example.com" for i in range(count)
                   if f"v1.g{i}.bench.example.com" not in available]
        if not missing:
            return
        time.sleep(0.5)
    raise TimeoutError(f"APIServices not Available: {missing[:5]} ...")


# -- object size ------------------------------------------------------------------------------


def sizes(bench: Bench) -> Rows:
    """GET and create of one object of N KiB. Up to 250 KiB the payload is an annotation on
    both kinds (kube caps annotations at 256 KiB together); past that only a ConfigMap can
    hold it (in ``data``), so larger sizes are the gateway's alone."""
    bench.namespace("sweep-size")
    rows = []
    for kib in _ints(bench.args.object_sizes):
        size = kib * 1024
        for server in bench.servers:
            if size < ANNOTATIONS_LIMIT:
                body = {"payload": max(900, size - 450)}
            elif server.kind.kind == "ConfigMap":
                body = {"payload": 0, "data": size - 450}
            else:
                continue
            bench.create(server, "sweep-size", f"one-{kib}", **body)
            got = bench.load(server, server.kind.item("sweep-size", f"one-{kib}"))
            made = bench.load(server, server.kind.collection("sweep-size"), method="POST",
                              body=server.kind.body(f"z{kib}-{{n}}", "sweep-size", **body),
                              connections=4)
            values = {"get_per_s": got["rps"], "create_per_s": made["rps"],
                      "get_p50_ms": got["p50_ms"], "create_p50_ms": made["p50_ms"],
                      "get_cpu_us": _per(got), "create_cpu_us": _per(made),
                      "get_mib_per_s": got["rps"] * size / 2**20,
                      "errors": _errors(got) + _errors(made)}
            _note("size KiB", kib, server.label, values)
            rows.append({"x": kib, "server": server.label, **values})
    return {"x": "object size (KiB)", "rows": rows}


# -- rendering --------------------------------------------------------------------------------

TITLES = {
    "lists": "Whole list by size",
    "watchers": "Watch fan-out by number of watchers",
    "apiservices": "GET through the proxy by number of APIServices",
    "sizes": "GET and create by object size",
}
PANELS = {
    "lists": [("list_ms", "ms per list (p50)", True), ("cpu_ms_per_list", "server CPU ms per list",
                                                       True)],
    "watchers": [("p99_ms", "delivery p99 (ms)", True), ("cpu_us_per_event",
                                                         "server CPU us per event", True),
                 ("delivered_pct", "% of events delivered", False)],
    "apiservices": [("rps", "requests/s", True), ("cpu_us_per_request",
                                                   "gateway CPU us per request", False),
                    ("p99_ms", "p99 (ms)", True)],
    "sizes": [("get_per_s", "GET/s", True), ("create_per_s", "create/s", True),
              ("get_cpu_us", "server CPU us per GET", True)],
}


def render(part: str, data: Rows) -> str:
    rows = data["rows"]
    if not rows:
        return f"{TITLES[part]}: not measured. {data.get('error', '')}"
    keys = [k for k in rows[0] if k not in ("x", "server")]
    lines = [f"{TITLES[part]}:", "", f"| {data['x']} | server | " + " | ".join(keys) + " |",
             "|" + "---|" * (len(keys) + 2)]
    for row in rows:
        cells = [_cell(row.get(k)) for k in keys]
        lines.append(f"| {row['x']:,} | {row['server']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def plot(part: str, data: Rows, path: Path) -> None:
    panels = []
    for key, ylabel, logy in PANELS[part]:
        series: dict[str, list] = {}
        for row in data["rows"]:
            series.setdefault(row["server"], []).append((row["x"], row.get(key)))
        if any(y is not None for points in series.values() for _, y in points):
            panels.append((ylabel + (" (log)" if logy else ""), series, logy))
    report.line_plot(path, TITLES[part], data["x"], panels)
