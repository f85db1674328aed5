"""bench/vs_go.py's docs writing: a run that draws no plot (``--only table``) must not lose the
plots, or the saved rows they were drawn from, of the last run that drew them."""

from __future__ import annotations

import json
from pathlib import Path

from bench import report
from bench.vs_go import write_docs

LISTS = {"x": "objects listed", "rows": [
    {"x": n, "server": "gateway on etcd", "list_ms": n / 100, "cpu_ms_per_list": n / 200}
    for n in (1000, 10000)]}


def _run(stamp: str, body: str) -> str:
    return f"Run: {stamp}; a machine.\nSettings: ...\n\n{body}"


def test_a_table_only_run_keeps_the_plots_of_the_run_before(tmp_path: Path) -> None:
    docs = tmp_path / "performance.md"
    docs.write_text("# Performance\n\nA reading people wrote.\n")
    table = {"get": {"gateway on etcd": [{"rps": 1.0}]}}
    write_docs(docs, None, {"table": table, "lists": LISTS},  # type: ignore[arg-type]
               _run("2026-11-27 09:31 UTC", "full run"))
    image = tmp_path / "performance" / "lists.png"
    drawn = image.read_bytes()
    latest = report.read_block(docs, "vs_go latest")
    assert latest is not None and "![lists](performance/lists.png)" in latest

    write_docs(docs, None, {"table": table},  # type: ignore[arg-type]
               _run("2026-11-27 09:59 UTC", "table only"))
    latest, previous = report.read_block(docs, "vs_go latest"), report.read_block(
        docs, "vs_go previous")
    assert latest is not None and previous is not None
    assert "table only" in latest and "full run" in previous
    # the plot is the full run's still, shown once, with that run's date
    assert image.read_bytes() == drawn
    assert "Plots of the run of 2026-11-27 09:31 UTC (this run had no lists sweep):" in latest
    assert "![lists]" in latest and "![lists]" not in previous
    assert previous.startswith("### The run before\n")  # its plots were not replaced
    saved = json.loads((tmp_path / "performance" / "vs_go.json").read_text())
    assert saved["lists"]["rows"] == LISTS["rows"] and saved["lists"]["run"].endswith("09:31 UTC")
    assert saved["table_run"] == "2026-11-27 09:59 UTC"
    assert docs.read_text().startswith("# Performance\n\nA reading people wrote.")
