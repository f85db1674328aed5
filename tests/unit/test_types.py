"""gateway/ type-checks clean at the strictness pyproject.toml's [tool.mypy] sets.

mypy runs as a user runs it (the venv's interpreter, from the repository's root, so it reads
the configuration there); its cache is the repository's .mypy_cache, so a second run only
checks what changed (CI's run is cold). Each finding is printed as mypy gives it: file, line,
message, error code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gateway_type_checks() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    print(result.stdout, result.stderr, sep="\n")
    assert result.returncode == 0, f"mypy found problems in gateway/:\n{result.stdout}"
    assert "Success: no issues found" in result.stdout
