"""Run the real ``gateway serve`` as a subprocess on a free port, as a user would.

Tests talk to it with kubectl, the kubernetes Python client, or plain HTTPS with the admin
certificate the gateway's development PKI wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gateway.storage.watchcache import CHANGED_SHARED_OBJECT, VERIFY_SHARED_ENV
from tests.support.wait import eventually


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: ``GatewayProcess.ssl_context``'s default: present the admin certificate.
ADMIN: Any = object()


def _request(url: str, method: str, body: Any, headers: dict[str, str] | None
             ) -> urllib.request.Request:
    data = None if body is None else (
        body if isinstance(body, bytes) else json.dumps(body).encode())
    return urllib.request.Request(url, data=data, method=method,
                                  headers={"Content-Type": "application/json",
                                           **(headers or {})})


def send(url: str, method: str, context: ssl.SSLContext, body: Any = None,
         headers: dict[str, str] | None = None,
         timeout: float = 30) -> tuple[int, bytes, dict[str, str]]:
    """One HTTPS request (a dict body is sent as JSON): (status, raw body, response headers),
    error statuses included."""
    try:
        with urllib.request.urlopen(_request(url, method, body, headers), context=context,
                                    timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def gateway_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m gateway``."""
    script = shutil.which("gateway", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "gateway"]


class GatewayProcess:
    """One ``gateway serve`` with its own port, certificate and data directories, listening
    on ``host`` (another loopback address, 127.0.0.2, lets replicas share one port as pods
    do; its serving certificate must name it)."""

    def __init__(self, workdir: Path, *extra: str, port: int | None = None,
                 host: str = "127.0.0.1") -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = port or free_port()
        self.cert_dir = self.workdir / "certs"
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / f"gateway-{self.port}.log"
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def args(self) -> list[str]:
        return [
            *gateway_command(), "serve",
            "--secure-port", str(self.port),
            "--bind-address", self.host,
            "--cert-dir", str(self.cert_dir),
            "--data-dir", str(self.data_dir),
            *self.extra,
        ]

    @property
    def kubeconfig(self) -> Path:
        return self.cert_dir / "admin.kubeconfig"

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def start(self, *, wait: str | None = "/readyz", timeout: float = 60) -> GatewayProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        # every watch cache checks that no reader changed an object it shares (see stop())
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.workdir, env={**os.environ, VERIFY_SHARED_ENV: "1"})
        log.close()
        if wait:
            self.wait_for(wait, timeout)
        return self

    def wait_for(self, path: str, timeout: float = 60) -> None:
        """Poll ``path`` until it answers 200; fail with the log if the process dies."""

        def answers() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.log()}")
            try:
                code, body = self.request("GET", path)
            except (OSError, ssl.SSLError) as err:
                raise AssertionError(str(err)) from None  # not listening yet
            assert code == 200, f"{code} {body[:500]!r}"
            return True

        try:
            eventually(answers, timeout=timeout, interval=0.1, what=f"{path} answering 200")
        except AssertionError as err:
            raise TimeoutError(f"{err}\n{self.log()}") from None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def ssl_context(self, cert: Any = ADMIN) -> ssl.SSLContext:
        """Trusting the gateway's CA, presenting ``cert`` (a pair with ``cert`` and ``key``
        paths; the admin certificate by default; none when None)."""
        ctx = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
        if cert is ADMIN:
            ctx.load_cert_chain(str(self.cert_dir / "admin.crt"), str(self.cert_dir / "admin.key"))
        elif cert is not None:
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
        return ctx

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """One HTTPS request as the admin user; returns (status, body)."""
        code, raw, _ = send(self.url + path, method, self.ssl_context(), body, headers)
        return code, raw

    def open(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None, timeout: float = 30) -> Any:
        """A raw response to read from as it streams (watches); close it when done."""
        return urllib.request.urlopen(_request(self.url + path, method, body, headers),
                                      context=self.ssl_context(), timeout=timeout)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True, text=True, input=input, timeout=timeout,
            env={**os.environ, "KUBECACHEDIR": str(self.workdir / "kubecache")},
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Signal the gateway and wait for it; returns its exit status. Fails when the
        gateway found a shared object of its watch caches changed by a reader."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.check_shared_objects()
        return self.proc.returncode

    def check_shared_objects(self) -> None:
        """The watch caches share their objects with every in-process reader, who must never
        change them; the gateway checks that as it lets go of each (its log says otherwise)."""
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            return
        if CHANGED_SHARED_OBJECT in log:
            lines = [line for line in log.splitlines() if CHANGED_SHARED_OBJECT in line]
            raise AssertionError("the gateway changed a shared object of its watch cache:\n"
                                 + "\n".join(lines[:10]))

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def token_gateway(workdir: Path, tokens: str, *extra: str) -> GatewayProcess:
    """A gateway (not yet started) that also accepts the static bearer tokens in ``tokens``
    (kube's token CSV: ``token,user,uid[,"group1,group2"]`` a line)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tokens.csv").write_text(tokens)
    return GatewayProcess(workdir, "--token-auth-file", str(workdir / "tokens.csv"), *extra)
