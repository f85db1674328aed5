"""Short runs of every benchmark, so that none of them rots between the long runs.

The benchmarks are not timed here (timing goals live in their own output, on a quiet machine);
each is run as a user runs it, with the smallest sizes, and must finish and print its table.
bench/proxy.py needs nginx and wrk, which CI machines do not have: where they are missing, its
pieces run instead (PKI, nginx configuration, wrk's output parsed, the gateway registered with
an APIService, the calibration proxies of bench/reference_proxies.py, the open-loop generator),
with bench/gobench's stand-in backend in place of nginx.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import proxy
from bench.gotools import GoBench, build_gobench
from tests.support.gateway import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, *args: str, timeout: float = 300) -> str:
    """``python bench/<script> args`` from the project root; its output, or a failure with it."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def test_storage_bench() -> None:
    out = run_bench("storage.py", "--objects", "40", "--rounds", "2", "--watch-samples", "5")
    for backend in ("sqlite", "etcd"):
        assert any(line.startswith(backend) and "create" in line for line in out.splitlines())


def test_api_bench() -> None:
    """The list counts are the bench's own objects (kube-root-ca.crt is in every namespace),
    and the fan-out is measured by the Go watch client."""
    out = run_bench("api.py", "--objects", "120", "--sequential", "30", "--rounds", "2",
                    "--watchers", "6", "--rate", "10", "--seconds", "1")
    assert "create one at a time" in out and "list of 120" in out
    assert "watch fan-out via HTTP (Go client): 6/6 watchers got all 10 events" in out, out
    assert "via storage layer" in out


def test_crd_bench() -> None:
    out = run_bench("crd.py", "--objects", "20", "--rounds", "2", "--concurrency", "4",
                    "--lists", "2")
    assert "custom resource/ConfigMap" in out


def test_memory_bench(tmp_path: Path) -> None:
    docs = tmp_path / "performance.md"
    out = run_bench("memory.py", "--objects", "200", "--docs", str(docs))
    assert "KiB per object (target <= 3)" in out and "| sqlite | 200 |" in out
    assert "| etcd | 200 |" in out
    assert "<!-- memory latest begin -->" in docs.read_text()


def test_ab_bench() -> None:
    """Two versions (here the same working tree twice) through every operation."""
    out = run_bench("ab.py", "--before", str(ROOT), "--objects", "30", "--rounds", "1",
                    "--seconds", "0.5", "--watchers", "3", "--rate", "10",
                    "--watch-seconds", "0.5", timeout=400)
    for store in ("sqlite", "etcd"):
        for op in ("get", "list500", "list10k", "cached10k", "cached500", "pbcached10k",
                   "pbcached500", "watch"):
            assert re.search(rf"^{store} +{op} +before .* after/before +[0-9.]+$", out,
                             re.MULTILINE), (store, op, out)
    assert "errors" not in out and "3/3 complete" in out


def test_vs_go_bench_without_the_go_reference(tmp_path: Path) -> None:
    """Every part at the smallest sizes, gateway only (no pizza-apiserver in CI); the docs
    block and the plots go to a temporary file."""
    docs = tmp_path / "performance.md"
    docs.write_text("# Performance\n\nA reading people wrote.\n")
    out = run_bench("vs_go.py", "--reference", "none", "--rounds", "1", "--seconds", "0.5",
                    "--list-objects", "40", "--watchers", "4", "--watch-rate", "10",
                    "--watch-seconds", "0.5", "--list-sizes", "10,40",
                    "--watcher-counts", "3", "--apiservice-counts", "1,2",
                    "--object-sizes", "1,300", "--docs", str(docs), timeout=400)
    for row in ("| get |", "| create |", "| update |", "| delete |", "page of 500",
                "list 40 whole", "watch fan-out"):
        assert row in out, row
    # 40 of the bench's and the namespace's kube-root-ca.crt, once its controller has made it
    assert re.search(r"with limit=500: gateway on etcd 4[01], gateway on SQLite 4[01]\.", out)
    assert "4/4 complete" in out
    assert "| 2 | gateway on SQLite |" in out  # two APIServices behind the proxy
    assert "| 300 | gateway on SQLite |" in out  # past the annotations' limit: data
    text = docs.read_text()
    assert text.startswith("# Performance\n\nA reading people wrote.")
    assert "<!-- vs_go latest begin -->" in text
    for part in ("lists", "watchers", "apiservices", "sizes"):
        assert (tmp_path / "performance" / f"{part}.png").stat().st_size > 1000


@pytest.mark.skipif(not (shutil.which("nginx") and shutil.which("wrk")),
                    reason="nginx and wrk are not installed (apt-get install -y nginx wrk): "
                           "test_proxy_bench_pieces runs what it can without them")
def test_proxy_bench() -> None:
    out = run_bench("proxy.py", "--seconds", "1", "--rounds", "1", "--warmup", "0.5")
    assert "c/b = " in out and "added p99" in out


def test_proxy_bench_pieces(tmp_path: Path) -> None:
    pki = proxy.PKI.make(tmp_path / "pki")
    http = proxy.backend_http(pki, 1001, 1002) + proxy.proxy_http(pki, 1003, 1001)
    conf = proxy.nginx_main(tmp_path, http)
    assert "proxy_ssl_verify on;" in conf and f"proxy_ssl_name {proxy.SERVER_NAME};" in conf
    parsed = proxy.parse_wrk(WRK_OUTPUT)
    assert parsed.rps == 3252.5 and parsed.p99 == pytest.approx(0.01204) and parsed.errors == 3

    gobench = GoBench(build_gobench(tmp_path))
    backend_port = free_port()
    backend = gobench.serve(backend_port, pki.backend_serving.cert, pki.backend_serving.key,
                            pki.front_proxy_ca, tmp_path / "backend.log")
    gateway = None
    references = []
    try:
        proxy.wait_listening(backend_port, backend, tmp_path / "backend.log")
        gateway = proxy.start_gateway(tmp_path / "gateway", pki, backend_port)
        assert gateway.proc is not None
        targets = {"gateway": (gateway.port, gateway.proc.pid)}
        for mode in ("naive", "bare"):
            port = free_port()
            ref = proxy.start_reference(mode, tmp_path / mode, pki, port, backend_port)
            references.append(ref)
            proxy.wait_listening(port, ref, tmp_path / mode / f"{mode}.log")
            targets[mode] = (port, ref.pid)
        for name, (port, pid) in targets.items():
            result = asyncio.run(proxy.paced(port, 40, 0.5, 2, True, pid))
            assert result.errors == 0 and result.rps > 0, name
            assert result.cpu is not None and os.path.exists(f"/proc/{pid}")
    finally:
        for ref in references:
            proxy.stop_process(ref)
        if gateway is not None:
            gateway.stop()
        proxy.stop_process(backend)


WRK_OUTPUT = """Running 10s test @ https://127.0.0.1:8443/x
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.91ms    1.20ms  30.00ms   90.00%
  Latency Distribution
     50%    4.80ms
     75%    5.30ms
     90%    6.10ms
     99%   12.04ms
  32525 requests in 10.00s, 20.00MB read
  Non-2xx or 3xx responses: 3
Requests/sec:   3252.50
Transfer/sec:      2.00MB
"""


def test_etcd_calls_bench() -> None:
    out = run_bench("etcd_calls.py", "--calls", "64", "--concurrency", "4", "--rounds", "1")
    assert re.search(r"^aio\s+\d", out, re.MULTILINE) and re.search(r"^sync\s+\d", out,
                                                                   re.MULTILINE), out
    assert "sync/aio CPU per call" in out


def test_chain_bench() -> None:
    out = run_bench("chain.py", "--requests", "200", "--rounds", "2", "--concurrency", "4")
    assert re.search(r"^median \d+\.\d us", out, re.MULTILINE), out
