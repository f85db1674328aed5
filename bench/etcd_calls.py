"""What one unary etcd call costs this process, by the two ways Python's gRPC offers to make it
from an asyncio server, in the same run.

- ``aio``: grpc.aio's unary call, awaited (what gateway/storage/etcd3.py does);
- ``sync``: a synchronous channel's ``future()``, its completion handed to the event loop with
  ``call_soon_threadsafe`` (gRPC's own threads do the I/O).

The create path on etcd spends most of its own CPU in grpc.aio's call machinery
(docs/performance.md); this bench is how the second way was measured before it was dropped.
Each round runs both, ``--calls`` Range requests of a 1 KiB value from ``--concurrency``
tasks, and reads this process's CPU time (all its threads) per call.

    python bench/etcd_calls.py [--calls 20000] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
import uvloop
from aetcd import rpc

from tests.support.etcd import EtcdServer

KEY = b"/bench/etcd-calls"
Call = Callable[[Any], Awaitable[Any]]


def aio_caller(target: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    channel = grpc.aio.insecure_channel(target)
    stub = rpc.KVStub(channel)

    async def call(request: Any) -> Any:
        return await stub.Range(request, timeout=5)

    return call, channel.close


def sync_caller(target: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    channel = grpc.insecure_channel(target)
    stub = rpc.KVStub(channel)
    loop = asyncio.get_running_loop()

    def settle(waiter: asyncio.Future[Any], done: grpc.Future) -> None:
        if waiter.done():
            return
        try:
            waiter.set_result(done.result())
        except grpc.RpcError as err:
            waiter.set_exception(err)

    def call(request: Any) -> asyncio.Future[Any]:
        waiter = loop.create_future()
        stub.Range.future(request, timeout=5).add_done_callback(
            lambda done: loop.call_soon_threadsafe(settle, waiter, done))
        return waiter

    async def close() -> None:
        channel.close()

    return call, close


CALLERS = {"aio": aio_caller, "sync": sync_caller}


async def measure(way: str, target: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(CPU microseconds per call, calls a second) for one way."""
    call, close = CALLERS[way](target)
    request = rpc.RangeRequest(key=KEY)
    await call(request)  # connected before the clock starts

    async def worker(count: int) -> None:
        for _ in range(count):
            await call(request)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(calls // concurrency) for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await close()
    done = calls // concurrency * concurrency
    return cpu / done * 1e6, done / wall


async def put_value(target: str) -> None:
    channel = grpc.aio.insecure_channel(target)
    await rpc.KVStub(channel).Put(rpc.PutRequest(key=KEY, value=b"x" * 1024))
    await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {way: [] for way in CALLERS}
    with EtcdServer() as etcd:
        target = etcd.endpoint.split("//", 1)[1]
        uvloop.run(put_value(target))
        for _ in range(args.rounds):
            for way in CALLERS:
                results[way].append(uvloop.run(
                    measure(way, target, args.calls, args.concurrency)))
    print(f"unary Range of 1 KiB, {args.calls:,} calls from {args.concurrency} tasks, "
          f"{args.rounds} alternated rounds; CPU of this process (all threads) per call")
    print(f"{'way':<6} {'CPU us/call':>12} {'calls/s':>10}   rounds (CPU us/call)")
    for way, rows in results.items():
        cpus = [cpu for cpu, _ in rows]
        print(f"{way:<6} {statistics.median(cpus):>12.1f} "
              f"{statistics.median(rate for _, rate in rows):>10,.0f}   "
              + " ".join(f"{cpu:.1f}" for cpu in cpus))
    ratio = statistics.median(c for c, _ in results["sync"]) / \
        statistics.median(c for c, _ in results["aio"])
    print(f"sync/aio CPU per call = {ratio:.2f} (below 1.0 the synchronous channel is cheaper)")


if __name__ == "__main__":
    main()
