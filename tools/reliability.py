"""Run the reliability tests of issue 19 and write docs/reliability.md from what they record.

    .venv/bin/python -m tools.reliability                    # every item 2-6, short forms
    .venv/bin/python -m tools.reliability --long             # the long forms (hours: see the doc)
    .venv/bin/python -m tools.reliability tests/reliability/test_faults_etcd.py -k leader
    .venv/bin/python -m tools.reliability --items 1-6        # the image's tests too (podman)
    .venv/bin/python -m tools.reliability --render           # rewrite the doc, run nothing
    .venv/bin/python -m tools.reliability --merge OTHER.json # take in another checkout's results

The tests are the files under tests/ that record results (``tests.support.reliability.
record``), selected by the issue's items they record (``item="3"``): found, not listed, so a
new one is run as soon as it records. They run in this process, one at a time (``pytest -p
no:xdist``: a measurement should not share the machine with the suite's other workers), with
GATEWAY_RELIABILITY_RESULTS naming a file each test appends its results to, and
GATEWAY_RELIABILITY_LONG=1 for ``--long``.

The doc is rendered from docs/reliability.json, which keeps each test's latest result per form
(short, long) with the run it came from (date, machine, command). A run replaces the entries of
the tests it ran and keeps the others, so subsets can be run one after another (each engineer
their own item, the long forms on a big machine, the short ones here) and the doc still holds
every test's latest result; the entry of a test that no longer exists is dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = Path("docs/reliability.md")
DATA = Path("docs/reliability.json")
COMMAND = ".venv/bin/python -m tools.reliability"
ITEMS = {
    "1": "The image, built and run",
    "2": "Replicas on an etcd cluster",
    "3": "Faults under load",
    "4": "Hostile input",
    "5": "Hours of load",
    "6": "Certificate rotation without restart",
}
_RECORDS = re.compile(r"\brecord\(")
_ITEM = re.compile(r"""\bitem\s*=\s*["'](\d+)["']""")
_USES_RECORD = re.compile(r"from tests\.support(\.reliability import [^\n]*\brecord\b| import "
                          r"[^\n]*\breliability\b)")


# ---------------------------------------------------------------------------------------------
# which tests
# ---------------------------------------------------------------------------------------------

def reliability_files(root: Path = ROOT) -> dict[Path, set[str]]:
    """Every test file that records results, with the items it records (relative paths)."""
    found: dict[Path, set[str]] = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        text = path.read_text(errors="replace")
        if _USES_RECORD.search(text) and _RECORDS.search(text):
            found[path.relative_to(root)] = set(_ITEM.findall(text))
    return found


def item_range(text: str) -> set[str]:
    """``2-6`` or ``3`` or ``1,3-4`` as a set of item numbers."""
    out: set[str] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        out |= {str(n) for n in range(int(low), int(high or low) + 1)}
    return out


# ---------------------------------------------------------------------------------------------
# the machine
# ---------------------------------------------------------------------------------------------

def _first_line(args: list[str]) -> str:
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = 0
    try:
        meminfo = Path("/proc/meminfo").read_text()
        memory = int(re.search(r"MemTotal:\s+(\d+) kB", meminfo).group(1)) * 1024  # type: ignore[union-attr]
    except (OSError, AttributeError):
        pass
    sys.path.insert(0, str(ROOT))
    try:
        from tests.support.etcd import etcd_binary
        etcd = _first_line([etcd_binary(), "--version"]).replace("etcd Version: ", "")
    except (ImportError, RuntimeError):
        etcd = "none"
    kubectl = _first_line(["kubectl", "version", "--client"]).replace("Client Version: ", "")
    return {"cores": os.cpu_count(), "memory_gib": round(memory / 2**30, 1), "cpu": cpu,
            "python": platform.python_version(), "etcd": etcd, "kubectl": kubectl,
            "kernel": f"{platform.system()} {platform.release()}"}


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------

class Outcomes:
    """A pytest plugin: each test's outcome, duration and first failure line, and every test
    the run collected (deselected ones too: they still exist)."""

    def __init__(self) -> None:
        self.tests: dict[str, dict[str, Any]] = {}
        self.collected: set[str] = set()

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        self.collected |= {item.nodeid for item in items}

    def pytest_deselected(self, items: list[Any]) -> None:
        self.collected |= {item.nodeid for item in items}

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.tests.setdefault(report.nodeid, {"result": "passed", "duration_s": 0.0,
                                                      "message": ""})
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 1)
        if report.failed:
            entry["result"] = "failed" if report.when == "call" else f"error in {report.when}"
            entry["message"] = _failure_line(report.longreprtext)
        elif report.skipped and entry["result"] == "passed":
            entry["result"] = "skipped"
            longrepr = report.longrepr
            entry["message"] = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


def _failure_line(text: str) -> str:
    """The first ``E`` line of a failure (pytest's summary of it), shortened."""
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()[:300]
    return text.strip().splitlines()[-1][:300] if text.strip() else ""


def run(targets: list[str], pytest_args: list[str], long: bool) -> tuple[int, Outcomes,
                                                                          list[dict[str, Any]]]:
    """Run the tests in this process; (pytest's exit code, outcomes, recorded results)."""
    import pytest

    from tests.support.reliability import LONG_ENV, RESULTS_ENV

    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        results = Path(tmp) / "results.jsonl"
        os.environ[RESULTS_ENV] = str(results)
        if long:
            os.environ[LONG_ENV] = "1"
        else:
            os.environ.pop(LONG_ENV, None)
        outcomes = Outcomes()
        code = pytest.main(["-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                            "--durations=0", *targets, *pytest_args], plugins=[outcomes])
        recorded = []
        if results.exists():
            for line in results.read_text().splitlines():
                try:
                    recorded.append(json.loads(line))
                except ValueError:
                    continue  # a test killed while writing its line
    return int(code), outcomes, recorded


# ---------------------------------------------------------------------------------------------
# the data: every test's latest result per form
# ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """The data file's read-merge-write, one run at a time (runs of subsets may end together:
    each must add its rows to what the other wrote)."""
    name = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"reliability-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def merge_data(data: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``other``'s entries taken where ``data`` has none for the test and form, or an older
    one (by its run's date)."""
    def when(source: dict[str, Any], entry: dict[str, Any]) -> str:
        return str(source["runs"].get(entry["run"], {}).get("id", ""))

    for key, entry in other["tests"].items():
        mine = data["tests"].get(key)
        if mine is None or when(other, entry) > when(data, mine):
            data["tests"][key] = entry
            data["runs"][entry["run"]] = other["runs"][entry["run"]]
    used = {entry["run"] for entry in data["tests"].values()}
    data["runs"] = {k: v for k, v in data["runs"].items() if k in used}
    return data


def load_data(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text())
    return {"runs": {}, "tests": {}}


def merge(data: dict[str, Any], run_info: dict[str, Any], outcomes: Outcomes,
          recorded: list[dict[str, Any]], files: dict[Path, set[str]],
          ran_files: set[str], root: Path = ROOT) -> dict[str, Any]:
    """The entries of the tests that ran replaced, the others kept; an entry dropped when its
    file is gone, or when its file ran and the test was not collected."""
    run_id = run_info["id"]
    form = run_info["form"]
    by_test: dict[str, list[dict[str, Any]]] = {}
    for rec in recorded:
        by_test.setdefault(rec["test"], []).append(
            {k: rec[k] for k in ("item", "load", "fault", "outcome", "numbers") if k in rec})
    tests = data["tests"]
    for nodeid, outcome in outcomes.tests.items():
        if outcome["result"] == "skipped" and not by_test.get(nodeid) and \
                f"{nodeid}|{form}" in tests:
            continue  # a test skipped here (e.g. no tmpfs) keeps its last real result
        items = {r["item"] for r in by_test.get(nodeid, [])} or \
            files.get(Path(nodeid.split("::")[0]), set())
        tests[f"{nodeid}|{form}"] = {
            "test": nodeid, "form": form, "run": run_id, "items": sorted(items),
            **outcome, "records": by_test.get(nodeid, [])}
    for key in list(tests):
        nodeid = tests[key]["test"]
        file = nodeid.split("::")[0]
        if not (root / file).exists() or (file in ran_files and
                                          nodeid not in outcomes.collected):
            del tests[key]
    data["runs"][run_id] = run_info
    used = {entry["run"] for entry in tests.values()}
    data["runs"] = {k: v for k, v in data["runs"].items() if k in used}
    return data


# ---------------------------------------------------------------------------------------------
# the doc
# ---------------------------------------------------------------------------------------------

def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip() or "-"


def _key_numbers(numbers: dict[str, Any]) -> str:
    """What issue 19 asks of every fault: the longest unavailability, acknowledged writes
    lost, duplicates (for the tests that measure them with tests/support/load.py)."""
    if "longest_unavailability_s" not in numbers:
        return "-"
    return (f"{numbers['longest_unavailability_s']} s / {numbers.get('lost_writes', '?')} of "
            f"{numbers.get('acked_writes', '?')} / {numbers.get('duplicates', '?')}")


def render(data: dict[str, Any]) -> str:
    runs = data["runs"]
    letters = {run_id: chr(ord("A") + i) for i, run_id in
               enumerate(sorted(runs, key=lambda r: runs[r]["date"]))}
    out = [
        "# Reliability",
        "",
        f"<!-- Written by `{COMMAND}` from docs/reliability.json; do not edit by hand. -->",
        "",
        "What issue 19 asks of a deployment (replicas on an etcd cluster, faults under load, "
        "hostile input, hours of load, certificate rotation), each tested end to end with real "
        "processes and real clients, and what each test measured the last time it ran. The "
        "short forms run in CI with the rest of the suite; the long forms are run by hand:",
        "",
        "```",
        f"{COMMAND}                 # every test of items 2-6, short forms (about 12 "
        "minutes on 2 cores)",
        f"{COMMAND} --long          # the long forms (minutes per fault; the soak's hours: "
        "GATEWAY_SOAK_SECONDS)",
        f"{COMMAND} tests/reliability/test_faults_etcd.py -k leader   # a subset; other rows "
        "are kept",
        f"{COMMAND} --items 1-6     # the image's tests too (podman, a few minutes more)",
        f"{COMMAND} --render        # rewrite this page from docs/reliability.json",
        f"{COMMAND} --merge FILE    # take in the newer results of another checkout's "
        "reliability.json",
        "```",
        "",
        "Each test calls `tests.support.reliability.record(...)` with its load, the fault it "
        "injected and the outcome, before it asserts; the script runs the tests one at a time "
        "(no parallel workers), keeps every test's latest result per form in "
        "docs/reliability.json and writes this page from it. *Unavailable* is the longest "
        "time one client of the steady load went without a successful answer; *lost* counts "
        "acknowledged writes missing afterwards on any replica (of all acknowledged); "
        "*duplicated* counts objects made twice and watch events seen twice. Each test's file "
        "says what it checks and why; [operations.md](operations.md#failures) what a failure "
        "looks like to a client.",
        "",
        "## Runs",
        "",
        "| Run | Date (UTC) | Form | Wall time | Machine | Python | etcd | kubectl |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run_id, letter in sorted(letters.items(), key=lambda kv: kv[1]):
        info = runs[run_id]
        m = info["machine"]
        out.append(f"| {letter} | {info['date']} | {info['form']} | "
                   f"{info['wall_s'] / 60:.0f} min | {m['cores']} cores, "
                   f"{m['memory_gib']} GiB, {_cell(m['cpu'])}, {_cell(m['kernel'])} | "
                   f"{m['python']} | {_cell(m['etcd'])} | {_cell(m['kubectl'])} |")
    out.append("")
    out.append("Commands: " + "; ".join(
        f"{letters[r]}: `{runs[r]['command']}`" for r in sorted(letters, key=letters.get)))
    entries = sorted(data["tests"].values(), key=lambda e: (e["test"], e["form"]))
    for item, title in ITEMS.items():
        rows = [e for e in entries if item in e["items"]]
        if not rows:
            continue
        out += ["", f"## {item}. {title}", "",
                "| Test | Form | Load | Fault | Outcome | Unavailable / lost / duplicated "
                "| Result | Time | Run |",
                "|---|---|---|---|---|---|---|---|---|"]
        for entry in rows:
            name = entry["test"].split("::", 1)[-1]
            file = entry["test"].split("::")[0]
            result = entry["result"] + (f": {entry['message']}" if entry["message"] and
                                        entry["result"] != "passed" else "")
            records = [r for r in entry["records"] if r.get("item") == item] or [{}]
            for rec in records:
                out.append(
                    f"| [{_cell(name)}](../{file}) | {entry['form']} | "
                    f"{_cell(rec.get('load', ''))} | {_cell(rec.get('fault', ''))} | "
                    f"{_cell(rec.get('outcome', 'recorded nothing'))} | "
                    f"{_key_numbers(rec.get('numbers') or {})} | {_cell(result)} | "
                    f"{entry['duration_s']:g} s | {letters.get(entry['run'], '?')} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help="test files or node ids (default: every "
                        "reliability test of the selected items)")
    parser.add_argument("--long", action="store_true", help="the long forms "
                        "(GATEWAY_RELIABILITY_LONG=1)")
    parser.add_argument("--items", default="2-6", help="the issue's items whose tests run "
                        "(default 2-6; 1 is the image, which needs podman)")
    parser.add_argument("-k", dest="keyword", help="pytest's -k, to run some tests only")
    parser.add_argument("--render", action="store_true", help="run nothing; rewrite the doc "
                        "from the data")
    parser.add_argument("--merge", metavar="FILE", help="run nothing; take into the data "
                        "the newer results of another reliability.json (another checkout's, "
                        "another machine's)")
    args, extra = parser.parse_known_args(argv)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    code = 0
    if args.render:
        with locked(DATA):
            DOC.write_text(render(load_data(DATA)))
    elif args.merge:
        with locked(DATA):
            data = merge_data(load_data(DATA), load_data(Path(args.merge)))
            DATA.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            DOC.write_text(render(data))
    else:
        files = reliability_files()
        wanted = item_range(args.items)
        # a file that names no item literally is run too (it says which when it records)
        targets = args.targets or [str(p) for p, items in files.items()
                                   if items & wanted or not items]
        if not targets:
            print("no reliability tests found", file=sys.stderr)
            return 2
        pytest_args = [*extra, *(["-k", args.keyword] if args.keyword else [])]
        started = time.time()
        code, outcomes, recorded = run(targets, pytest_args, args.long)
        command = " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])])
        run_info = {"id": f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}",
                    "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
                    "form": "long" if args.long else "short", "command": command,
                    "wall_s": round(time.time() - started), "machine": machine()}
        ran_files = {t.split("::")[0] for t in targets}
        # read only now, under a lock: another run may have written it meanwhile
        with locked(DATA):
            data = merge(load_data(DATA), run_info, outcomes, recorded, files, ran_files)
            DATA.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            DOC.write_text(render(data))
    print(f"wrote {DOC} and {DATA}")
    return code


if __name__ == "__main__":
    sys.exit(main())
