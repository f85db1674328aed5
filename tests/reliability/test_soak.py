"""Hours of load (issue 19, item 5): one gateway on etcd, as deployed (a real etcd over TLS
with client certificates, a backend registered by an APIService and reached over mTLS), under
a mixed load at 80 % of its measured capacity (tests/support/soak.py).

The load runs for GATEWAY_SOAK_SECONDS: 100 s in CI (where the module takes about 2.5
minutes with its set-up), an hour in the long form. The long form is the same test, run by
tools/reliability.py --long, or alone (a shared machine says so in GATEWAY_SOAK_SHARED, which
the record keeps):

    GATEWAY_SOAK_SECONDS=3600 GATEWAY_RELIABILITY_RESULTS=docs/reliability-long.jsonl \\
        .venv/bin/pytest tests/reliability/test_soak.py -k mixed_load -p no:randomly

Before the load, the watch cache's window (its latest 10,000 events) is filled, so that its
memory is at its steady size; the capacity is measured closed-loop for 6 s (30 s in the long
form). Checks, after a warm-up (5 minutes in a run of 20 minutes or more; a third of the run,
at least 40 s, in a shorter one: 40 s of the CI's 100):

- no request failed, no watch broke or got an ERROR, every watch saw the last acknowledged
  write, and the watch cache cut off none of the 200 (they all read);
- (not a check: operations the open-loop schedule could not start on time, 64 being still in
  flight, are recorded; a shared machine does not keep the capacity measured at the start);
- the gateway's resident memory grew by less than 10 % from the end of the warm-up to the end
  (medians of the samples over 15 s at each end). In CI, by less than 25 % from 40 s: under
  this load the gateway's memory rises for its first minutes (its buffers for 200 watches,
  and the allocator's pools around them, reach their high-water mark: the busier the machine,
  the later) and then stays flat, which only the long form sees; the short form guards
  against a gross leak. Measured here: +0 to +14 % in 100-120 s runs, +26 % over 200 s at
  a load average of 14 (the gc-tracked objects grew by 10 % meanwhile: the growth is buffers,
  not objects), and flat after its first minutes in the long run (docs/reliability.md);
- p99 latency is flat: the last window's p99 is at most three times the first window's plus
  1 s (windows of 10 minutes in the long form, 25 s in CI). The margin is for a shared
  machine: on the 2 cores where this was written, other processes' load moved the p99 of a
  100-s run by up to 5.4 times between its two windows (186 -> 1,000 ms) while the gateway's
  CPU time per operation stayed the same (1.87 -> 1.96 ms). That CPU time per operation in
  the same windows is recorded beside it: it moves with the gateway's own work, hardly with
  other processes'.

A watcher that never reads is another test: its socket is never read while writes go on, and
the gateway must end its watch (apiserver_terminated_watchers_total, as kube's cacher counts
it) without its memory growing with the writes.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support.backend import GV_PATH, BackendProcess
from tests.support.etcd import EtcdCluster
from tests.support.gateway import GatewayProcess
from tests.support.load import RawClient, Replica
from tests.support.reliability import long_form, record, soak_seconds
from tests.support.replicas import READY_TIMEOUT
from tests.support.soak import Soak, rss_bytes
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

#: The load's length in CI: with the set-up, the capacity measure and the other test, the
#: module takes about 2.5 minutes there.
CI_SECONDS = 100.0
#: And in the long form (GATEWAY_RELIABILITY_LONG=1, tools/reliability.py --long) unless
#: GATEWAY_SOAK_SECONDS says otherwise.
LONG_SECONDS = 3600.0
#: The share of measured capacity the soak runs at.
SHARE = 0.8
WATCHES = 200


@dataclass
class Deployed:
    """One gateway on etcd with a registered backend."""

    gateway: GatewayProcess
    backend: BackendProcess


def start_gateway(workdir: Path, cluster: EtcdCluster) -> GatewayProcess:
    """A gateway on ``cluster``, on a free port: picked again when another process took it
    between the pick and the bind (the machine runs other suites' servers too)."""
    for attempt in range(3):
        gateway = GatewayProcess(workdir / f"gateway-{attempt}", *cluster.gateway_flags(),
                                 "--enable-aggregator-routing")
        try:
            return gateway.start(timeout=READY_TIMEOUT)
        except (RuntimeError, TimeoutError) as err:
            gateway.stop()
            if "address already in use" not in str(err):
                raise
    raise RuntimeError("no free port for the gateway in three tries")


@pytest.fixture(scope="module")
def cluster() -> Iterator[EtcdCluster]:
    """A one-member etcd, TLS with client certificates, as the chart's etcd mode uses it."""
    with EtcdCluster(1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def deployed(cluster: EtcdCluster, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Deployed]:
    """One gateway on etcd with a backend registered by an APIService (mTLS both ways)."""
    workdir = tmp_path_factory.mktemp("soak")
    gateway = start_gateway(workdir, cluster)
    backend = BackendProcess.for_gateway(workdir / "backend", gateway)
    try:
        backend.start()
        gateway.kubectl("apply", "-f", "-",
                        input=yaml.safe_dump_all(backend.manifests("127.0.0.1")))
        eventually(lambda: gateway.request("GET", GV_PATH)[0] == 200, timeout=90,
                   interval=0.2, what=f"{GV_PATH} served through the gateway")
        yield Deployed(gateway, backend)
    finally:
        gateway.stop()
        backend.stop()


@pytest.fixture
def fresh(cluster: EtcdCluster, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of its own on the same etcd: a memory measure must not see another test's
    buffers being given back."""
    gateway = start_gateway(tmp_path, cluster)
    try:
        yield gateway
    finally:
        gateway.stop()


def make_namespace(gateway: GatewayProcess, name: str) -> str:
    code, body = gateway.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert code in (201, 409), body
    return name


def terminated_watchers(gateway: GatewayProcess, resource: str = "") -> float:
    """apiserver_terminated_watchers_total of ``resource`` (every one: ""), from /metrics."""
    code, body = gateway.request("GET", "/metrics")
    assert code == 200, body[:300]
    name = "apiserver_terminated_watchers_total"
    if resource:
        name += f'{{resource="{resource}"}}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
               if line.startswith(name))


def phases(seconds: float) -> tuple[float, float, float]:
    """(warm-up, p99 window, memory growth allowed in %) for a run of ``seconds``."""
    if seconds >= 1200:
        return 300.0, 600.0, 10.0
    return max(40.0, seconds / 3), min(30.0, seconds / 4), 25.0


def test_mixed_load_at_80_percent_of_capacity(deployed: Deployed) -> None:
    """The mix at 80 % of the capacity measured first, checked as the module says."""
    seconds = soak_seconds(LONG_SECONDS if long_form() else CI_SECONDS)
    warmup, window, growth = phases(seconds)
    gateway = deployed.gateway
    assert gateway.proc is not None
    soak = Soak(Replica.of(gateway), gateway.proc.pid, make_namespace(gateway, "soak"),
                watches=WATCHES)
    terminated_before = terminated_watchers(gateway)
    load_before = os.getloadavg()
    capacity = asyncio.run(soak.measure_capacity(30.0 if seconds >= 1200 else 6.0))
    rate = SHARE * capacity
    result = asyncio.run(soak.run(rate, seconds))
    load_after = os.getloadavg()
    terminated = terminated_watchers(gateway) - terminated_before
    summary = result.summary(warmup, window)
    p99_bound = 3 * summary["p99_first_ms"] + 1000
    ok = (not result.error_count and not result.watch_errors and not result.watch_behind
          and not result.watch_early_ends and not terminated
          and summary["rss_growth_pct"] < growth and summary["p99_last_ms"] <= p99_bound)
    record(item="5", fault="none",
           load=(f"{WATCHES} watches; creates (each deleting the oldest of 300), updates, "
                 f"lists, proxied GETs at 80 % of a measured {capacity:.0f} ops/s = "
                 f"{rate:.0f} ops/s for {seconds / 60:g} min; one gateway on a TLS etcd "
                 f"member, backend over mTLS"),
           outcome=(f"{'passed' if ok else 'FAILED'}: {summary['operations']} operations, "
                    f"{summary['errors']} errors; memory {summary['rss_warm_mib']} -> "
                    f"{summary['rss_end_mib']} MiB ({summary['rss_growth_pct']:+}%) after "
                    f"{warmup:g} s; p99 {summary['p99_first_ms']} -> "
                    f"{summary['p99_last_ms']} ms (first and last {window:g} s); "
                    f"{terminated:g} watchers cut off; {result.behind} operations not "
                    "started on time (64 in flight)"),
           capacity_ops_per_s=round(capacity, 1), terminated_watchers=terminated,
           prepare_s=round(soak.prepare_s, 1),
           cpus=os.cpu_count(), machine=platform.node(),
           load_average=[round(x, 2) for x in (*load_before, *load_after)],
           shared_machine=os.environ.get("GATEWAY_SOAK_SHARED", "unknown"),
           **summary)
    detail = f"{summary}\nfirst errors: {result.errors[:10]}"
    assert not result.error_count, detail
    assert not result.watch_errors and not result.watch_early_ends, detail
    assert not result.watch_behind, detail
    assert not terminated, f"{terminated} watchers cut off under a load they keep up with"
    assert summary["rss_growth_pct"] < growth, detail
    assert summary["p99_last_ms"] <= p99_bound, detail


#: The never-reading watcher's test: objects of this size, this many writes a phase (about
#: 19 MiB of events a phase: more than the socket buffers between the two ends can hold, 4 MiB
#: of send buffer at most here (tcp_wmem) and 8 KiB of receive buffer, so the gateway has to
#: hold or drop the rest).
OBJECT_BYTES = 16 * 1024
WRITES = 1200


def gateway_rss(gateway: GatewayProcess) -> int:
    """The gateway's resident size: the median of five samples over a second."""
    assert gateway.proc is not None
    samples = []
    for _ in range(5):
        samples.append(rss_bytes(gateway.proc.pid))
        time.sleep(0.2)
    return sorted(samples)[2]


def test_a_watcher_that_never_reads_is_cut_off(fresh: GatewayProcess) -> None:
    """A watch whose client never reads, with writes going on: the watch cache closes it
    (counted in apiserver_terminated_watchers_total, as kube's cacher counts it) instead of
    buffering every event for it. Its cost is measured against the same writes without it:
    the gateway's memory grows with the writes either way (the cache keeps a window of the
    latest 10,000 events), but must not grow by as much as was written on top of that (kept,
    the watcher costs about twice that; cut off, its bounded buffers, about 3 MiB). Once the
    client reads at last, the stream ends cleanly, short of the writes."""
    gateway = fresh
    namespace = make_namespace(gateway, "soak-never-reads")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    client = RawClient([Replica.of(gateway)], timeout=30, failover=False)
    payload = "x" * OBJECT_BYTES
    status, raw = client.request("POST", path, {"metadata": {"name": "big"}, "data": {}})
    assert status == 201, raw[:300]

    def write(count: int) -> None:
        for i in range(count):
            status, raw = client.request("PUT", f"{path}/big", {
                "metadata": {"name": "big"}, "data": {"i": str(i), "payload": payload}})
            assert status == 200, raw[:300]

    write(200)  # the allocator's pools and the window's first versions made
    before = gateway_rss(gateway)
    write(WRITES)
    without = gateway_rss(gateway) - before  # what the writes alone cost

    status, raw = client.request("GET", f"{path}?limit=1")
    rv = json.loads(raw)["metadata"]["resourceVersion"]
    terminated = terminated_watchers(gateway, "configmaps")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # no autotuning: 8 KiB
    sock.settimeout(30)
    sock.connect((gateway.host, gateway.port))
    tls = Replica.of(gateway).ssl_context().wrap_socket(sock, server_hostname=gateway.host)
    tls.sendall((f"GET {path}?watch=true&resourceVersion={rv}&timeoutSeconds=1800 HTTP/1.1"
                 f"\r\nHost: {gateway.host}\r\nAccept: application/json\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += tls.recv(1)  # the head only: the body is never read until the end
    assert head.startswith(b"HTTP/1.1 200"), head
    try:
        before = gateway_rss(gateway)
        write(WRITES)
        blocked = gateway_rss(gateway) - before
        deadline = time.monotonic() + 30
        while (cut := terminated_watchers(gateway, "configmaps") - terminated) < 1 and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        written = WRITES * OBJECT_BYTES
        record(item="5", fault="a watcher that never reads",
               load=f"{WRITES} updates of a {OBJECT_BYTES // 1024} KiB ConfigMap, "
                    "one watch of it whose socket is never read (8 KiB receive buffer)",
               outcome=(f"{'cut off' if cut else 'NOT cut off'} (apiserver_terminated_"
                        f"watchers_total +{cut:g}); gateway memory +{blocked / 2**20:.1f} MiB "
                        f"with it, +{without / 2**20:.1f} MiB for the same writes without "
                        f"it; {written / 2**20:.0f} MiB of events written"),
               rss_growth_with_mib=round(blocked / 2**20, 1),
               rss_growth_without_mib=round(without / 2**20, 1),
               events_written_mib=round(written / 2**20, 1), terminated_watchers=cut)
        # kept, it costs about twice what was written (each event's line and its chunk
        # buffered: +35 MiB over the baseline for these 19 MiB with the cut-off broken);
        # cut off, its bounded buffers (about 3 MiB). The two phases' growths differ by up
        # to 10 MiB on a busy machine with nothing else changed: the bound is what was
        # written, between the two
        assert blocked - without < written, (blocked, without, written)
        assert cut == 1, f"{cut} watchers cut off"
        # reading at last: what was buffered, then the end of the stream
        body = bytearray()
        while not body.endswith(b"\r\n0\r\n\r\n") and (data := tls.recv(65536)):
            body += data
        assert body.endswith(b"\r\n0\r\n\r\n"), \
            f"the stream did not end cleanly: {bytes(body[-100:])!r}"
        events = body.count(b'{"type":')
        assert events < WRITES, f"{events} events of {WRITES} delivered: it was not cut off"
    finally:
        tls.close()
        client.close()
