"""What a 1 KiB object costs in the gateway's resident memory while the gateway holds it.

One ``gateway serve`` per store (the embedded SQLite store, and etcd): after a warm-up, its
resident set size (VmRSS) is read; then N ConfigMaps of about 1 KiB are created over HTTPS;
once the watch cache holds the last of them (a ``resourceVersion=0`` list, served from the
cache, answers at that revision or later) and the gateway has settled, VmRSS is read again.
The difference over N is the cost of one object held: the watch cache's copy and everything
else the process keeps for it.

    python bench/memory.py [--objects 10000] [--stores sqlite,etcd] [--no-docs]

Target: at most 3 KiB per object (issue 17 measured 3.9 KiB: RSS 90 -> 131 MB for 10,641
ConfigMaps on the embedded store). The figure is a single process's and needs no reference
run beside it: memory does not vary with a busy machine as time does.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from bench import report
from bench.rawhttp import RawConnection
from tests.support.etcd import EtcdServer
from tests.support.gateway import GatewayProcess

NS = "memory"
PATH = f"/api/v1/namespaces/{NS}/configmaps"
TARGET_KIB = 3.0
WARMUP = 300


def configmap(name: str) -> bytes:
    """About 1 KiB stored: a 900-byte value and the metadata the gateway adds."""
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": name, "namespace": NS},
                         "data": {"payload": "x" * 900}})


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


async def create_all(proc: GatewayProcess, names: list[str], connections: int = 16) -> str:
    """Creates ``names`` over keep-alive connections; the last resourceVersion written."""
    host, port = proc.url.removeprefix("https://").rsplit(":", 1)
    pool = [await RawConnection(host, int(port), proc.ssl_context()).connect()
            for _ in range(connections)]
    queue = list(reversed(names))
    revisions: list[int] = []

    async def worker(conn: RawConnection) -> None:
        while queue:
            name = queue.pop()
            code, body = await conn.request("POST", PATH, configmap(name))
            if code != 201:
                raise RuntimeError(f"create {name}: {code} {body[:300]!r}")
            revisions.append(int(orjson.loads(body)["metadata"]["resourceVersion"]))

    try:
        await asyncio.gather(*(worker(c) for c in pool))
    finally:
        for conn in pool:
            await conn.close()
    return str(max(revisions))


def wait_cached(proc: GatewayProcess, revision: str, timeout: float = 120) -> None:
    """Until a list from the watch cache is at ``revision`` or later."""
    deadline = time.monotonic() + timeout
    while True:
        code, body = proc.request("GET", f"{PATH}?resourceVersion=0&limit=1")
        if code == 200 and int(orjson.loads(body)["metadata"]["resourceVersion"]) >= int(revision):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the watch cache did not reach {revision}: {code}")
        time.sleep(0.2)


def settled_rss(pid: int, seconds: float = 3.0) -> int:
    """VmRSS after ``seconds`` with no requests (late frees and the controllers' work done)."""
    time.sleep(seconds)
    return rss_kib(pid)


def measure(store: str, workdir: Path, objects: int) -> dict:
    etcd = None
    extra: list[str] = []
    if store == "etcd":
        etcd = EtcdServer().start()
        extra = ["--etcd-servers", etcd.endpoint]
    proc = GatewayProcess(workdir / store, *extra).start()
    try:
        assert proc.proc is not None
        pid = proc.proc.pid
        code, body = proc.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        if code != 201:
            raise RuntimeError(f"namespace: {code} {body[:300]!r}")
        # the warm-up: code paths, the namespace's cache and the first objects of the kind
        wait_cached(proc, asyncio.run(create_all(proc, [f"warm-{i}" for i in range(WARMUP)])))
        before = settled_rss(pid)
        last = asyncio.run(create_all(proc, [f"obj-{i:06d}" for i in range(objects)]))
        wait_cached(proc, last)
        after = settled_rss(pid)
        peak = rss_kib(pid, "VmHWM")
        code, one = proc.request("GET", f"{PATH}/obj-000000")
        # a whole list's buffers are freed after it, but not always given back to the system
        code, listed = proc.request("GET", f"{PATH}?resourceVersion=0")
        if code != 200 or len(orjson.loads(listed)["items"]) < objects:
            raise RuntimeError(f"list: {code}")
        del listed
        after_list = settled_rss(pid)
        return {"store": store, "objects": objects, "before_kib": before, "after_kib": after,
                "peak_kib": peak, "after_list_kib": after_list, "object_bytes": len(one),
                "kib_per_object": (after - before) / objects,
                "kib_per_object_after_list": (after_list - before) / objects}
    finally:
        proc.stop()
        if etcd is not None:
            etcd.stop()
            etcd.cleanup()


def render(results: list[dict]) -> str:
    lines = [f"| store | objects | RSS before (MiB) | RSS after (MiB) | peak while creating "
             f"(MiB) | object as JSON (bytes) | KiB per object (target <= {TARGET_KIB:g}) | "
             f"RSS after a whole list (MiB) | KiB per object after it |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        verdict = "met" if r["kib_per_object"] <= TARGET_KIB else "NOT met"
        lines.append(f"| {r['store']} | {r['objects']:,} | {r['before_kib'] / 1024:.1f} | "
                     f"{r['after_kib'] / 1024:.1f} | {r['peak_kib'] / 1024:.1f} | "
                     f"{r['object_bytes']:,} | **{r['kib_per_object']:.2f}** ({verdict}) | "
                     f"{r['after_list_kib'] / 1024:.1f} | "
                     f"{r['kib_per_object_after_list']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--stores", default="sqlite,etcd")
    parser.add_argument("--docs", type=Path, default=report.DOCS)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    info = report.machine()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        results = [measure(store, Path(tmp), args.objects)
                   for store in args.stores.split(",") if store]
    text = (f"Run: {report.machine_line(info)}. RSS of one `gateway serve` after {WARMUP} "
            f"warm-up ConfigMaps, then after {args.objects:,} more of about 1 KiB, once the "
            f"watch cache holds them and the process has been idle 3 s; then once more after a "
            f"whole list of them from the watch cache (what its buffers leave behind).\n\n"
            + render(results))
    print(text)
    if not args.no_docs:
        report.write_block(args.docs, "memory latest", text)
        print(f"\nwritten to {args.docs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
