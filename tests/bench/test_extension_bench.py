"""bench/extension.py's short run (the Go reference is not on CI machines: the Python server
alone), so that it does not rot between its long runs."""

from __future__ import annotations

import pytest

from tests.bench.test_smoke import run_bench

pytestmark = pytest.mark.slow


def test_extension_bench_without_the_go_reference() -> None:
    out = run_bench("extension.py", "--quick", "--reference", "none", "--list-objects", "50")
    for op in ("get", "create", "list, page of 500 (of 50)"):
        assert f"| {op} |" in out, out
    assert "Python (examples/wardle) /s" in out
