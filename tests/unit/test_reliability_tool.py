"""tools/reliability.py keeps every test's latest result per form: a run replaces the rows of
the tests it ran and keeps the others, a test skipped here keeps its last real result, rows of
tests that are gone are dropped, and the page shows each item's rows with their run's
machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.reliability import (
    Outcomes,
    item_range,
    merge,
    merge_data,
    reliability_files,
    render,
)

FAULTS = "tests/reliability/test_faults_etcd.py"
DISK = "tests/reliability/test_faults_disk.py"


def run_info(run_id: str, form: str = "short") -> dict[str, Any]:
    return {"id": run_id, "date": f"2026-11-27 0{run_id[-1]}:00", "form": form,
            "command": "tools/reliability", "wall_s": 60,
            "machine": {"cores": 2, "memory_gib": 23.5, "cpu": "EPYC", "python": "3.11.7",
                        "etcd": "3.5.1", "kubectl": "v1.32.4", "kernel": "Linux 6"}}


def outcomes(results: dict[str, str], collected: set[str] | None = None) -> Outcomes:
    out = Outcomes()
    out.tests = {nodeid: {"result": result, "duration_s": 1.0, "message": ""}
                 for nodeid, result in results.items()}
    out.collected = set(results) | (collected or set())
    return out


def recorded(nodeid: str, outcome: str) -> dict[str, Any]:
    return {"item": "3", "test": nodeid, "load": "a load", "fault": "a fault",
            "outcome": outcome, "numbers": {"lost_writes": 0, "acked_writes": 300,
                                            "duplicates": 0, "longest_unavailability_s": 7.5}}


def files() -> dict[Path, set[str]]:
    return {Path(FAULTS): {"3"}, Path(DISK): {"3"}}


def test_a_run_replaces_what_it_ran_and_keeps_the_rest(tmp_path: Path) -> None:
    for name in (FAULTS, DISK):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    leader, paused, disk = f"{FAULTS}::test_leader", f"{FAULTS}::test_paused", f"{DISK}::test_disk"
    data: dict[str, Any] = {"runs": {}, "tests": {}}
    data = merge(data, run_info("r1"), outcomes({leader: "passed", paused: "passed",
                                                 disk: "passed"}),
                 [recorded(leader, "first"), recorded(paused, "first"), recorded(disk, "first")],
                 files(), {FAULTS, DISK}, tmp_path)
    # the second run: the leader test alone (-k), the disk test skipped (no tmpfs)
    data = merge(data, run_info("r2"), outcomes({leader: "failed", disk: "skipped"},
                                                collected={paused}),
                 [recorded(leader, "second")], files(), {FAULTS, DISK}, tmp_path)
    tests = data["tests"]
    assert tests[f"{leader}|short"]["records"][0]["outcome"] == "second"
    assert tests[f"{leader}|short"]["result"] == "failed"
    assert tests[f"{paused}|short"]["run"] == "r1"  # deselected: kept
    assert tests[f"{disk}|short"]["records"][0]["outcome"] == "first"  # skipped: kept
    assert set(data["runs"]) == {"r1", "r2"}
    # a long run adds rows of its own form
    data = merge(data, run_info("r3", "long"), outcomes({leader: "passed"}, {paused}),
                 [recorded(leader, "long")], files(), {FAULTS}, tmp_path)
    assert tests[f"{leader}|long"]["records"][0]["outcome"] == "long"
    assert tests[f"{leader}|short"]["records"][0]["outcome"] == "second"
    # a test removed from its file, and a file removed, take their rows with them
    (tmp_path / DISK).unlink()
    data = merge(data, run_info("r4"), outcomes({leader: "passed"}),
                 [recorded(leader, "fourth")], files(), {FAULTS}, tmp_path)
    assert sorted(data["tests"]) == [f"{leader}|long", f"{leader}|short"]
    assert set(data["runs"]) == {"r3", "r4"}  # runs no row points at are dropped
    page = render(data)
    assert "## 3. Faults under load" in page
    assert "| [test_leader](../tests/reliability/test_faults_etcd.py) | long | a load | " \
           "a fault | long | 7.5 s / 0 of 300 / 0 | passed | 1 s | A |" in page
    assert "2 cores, 23.5 GiB, EPYC, Linux 6" in page


def test_the_reliability_tests_are_found_by_what_they_record() -> None:
    found = reliability_files()
    assert found[Path(FAULTS)] == {"3"}
    assert found[Path("tests/reliability/test_replicas.py")] == {"2"}
    assert Path("tests/unit/test_reliability_tool.py") not in found
    assert item_range("2-6") == {"2", "3", "4", "5", "6"}
    assert item_range("1,3-4") == {"1", "3", "4"}


def test_another_checkouts_newer_results_are_taken_in() -> None:
    def data(run_id: str, outcome: str, *tests: str) -> dict[str, Any]:
        return {"runs": {run_id: run_info(run_id)},
                "tests": {f"{t}|short": {"test": t, "form": "short", "run": run_id,
                                         "items": ["3"], "result": "passed",
                                         "duration_s": 1.0, "message": "",
                                         "records": [recorded(t, outcome)]} for t in tests}}

    here = data("r2", "here", "a::x", "a::y")
    there = data("r1", "there, older", "a::x", "a::z")
    there["tests"]["a::y|short"] = {**data("r3", "there, newer", "a::y")["tests"]["a::y|short"]}
    there["runs"]["r3"] = run_info("r3")
    merged = merge_data(here, there)
    outcomes_by_test = {k: v["records"][0]["outcome"] for k, v in merged["tests"].items()}
    assert outcomes_by_test == {"a::x|short": "here", "a::y|short": "there, newer",
                                "a::z|short": "there, older"}
    assert set(merged["runs"]) == {"r1", "r2", "r3"}
