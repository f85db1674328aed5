"""The docs' commands run as written. docs/tutorial.md: its shell blocks, in order, in one bash
shell, against the real gateway and the tutorial's own extension API server, each shown output
checked. docs/deploy.md: the backup script of the embedded store, run against a live gateway,
and its copy restored into a new one.

The tutorial's conventions (its HTML comment says the same): a ```sh block is run; a
```LANG file=NAME block is written to NAME where it appears; a ```text output block must match
the output of the ```sh block before it, line by line in order (other lines may come between,
whitespace is collapsed, and an age such as ``0s`` or ``3m2s`` matches any age). Ports 6443 and
8443 are replaced by free ones, so the run shares the machine with anything.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
DEPLOY = ROOT / "docs" / "deploy.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
AGE = re.compile(r"^(\d+[smhd])+$")
MARK = "@@tutorial-block-{}@@"


@dataclass
class Block:
    kind: str  # "sh", "file", "output"
    text: str
    line: int
    name: str = ""


def blocks(markdown: str) -> list[Block]:
    found = []
    for match in FENCE.finditer(markdown):
        info, text = match.group(1).split(), match.group(2)
        line = markdown.count("\n", 0, match.start()) + 1
        files = [word.split("=", 1)[1] for word in info if word.startswith("file=")]
        if files:
            found.append(Block("file", text, line, files[0]))
        elif info[:1] == ["sh"]:
            found.append(Block("sh", text, line))
        elif info == ["text", "output"]:
            found.append(Block("output", text, line))
    return found


def script(parts: list[Block]) -> str:
    """One bash script: files written and commands run where the tutorial has them, each shell
    block's output preceded by a marker."""
    lines = ["set -euo pipefail"]
    for number, block in enumerate(parts):
        if block.kind == "file":
            lines += [f"cat > {shlex.quote(block.name)} <<'@@TUTORIAL-FILE@@'", block.text,
                      "@@TUTORIAL-FILE@@"]
        elif block.kind == "sh":
            lines += [f"printf '\\n%s\\n' {MARK.format(number)}", block.text]
    return "\n".join(lines) + "\n"


def words(line: str) -> list[str]:
    return line.split()


def same_line(expected: str, actual: str) -> bool:
    want, got = words(expected), words(actual)
    return len(want) == len(got) and all(
        w == g or (AGE.match(w) and AGE.match(g)) for w, g in zip(want, got, strict=True))


def missing_lines(expected: str, output: str) -> list[str]:
    """Expected lines not found in ``output`` in order (empty: it matches)."""
    actual = [line for line in output.splitlines() if line.strip()]
    at, missing = 0, []
    for want in (line for line in expected.splitlines() if line.strip()):
        for index in range(at, len(actual)):
            if same_line(want, actual[index]):
                at = index + 1
                break
        else:
            missing.append(want)
    return missing


def test_parser_reads_the_tutorial() -> None:
    parts = blocks(TUTORIAL.read_text())
    kinds = [part.kind for part in parts]
    assert kinds.count("sh") >= 8 and kinds.count("output") >= 6, kinds
    assert {part.name for part in parts if part.kind == "file"} >= {
        "hello_apiserver.py", "hello-registration.yaml", "greeting.yaml"}
    # every output block follows a shell block
    for before, part in itertools.pairwise(parts):
        if part.kind == "output":
            assert before.kind == "sh", f"output block at line {part.line} follows no sh block"
    assert missing_lines("NAME  AGE\nworld 5m3s", "x\nNAME    AGE\nworld   0s\n") == []
    assert missing_lines("Hello, jane!", "Hello, admin!") == ["Hello, jane!"]


def test_tutorial_runs_as_written(tmp_path: Path) -> None:
    ports = {"6443": str(free_port()), "8443": str(free_port())}
    text = TUTORIAL.read_text()
    parts = blocks(re.sub(r"\b(6443|8443)\b", lambda m: ports[m.group(1)], text))
    env = {**os.environ, "HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "kubecache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    work = tmp_path / "tutorial"
    work.mkdir()
    proc = subprocess.Popen(["bash", "-c", script(parts)], cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    finally:
        # the gateway and the server run in the script's process group: none outlives it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    def logs() -> str:
        return "".join(f"\n--- {name}\n{(work / name).read_text(errors='replace')[-3000:]}"
                       for name in ("gateway.log", "hello.log") if (work / name).exists())

    assert proc.returncode == 0, f"the tutorial failed ({proc.returncode}):\n{output}{logs()}"
    # each shown output against what its block printed
    pieces = re.split(r"^@@tutorial-block-(\d+)@@$", output, flags=re.M)
    printed = {int(number): text for number, text in zip(pieces[1::2], pieces[2::2],
                                                         strict=True)}
    checked = 0
    for number, part in enumerate(parts):
        if part.kind != "output":
            continue
        missing = missing_lines(part.text, printed.get(number - 1, ""))
        assert not missing, (f"docs/tutorial.md line {part.line}: expected output not printed: "
                             f"{missing}\nthe block printed:\n{printed.get(number - 1)}")
        checked += 1
    assert checked >= 6


def test_backup_script_copies_a_live_store_that_restores(tmp_path: Path) -> None:
    """docs/deploy.md's backup, as `kubectl exec -i ... -- python - state.db < script` runs it:
    while the gateway runs, the script's copy holds what was written before it; a new gateway
    started on the copy alone (no WAL files) serves exactly that."""
    (script,) = [b.text for b in blocks(DEPLOY.read_text()) if b.name == "gateway-backup.py"]
    first = GatewayProcess(tmp_path / "first")
    copy = tmp_path / "gateway-state.db"
    with first:
        first.kubectl("create", "configmap", "before-backup", "--from-literal=k=v")
        with open(copy, "wb") as out:
            subprocess.run([sys.executable, "-", str(first.data_dir / "state.db")],
                           input=script.encode(), stdout=out, check=True, timeout=60)
        first.kubectl("create", "configmap", "after-backup", "--from-literal=k=v")
    assert not list(first.data_dir.glob("*.backup")), "the snapshot is removed after streaming"
    with sqlite3.connect(copy) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    second = GatewayProcess(tmp_path / "second")
    second.data_dir.mkdir(parents=True)
    shutil.copy(copy, second.data_dir / "state.db")
    with second:
        assert second.kubectl("get", "configmap", "before-backup", "-o",
                              "jsonpath={.data.k}").stdout == "v"
        missing = second.kubectl("get", "configmap", "after-backup", check=False)
        assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stderr
