"""Storage layer against the raw client doing the same work, in the same run.

For each backend: create, get, list of 1,000 objects and watch delivery latency, through the
gateway's storage layer and through the raw client (aetcd put/get/range and watch for etcd;
sqlite3 inserts/selects with the same pragmas for SQLite), each decoding the JSON it reads as
the storage layer does. The ratio is ours/raw speed:
1.0 is parity, 0.7 means the storage layer does 70 % of the raw client's operations per second.

    python bench/storage.py [--objects 1000] [--backends sqlite,etcd]

etcd runs with fsync on, as in production; the numbers are whole-run medians.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aetcd

from gateway.storage import codec
from gateway.storage.etcd3 import EtcdConfig, EtcdStorage
from gateway.storage.interface import EventType
from gateway.storage.sqlite import SQLiteStorage
from tests.support.etcd import EtcdServer

PREFIX = "/core/configmaps/bench/"


def configmap(i: int) -> dict:
    """A ConfigMap of about 1 KiB."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:05d}", "namespace": "bench", "uid": str(uuid.uuid4())},
            "data": {"payload": "x" * 900}}


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


class Row:
    def __init__(self, backend: str, operation: str, unit: str, ours: float,
                 raw: float | None, higher_is_better: bool = True) -> None:
        self.backend, self.operation, self.unit = backend, operation, unit
        self.ours, self.raw, self.higher = ours, raw, higher_is_better

    @property
    def ratio(self) -> float | None:
        if self.raw is None:
            return None
        return self.ours / self.raw if self.higher else self.raw / self.ours

    def render(self) -> str:
        raw = f"{self.raw:,.1f} {self.unit}" if self.raw is not None else "n/a"
        ratio = f"{self.ratio:.2f}" if self.ratio is not None else "-"
        return (f"{self.backend:<7} {self.operation:<34} {self.ours:>10,.1f} {self.unit:<6} "
                f"{raw:>16}   {ratio}")


# -- the gateway's storage layer ------------------------------------------------------------


async def bench_ours(store, n: int, rounds: int, watch_samples: int) -> dict[str, float]:
    objs = [configmap(i) for i in range(n)]
    keys = [PREFIX + o["metadata"]["name"] for o in objs]

    async def create_seq():
        for key, obj in zip(keys, objs, strict=True):
            await store.create(key, obj)

    results = {"create": n / await timed(create_seq)}

    async def get_seq():
        for key in keys:
            await store.get(key)

    results["get"] = n / await timed(get_seq)
    list_times = [await timed(lambda: store.list(PREFIX)) for _ in range(rounds)]
    results["list"] = statistics.median(list_times) * 1000

    conc_keys = [PREFIX + f"c-{i:05d}" for i in range(n)]

    async def create_concurrent():
        sem = asyncio.Semaphore(64)

        async def one(key, obj):
            async with sem:
                await store.create(key, obj)

        await asyncio.gather(*(one(k, o) for k, o in zip(conc_keys, objs, strict=True)))

    results["create64"] = n / await timed(create_concurrent)
    results["watch"] = await watch_latency_ours(store, watch_samples)
    return results


async def watch_latency_ours(store, samples: int) -> float:
    watch = await store.watch("/core/configmaps/watched/")
    latencies = []
    for i in range(samples):
        start = time.perf_counter()
        await store.create(f"/core/configmaps/watched/w{i}", configmap(i))
        while True:
            event = await watch.__anext__()
            if event.type != EventType.BOOKMARK:
                break
        latencies.append(time.perf_counter() - start)
    watch.stop()
    return statistics.median(latencies) * 1000


# -- raw etcd (aetcd) -----------------------------------------------------------------------


async def bench_raw_etcd(endpoint_port: int, prefix: str, n: int, rounds: int,
                         watch_samples: int) -> dict[str, float]:
    objs = [codec.dumps(configmap(i)) for i in range(n)]
    keys = [f"{prefix}{PREFIX}raw-{i:05d}".encode() for i in range(n)]
    async with aetcd.Client(port=endpoint_port) as client:

        async def put_seq():
            for key, value in zip(keys, objs, strict=True):
                await client.put(key, value)

        results = {"create": n / await timed(put_seq)}

        async def get_seq():
            for key in keys:
                codec.loads((await client.get(key)).value)

        results["get"] = n / await timed(get_seq)
        range_prefix = f"{prefix}{PREFIX}raw-".encode()

        async def list_prefix():
            return [codec.loads(kv.value) for kv in await client.get_prefix(range_prefix)]

        list_times = [await timed(list_prefix) for _ in range(rounds)]
        results["list"] = statistics.median(list_times) * 1000
        conc = [f"{prefix}{PREFIX}rawc-{i:05d}".encode() for i in range(n)]

        async def put_concurrent():
            sem = asyncio.Semaphore(64)

            async def one(key, value):
                async with sem:
                    await client.put(key, value)

            await asyncio.gather(*(one(k, v) for k, v in zip(conc, objs, strict=True)))

        results["create64"] = n / await timed(put_concurrent)
        results["watch"] = await watch_latency_raw_etcd(client, prefix, watch_samples)
    return results


async def watch_latency_raw_etcd(client, prefix: str, samples: int) -> float:
    watched = f"{prefix}/raw-watched/".encode()
    watch = await client.watch_prefix(watched)
    events = watch.__aiter__()
    latencies = []
    for i in range(samples):
        start = time.perf_counter()
        await client.put(watched + str(i).encode(), b"{}")
        await events.__anext__()
        latencies.append(time.perf_counter() - start)
    await watch.cancel()
    return statistics.median(latencies) * 1000


# -- raw sqlite3 ----------------------------------------------------------------------------


def bench_raw_sqlite(path: Path, n: int, rounds: int) -> dict[str, float]:
    """The same work with plain sqlite3: same pragmas, one commit per write, plain selects."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
    objs = [codec.dumps(configmap(i)) for i in range(n)]
    keys = [PREFIX + f"cm-{i:05d}" for i in range(n)]
    start = time.perf_counter()
    for key, value in zip(keys, objs, strict=True):
        conn.execute("INSERT INTO kv VALUES (?, ?)", (key, value))
    results = {"create": n / (time.perf_counter() - start)}
    start = time.perf_counter()
    for key in keys:
        codec.loads(conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()[0])
    results["get"] = n / (time.perf_counter() - start)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        rows = conn.execute("SELECT key, value FROM kv WHERE key >= ? AND key < ? ORDER BY key",
                            (PREFIX, PREFIX[:-1] + "0")).fetchall()
        [codec.loads(v) for _, v in rows]
        times.append(time.perf_counter() - start)
    results["list"] = statistics.median(times) * 1000
    conn.close()
    return results


# -- driver ---------------------------------------------------------------------------------


def rows_for(backend: str, ours: dict[str, float], raw: dict[str, float], n: int) -> list[Row]:
    return [
        Row(backend, "create (one at a time)", "op/s", ours["create"], raw.get("create")),
        Row(backend, "create (64 in flight)", "op/s", ours["create64"],
            raw.get("create64", raw.get("create"))),
        Row(backend, "get (one at a time)", "op/s", ours["get"], raw.get("get")),
        Row(backend, f"list of {n} objects", "ms", ours["list"], raw.get("list"),
            higher_is_better=False),
        Row(backend, "watch delivery (write -> event)", "ms", ours["watch"], raw.get("watch"),
            higher_is_better=False),
    ]


async def run_sqlite(n: int, rounds: int, samples: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        raw = bench_raw_sqlite(Path(tmp) / "raw.db", n, rounds)
        store = SQLiteStorage(Path(tmp) / "state.db")
        await store.start()
        try:
            ours = await bench_ours(store, n, rounds, samples)
        finally:
            await store.close()
    return rows_for("sqlite", ours, raw, n)


async def run_etcd(n: int, rounds: int, samples: int) -> list[Row]:
    with EtcdServer(fsync=True) as server:
        prefix = "/bench"
        raw = await bench_raw_etcd(server.port, prefix + "-raw", n, rounds, samples)
        store = EtcdStorage(EtcdConfig(servers=(server.endpoint,), prefix=prefix))
        await store.start()
        try:
            ours = await bench_ours(store, n, rounds, samples)
        finally:
            await store.close()
    return rows_for("etcd", ours, raw, n)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20, help="list repetitions")
    parser.add_argument("--watch-samples", type=int, default=200)
    parser.add_argument("--backends", default="sqlite,etcd")
    args = parser.parse_args()
    rows: list[Row] = []
    for backend in args.backends.split(","):
        runner = {"sqlite": run_sqlite, "etcd": run_etcd}[backend]
        rows += await runner(args.objects, args.rounds, args.watch_samples)
    print(f"{'backend':<7} {'operation':<34} {'storage layer':>17} {'raw client':>16}   "
          "ours/raw")
    for row in rows:
        print(row.render())


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
