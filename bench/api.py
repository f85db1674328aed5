"""The HTTP API against the storage layer doing the same work, in the same run.

Starts a real ``gateway serve`` (embedded store) and measures, over HTTPS with keep-alive:
create and get one at a time; a list of 10,000 ConfigMaps of 1 KiB, whole and in pages of
500; and watch fan-out: 1,000 watchers while 100 writes a second go in, every watcher counting
every event and its delivery latency (write start -> line received). Beside each, the storage
layer (SQLite store, watch cache) does the same work in this process. Ratios are HTTP/storage.

    python bench/api.py [--objects 10000] [--watchers 1000] [--rate 100] [--seconds 10]

Targets: HTTP create >= 0.5x the storage layer; list of 10,000 p99 < 1 s; every watcher gets
every event, delivery p99 < 1 s.

The HTTP watchers are bench/gobench's Go watch client (built with Go as bench/gotools.py finds
or installs it): a Python client was the limit of this measurement, not the gateway. With
``--watch-client python`` (or no Go to be had) the old Python client runs and the output says
its figures are the client's bound; bench/vs_go.py measures fan-out against Go.
Every namespace holds the gateway's ``kube-root-ca.crt``: lists count the bench's own objects.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import re
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from bench.gotools import Client, GoBench, ToolMissing, build_gobench
from bench.rawhttp import RawConnection
from bench.servers import CONFIGMAP, SENT_KEY
from gateway.storage.interface import EventType
from gateway.storage.sqlite import SQLiteStorage
from gateway.storage.watchcache import Cacher
from tests.support.gateway import GatewayProcess

NS = "bench"
PATH = f"/api/v1/namespaces/{NS}/configmaps"
PREFIX = f"/core/configmaps/{NS}/"
PAYLOAD = "x" * 900
SENT = re.compile(rb'"sent":"([0-9.]+)"')


def configmap(name: str, sent: float | None = None, payload: str = PAYLOAD) -> dict:
    data = {"payload": payload}
    if sent is not None:
        data["sent"] = repr(sent)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS}, "data": data}


def ours(items: list[dict]) -> int:
    """The bench's objects among ``items`` (the namespace also holds kube-root-ca.crt)."""
    return sum(1 for item in items if item["metadata"]["name"].startswith(("seq-", "obj-")))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def client_ssl(certs: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.load_cert_chain(str(certs / "admin.crt"), str(certs / "admin.key"))
    return ctx


# -- HTTP side --------------------------------------------------------------------------------


class Http:
    """Keep-alive connections to the gateway: one for one-at-a-time work, a pool for fills."""

    def __init__(self, url: str, certs: Path, pool: int = 16) -> None:
        host, port = url.removeprefix("https://").rsplit(":", 1)
        self.address = (host, int(port))
        self.ssl = client_ssl(certs)
        self.pool_size = pool
        self.pool: asyncio.Queue[RawConnection] = asyncio.Queue()

    async def open(self) -> Http:
        for _ in range(self.pool_size):
            self.pool.put_nowait(await RawConnection(*self.address, self.ssl).connect())
        return self

    async def call(self, method: str, path: str, body: dict | None = None,
                   expect: int = 200) -> dict:
        conn = await self.pool.get()
        try:
            code, data = await conn.request(method, path, orjson.dumps(body) if body else b"")
        finally:
            self.pool.put_nowait(conn)
        assert code == expect, data[:300]
        return orjson.loads(data)

    async def post(self, path: str, body: dict) -> dict:
        return await self.call("POST", path, body, 201)

    async def get(self, path: str) -> dict:
        return await self.call("GET", path)

    async def close(self) -> None:
        while not self.pool.empty():
            await self.pool.get_nowait().close()


async def timed_each(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        await fn(item)
    return time.perf_counter() - start


async def fill(fn, names: list[str], concurrency: int = 32) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(name: str) -> None:
        async with sem:
            await fn(name)

    await asyncio.gather(*(one(n) for n in names))


async def http_side(http: Http, n: int, objects: int, rounds: int) -> dict:
    out = {}
    names = [f"seq-{i:05d}" for i in range(n)]
    out["create"] = n / await timed_each(lambda m: http.post(PATH, configmap(m)), names)
    out["get"] = n / await timed_each(lambda m: http.get(f"{PATH}/{m}"), names)
    await fill(lambda m: http.post(PATH, configmap(m)),
               [f"obj-{i:05d}" for i in range(objects - n)])
    whole = []
    for _ in range(rounds):
        start = time.perf_counter()
        listed = await http.get(PATH)
        whole.append(time.perf_counter() - start)
        assert ours(listed["items"]) == objects, len(listed["items"])
    out["list"] = whole
    paged = []
    for _ in range(max(2, rounds // 2)):
        start, token, count = time.perf_counter(), "", 0
        while True:
            page = await http.get(f"{PATH}?limit=500" + (f"&continue={token}" if token else ""))
            count += ours(page["items"])
            token = page["metadata"].get("continue", "")
            if not token:
                break
        paged.append(time.perf_counter() - start)
        assert count == objects
    out["paged"] = paged
    return out


# -- storage side -----------------------------------------------------------------------------


async def storage_side(store: SQLiteStorage, n: int, objects: int, rounds: int) -> dict:
    out = {}
    names = [f"seq-{i:05d}" for i in range(n)]
    out["create"] = n / await timed_each(
        lambda m: store.create(PREFIX + m, configmap(m)), names)
    out["get"] = n / await timed_each(lambda m: store.get(PREFIX + m), names)
    await fill(lambda m: store.create(PREFIX + m, configmap(m)),
               [f"obj-{i:05d}" for i in range(objects - n)])
    whole = []
    for _ in range(rounds):
        start = time.perf_counter()
        listed = await store.list(PREFIX)
        whole.append(time.perf_counter() - start)
        assert len(listed.items) == objects
    out["list"] = whole
    paged = []
    for _ in range(max(2, rounds // 2)):
        start, token = time.perf_counter(), ""
        while True:
            page = await store.list(PREFIX, limit=500, continue_token=token)
            token = page.continue_token
            if not token:
                break
        paged.append(time.perf_counter() - start)
    out["paged"] = paged
    return out


# -- watch fan-out ----------------------------------------------------------------------------


def watch_client(address: tuple[str, int], certs: str, watchers: int, expected: int,
                 from_rv: int, ready, results) -> None:
    """A process holding ``watchers`` watches; reports events seen and latencies.

    It reads raw bytes and finds each event's send time with one regular expression per read,
    so that it keeps up with the gateway instead of measuring itself.
    """

    async def one(index: int, counts: list[int], latencies: list[float], opened) -> None:
        reader, writer = await asyncio.open_connection(
            *address, ssl=client_ssl(Path(certs)), server_hostname="localhost", limit=2**22)
        writer.write(f"GET {PATH}?watch=1&resourceVersion={from_rv}&timeoutSeconds=600 "
                     "HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        opened()
        tail = b""
        while counts[index] < expected:
            chunk = await reader.read(65536)
            if not chunk:
                break
            data = tail + chunk
            now = time.time()
            end = 0
            for match in SENT.finditer(data):
                latencies.append(now - float(match.group(1)))
                counts[index] += 1
                end = match.end()
            tail = data[max(end, len(data) - 64):]
        writer.close()

    async def main(argv: list[str] | None = None) -> None:
        counts, latencies, opened_count = [0] * watchers, [], [0]

        def opened() -> None:
            opened_count[0] += 1
            if opened_count[0] == watchers:
                ready.set()

        await asyncio.gather(*(one(i, counts, latencies, opened) for i in range(watchers)))
        results.put((counts, latencies))

    asyncio.run(main())


async def http_fanout(http: Http, proc: GatewayProcess, watchers: int, rate: int,
                      seconds: int) -> tuple[list[int], list[float]]:
    writes = rate * seconds
    listed = await http.get(f"{PATH}?limit=1")
    from_rv = int(listed["metadata"]["resourceVersion"])
    processes = 2
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    readies = [ctx.Event() for _ in range(processes)]
    workers = [ctx.Process(target=watch_client, args=(
        http.address, str(proc.cert_dir), watchers // processes, writes, from_rv, readies[i],
        results)) for i in range(processes)]
    for worker in workers:
        worker.start()
    for event in readies:
        await asyncio.get_running_loop().run_in_executor(None, event.wait, 120)
    await paced_writes(lambda i: http.post(PATH, configmap(f"w-{i:05d}", time.time(), "")),
                       rate, writes)
    counts, latencies = [], []
    for _ in workers:
        c, lat = await asyncio.get_running_loop().run_in_executor(None, results.get, True, 180)
        counts += c
        latencies += lat
    for worker in workers:
        worker.join(30)
    return counts, latencies


def go_fanout(proc: GatewayProcess, workdir: Path, watchers: int, rate: int,
              seconds: int) -> dict:
    """The same fan-out with bench/gobench's Go watch client (watches and paced creates)."""
    gobench = GoBench(build_gobench(workdir))
    certs = proc.cert_dir
    client = Client(proc.url, certs / "ca.crt", certs / "admin.crt", certs / "admin.key")
    body = CONFIGMAP.body("w-{n}", NS, payload=0, annotations={SENT_KEY: "{sent}"})
    return gobench.watch(client, PATH, body, watchers=watchers, rate=rate, seconds=seconds)


async def paced_writes(write, rate: int, total: int) -> None:
    start = time.perf_counter()
    pending = []
    for i in range(total):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        pending.append(asyncio.ensure_future(write(i)))
    await asyncio.gather(*pending)


async def storage_fanout(store: SQLiteStorage, watchers: int, rate: int,
                         seconds: int) -> tuple[list[int], list[float]]:
    writes = rate * seconds
    cacher = Cacher(store, PREFIX)
    await cacher.start()
    await cacher.wait_ready(30)
    watches = [await cacher.watch_cached(PREFIX) for _ in range(watchers)]
    counts, latencies = [0] * watchers, []

    async def consume(index: int) -> None:
        async for event in watches[index]:
            if event.type == EventType.ADDED:
                latencies.append(time.time() - float(event.object["data"]["sent"]))
                counts[index] += 1
                if counts[index] == writes:
                    return

    consumers = [asyncio.ensure_future(consume(i)) for i in range(watchers)]
    await paced_writes(lambda i: store.create(PREFIX + f"w-{i:05d}",
                                              configmap(f"w-{i:05d}", time.time(), "")),
                       rate, writes)
    await asyncio.wait_for(asyncio.gather(*consumers), 120)
    await cacher.close()
    return counts, latencies


# -- report -----------------------------------------------------------------------------------


def report(http: dict, storage: dict, fanout: tuple | dict, fanout_ref: tuple, args) -> None:
    print(f"{'operation':<42} {'HTTP':>14} {'storage layer':>16}   HTTP/storage")
    print(f"{'create one at a time (op/s)':<42} {http['create']:>14,.0f} "
          f"{storage['create']:>16,.0f}   {http['create'] / storage['create']:.2f}")
    print(f"{'get one at a time (op/s)':<42} {http['get']:>14,.0f} "
          f"{storage['get']:>16,.0f}   {http['get'] / storage['get']:.2f}")
    for key, label in (("list", f"list of {args.objects} p50 / p99 (s)"),
                       ("paged", f"list of {args.objects} by 500 p50 / p99 (s)")):
        h, s = http[key], storage[key]
        print(f"{label:<42} {statistics.median(h):>6.3f} / {pct(h, 99):.3f} "
              f"{statistics.median(s):>8.3f} / {pct(s, 99):.3f}   "
              f"{pct(s, 99) / pct(h, 99):.2f}")
    writes = args.rate * args.seconds
    if isinstance(fanout, dict):  # the Go watch client
        print(f"watch fan-out via HTTP (Go client): {fanout['complete']}/{fanout['watchers']} "
              f"watchers got all {fanout['expected_per_watcher']} events; delivery p50 "
              f"{fanout['p50_ms']:.1f} ms, p99 {fanout['p99_ms']:.1f} ms")
    fanouts = [("storage layer", fanout_ref)]
    if not isinstance(fanout, dict):
        fanouts.insert(0, ("HTTP (Python)", fanout))
    for name, (counts, lat) in fanouts:
        complete = sum(1 for c in counts if c == writes)
        print(f"watch fan-out via {name:<14}: {complete}/{len(counts)} watchers got all "
              f"{writes} events; delivery p50 {statistics.median(lat) * 1000:.1f} ms, "
              f"p99 {pct(lat, 99) * 1000:.1f} ms")
    if not isinstance(fanout, dict):
        print("  (the Python watch client is the limit of the HTTP figures, not the gateway: "
              "bench/vs_go.py measures fan-out with a Go client)")


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--sequential", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--watch-client", choices=("go", "python"), default="go")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStorage(Path(tmp) / "bench.db")
        await store.start()
        storage = await storage_side(store, args.sequential, args.objects, args.rounds)
        fanout_ref = await storage_fanout(store, args.watchers, args.rate, args.seconds)
        await store.close()
        proc = GatewayProcess(Path(tmp) / "gw").start()
        http = await Http(proc.url, proc.cert_dir).open()
        try:
            await http.post("/api/v1/namespaces", {"metadata": {"name": NS}})
            results = await http_side(http, args.sequential, args.objects, args.rounds)
            fanout = None
            if args.watch_client == "go":
                try:
                    fanout = await asyncio.get_running_loop().run_in_executor(
                        None, go_fanout, proc, Path(tmp), args.watchers, args.rate,
                        args.seconds)
                except ToolMissing as err:
                    print(f"no Go watch client ({err}): the Python one runs", file=sys.stderr)
            if fanout is None:
                fanout = await http_fanout(http, proc, args.watchers, args.rate, args.seconds)
        finally:
            await http.close()
            proc.stop()
    report(results, storage, fanout, fanout_ref, args)


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
