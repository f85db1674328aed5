"""Every acknowledged write reached the disk before its response: the real gateway runs under
strace, and for each write the trace must show, in this order, on the client's own connection
and the SQLite WAL of the data directory:

    read(<client connection>) = n > 0       the request arrived
    pwrite64(<state.db-wal>) ...             the commit was written to the WAL
    fdatasync/fsync(<state.db-wal>) = 0      ... and synced (the syscall returned)
    write(<client connection>)               only then the response left

A SIGKILL test cannot see this (the page cache survives a killed process, not a power cut), so
``PRAGMA synchronous = OFF`` or ``NORMAL`` (with WAL, NORMAL syncs only at checkpoints) would
pass it; they fail this one.

Why the order in the trace file is the order of events: strace is one process that handles
each traced syscall stop in turn, writes its line (flushed at once) before letting the thread
go on, and, with ``-f``, cuts a line into ``<unfinished ...>`` / ``<... resumed>`` halves when
another thread's syscall comes in between. So a syscall's *entry* is where its line (or first
half) starts, and its *return* is where its line (or second half) ends: the response cannot be
written before the fdatasync line that precedes it was complete.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

STRACE = "/usr/bin/strace"
#: what a request and its response, a WAL write and its sync look like to the kernel (uvloop
#: reads and writes sockets with read/write/writev; plain asyncio would use recv*/send*)
TRACED = ("fsync", "fdatasync", "pwrite64", "pwritev", "pwritev2", "read", "readv",
          "recvfrom", "recvmsg", "write", "writev", "sendto", "sendmsg")
READS = {"read", "readv", "recvfrom", "recvmsg"}
WRITES = {"write", "writev", "sendto", "sendmsg"}
SYNCS = {"fsync", "fdatasync"}


class TracedGateway(GatewayProcess):
    """``gateway serve`` started by strace: every thread (-f), file descriptors decoded to
    paths and TCP endpoints (-yy), one line per syscall in one file (-o)."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.trace_path = self.workdir / "strace.out"

    @property
    def args(self) -> list[str]:
        return [STRACE, "-f", "-yy", "-ttt", "--seccomp-bpf", "-e", f"trace={','.join(TRACED)}",
                "-o", str(self.trace_path), *super().args]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Signal the gateway itself: strace started with ``-o FILE PROG`` blocks fatal
        signals, and exits with its tracee's status when the tracee is gone."""
        if self.proc is not None and self.proc.poll() is None:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
            for pid in children.read_text().split():
                os.kill(int(pid), sig)
        return super().stop(sig, timeout)

    def trace_size(self) -> int:
        try:
            return self.trace_path.stat().st_size
        except FileNotFoundError:
            return 0


@dataclass
class Call:
    """One traced syscall: where its line starts (entry) and ends (return) in the file."""

    pid: str
    name: str
    fd: str  # the decoded descriptor: a path, or TCP:[local->peer]
    entry: int  # byte offset of the line that starts it
    exit: int  # byte offset just past the line that ends it
    result: int | None  # None: no return value (the process ended inside it)


LINE = re.compile(r"^(\d+) +[\d.]+ (.*)$")
START = re.compile(r"^(\w+)\(\d+<(TCP:\[[^\]]*\]|[^>]*)>")
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>")


def parse(text: str) -> list[Call]:
    """The complete syscalls of a strace -f -yy -ttt file, joining unfinished/resumed halves."""
    calls: list[Call] = []
    pending: dict[str, Call] = {}
    offset = 0
    for raw in text.splitlines(keepends=True):
        start, offset = offset, offset + len(raw.encode())
        if not raw.endswith("\n"):
            break  # strace is still writing this one
        match = LINE.match(raw.rstrip("\n"))
        if not match:
            continue
        pid, rest = match.groups()
        resumed = RESUMED.match(rest)
        if resumed:
            call = pending.pop(pid, None)
            if call is None or call.name != resumed.group(1):
                continue
        else:
            head = START.match(rest)
            if not head:
                continue  # signals, exits
            call = Call(pid, head.group(1), head.group(2), start, 0, None)
            if rest.endswith("<unfinished ...>"):
                pending[pid] = call
                continue
        call.exit = offset
        ret = rest.rsplit(") = ", 1)
        if len(ret) == 2 and re.match(r"-?\d+", ret[1]):
            call.result = int(ret[1].split()[0])
        calls.append(call)
    return calls


@dataclass
class Ack:
    """One acknowledged write: what it was, the trace size before it was sent, the client's
    connection it went over."""

    what: str
    since: int
    port: int


def check(calls: list[Call], ack: Ack, wal: str, gateway_port: int) -> str | None:
    """None when the trace shows request, WAL write, WAL sync, response, in this order, for
    ``ack``; else what is missing."""
    conn = f"TCP:[127.0.0.1:{gateway_port}->127.0.0.1:{ack.port}]"
    mine = [c for c in calls if c.fd == conn and c.entry >= ack.since]
    request = next((c for c in mine if c.name in READS and (c.result or 0) > 0), None)
    if request is None:
        return f"{ack.what}: no read of its request on {conn} in the trace"
    response = next((c for c in mine if c.name in WRITES and c.entry > request.exit), None)
    if response is None:
        return f"{ack.what}: no write of its response on {conn} in the trace"
    # the whole request was read before the sync (a body may take several reads)
    received = max(c.exit for c in mine
                   if c.name in READS and (c.result or 0) > 0 and c.entry < response.entry)
    on_wal = [c for c in calls if c.fd == wal and received <= c.entry and c.exit <= response.entry]
    written = next((c for c in on_wal if c.name.startswith("pwrite")), None)
    if written is None or not any(c.name in SYNCS and c.result == 0 and c.entry >= written.exit
                                  for c in on_wal):
        return (f"{ack.what}: between reading its request (trace byte {received}) and writing "
                f"its response (byte {response.entry}), {wal} was not written and then synced "
                f"by an fsync/fdatasync that returned; its syscalls in between: "
                f"{[c.name for c in on_wal]}")
    return None


def connection_ports(api: client.ApiClient) -> set[int]:
    """The local ports of the open connections in this client's urllib3 pools."""
    manager = api.rest_client.pool_manager
    ports = set()
    for key in manager.pools.keys():  # noqa: SIM118 - iterating the container itself raises
        pool = manager.pools.get(key)
        for conn in list(pool.pool.queue) if pool is not None else ():
            if conn is not None and conn.sock is not None:
                ports.add(conn.sock.getsockname()[1])
    return ports


def one_port(api: client.ApiClient) -> int:
    ports = connection_ports(api)
    assert len(ports) == 1, f"one keep-alive connection per client expected, got {ports}"
    return ports.pop()


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TracedGateway]:
    if not os.access(STRACE, os.X_OK):
        pytest.fail(f"{STRACE} is needed to prove that writes are synced before they are "
                    f"acknowledged (apt-get install strace); it is not there (on PATH: "
                    f"{shutil.which('strace')})")
    proc = TracedGateway(tmp_path_factory.mktemp("fsync"))
    try:
        proc.start()
    except (RuntimeError, TimeoutError) as err:
        lines = [line for line in proc.log().splitlines() if line.startswith("strace:")]
        pytest.fail(f"the gateway did not start under strace (can it ptrace here?): "
                    f"{lines or err}")
    try:
        yield proc
    finally:
        proc.stop()


def wal_of(proc: TracedGateway) -> str:
    return os.path.realpath(proc.data_dir / "state.db-wal")


def assert_synced(proc: TracedGateway, acks: list[Ack]) -> list[Call]:
    """Wait until the trace holds every response, then check each write; returns the calls."""
    wal = wal_of(proc)

    def responses_in() -> list[Call] | None:
        # a response's line may still be on its way to the file; a missing sync never comes
        calls = parse(proc.trace_path.read_text(errors="replace"))
        problems = [check(calls, ack, wal, proc.port) or "" for ack in acks]
        return None if any("no write of its response" in p for p in problems) else calls

    calls = eventually(responses_in, what="every response in the trace")
    problems = [problem for ack in acks if (problem := check(calls, ack, wal, proc.port))]
    assert not problems, "acknowledged before synced:\n" + "\n".join(problems)
    return calls


def core_client(proc: GatewayProcess) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(proc.kubeconfig))


def test_each_sequential_write_is_synced_before_it_is_acknowledged(traced):
    api = core_client(traced)
    core = client.CoreV1Api(api)
    leases = client.CoordinationV1Api(api)
    ns = "default"
    core.list_namespaced_config_map(ns)  # the connection is open: no handshake in the way

    def cm(name: str, **data: str) -> client.V1ConfigMap:
        return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)

    writes: list[tuple[str, Callable[[], object]]] = [
        ("create configmap a", lambda: core.create_namespaced_config_map(ns, cm("a", k="1"))),
        ("create configmap b", lambda: core.create_namespaced_config_map(ns, cm("b", k="1"))),
        ("create namespace", lambda: core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="synced")))),
        ("create lease", lambda: leases.create_namespaced_lease(ns, client.V1Lease(
            metadata=client.V1ObjectMeta(name="l"),
            spec=client.V1LeaseSpec(holder_identity="me")))),
        ("replace configmap a", lambda: core.replace_namespaced_config_map(
            "a", ns, cm("a", k="2"))),
        ("merge-patch configmap b", lambda: core.patch_namespaced_config_map(
            "b", ns, {"data": {"k": "2"}})),
        ("patch lease", lambda: leases.patch_namespaced_lease(
            "l", ns, {"spec": {"holderIdentity": "you"}})),
        ("delete configmap a", lambda: core.delete_namespaced_config_map("a", ns)),
        ("delete lease", lambda: leases.delete_namespaced_lease("l", ns)),
        ("delete configmap b", lambda: core.delete_namespaced_config_map("b", ns)),
    ]
    acks = []
    for what, write in writes:
        since = traced.trace_size()
        write()  # acknowledged: 2xx, or the client would have raised
        acks.append(Ack(what, since, one_port(api)))
    api.close()

    calls = assert_synced(traced, acks)
    wal = wal_of(traced)
    syncs = {(c.entry, c.exit) for c in calls if c.fd == wal and c.name in SYNCS}
    assert len(syncs) >= len(acks), "sequential writes cannot share a sync"


def test_concurrent_writes_may_share_a_sync_but_none_is_acknowledged_before_it(traced):
    """Group commit: writes that arrive while a commit is in flight go into the next one."""
    clients = [core_client(traced) for _ in range(8)]
    for api in clients:  # each client's connection is open before the writes start
        client.CoreV1Api(api).list_namespaced_config_map("default")
    ports = [one_port(api) for api in clients]
    assert len(set(ports)) == len(clients)
    start = threading.Barrier(len(clients) + 1)
    errors: list[BaseException] = []
    done: list[int] = []

    def writer(i: int) -> None:
        core = client.CoreV1Api(clients[i])
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"group-{i}"),
                                  data={"v": str(i)})
        start.wait()
        try:
            core.create_namespaced_config_map("default", body)
        except BaseException as err:  # surfaced below
            errors.append(err)
        else:
            done.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    since = traced.trace_size()
    start.wait()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sorted(done) == list(range(len(clients)))
    for i in done:
        assert one_port(clients[i]) == ports[i], "the write went over the warmed connection"
        clients[i].close()

    assert_synced(traced, [Ack(f"create group-{i}", since, ports[i]) for i in done])
