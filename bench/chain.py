"""The handler chain's own cost per request, in-process: the gateway's filters, as
``build_handler_chain`` composes them for a real ``Gateway`` (bearer-token authentication,
API Priority and Fairness, the in-flight tracking, metrics, the deadline...), around a handler
that answers at once after one suspension (as the proxy waits once for its backend).

Requests are the fast lane's own (``LaneRequest``): a GET for a remote APIService's resource
with a bearer token, as bench/proxy.py sends them. No socket, TLS or backend is involved, so
this measures what the filters cost and nothing else; a profile of bench/proxy.py tells what
share of a proxied request that is. The figure is CPU microseconds per request (the median of
the rounds), which another process on the machine moves less than a rate.

    python bench/chain.py [--requests 20000] [--rounds 5] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop
from aiohttp import web
from multidict import CIMultiDict

from gateway.aggregator.fastlane import LaneRequest
from gateway.app.gateway import Gateway
from gateway.app.run import complete_with_dev_pki
from gateway.cli import build_parser
from gateway.options import ServeOptions
from gateway.server.handler_chain import build_handler_chain

TOKEN = "bench-token"
PATH = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one"


class _NoTransport:
    """The lane request's transport, read for a client certificate only (there is none)."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def _answer(request: Any) -> web.Response:
    await asyncio.sleep(0)  # one suspension through the chain, as a proxied request has
    return web.Response(status=200, body=b"{}")


def _request() -> LaneRequest:
    headers = CIMultiDict({"Host": "127.0.0.1", "Authorization": f"Bearer {TOKEN}",
                           "Accept": "application/json", "User-Agent": "bench"})
    return LaneRequest("GET", PATH, PATH, "", headers, _NoTransport(),  # type: ignore[arg-type]
                       "127.0.0.1")


async def measure(gateway: Gateway, requests: int, concurrency: int) -> float:
    """CPU microseconds per request through the chain."""
    options = gateway.options
    chain = build_handler_chain(_answer, options, gateway.in_flight, gateway.limits,
                                gateway.metrics, gateway.security, gateway.audit,
                                gateway.flow_control)

    async def worker(count: int) -> None:
        for _ in range(count):
            response = await chain(_request())
            assert response.status == 200, response.status

    await worker(50)  # warm: first-use caches (authorization, APF's flows)
    each = requests // concurrency
    started = time.process_time()
    await asyncio.gather(*(worker(each) for _ in range(concurrency)))
    return (time.process_time() - started) / (each * concurrency) * 1e6


async def run(args: argparse.Namespace, workdir: Path) -> list[float]:
    (workdir / "tokens.csv").write_text(f'{TOKEN},bench,uid-bench,"bench-users"\n')
    parsed = build_parser().parse_args([
        "serve", "--bind-address", "127.0.0.1", "--cert-dir", str(workdir / "certs"),
        "--data-dir", str(workdir / "data"), "--token-auth-file", str(workdir / "tokens.csv"),
        "--authorization-mode", "AlwaysAllow"])
    gateway = Gateway(complete_with_dev_pki(ServeOptions.from_args(parsed)))
    try:
        return [await measure(gateway, args.requests, args.concurrency)
                for _ in range(args.rounds)]
    finally:
        await gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-chain-") as tmp:
        rounds = uvloop.run(run(args, Path(tmp)))
    print(f"handler chain, {args.requests:,} lane GETs from {args.concurrency} tasks, "
          f"{args.rounds} rounds: CPU per request through the filters")
    print(f"median {statistics.median(rounds):.1f} us   min {min(rounds):.1f}   rounds "
          + " ".join(f"{r:.1f}" for r in rounds))


if __name__ == "__main__":
    main()
