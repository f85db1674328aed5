"""What reliability tests report, and how long they run.

Each test of issue 19's kind (replicas, faults, hostile input, certificate rotation, long
load) calls ``record(...)`` with its load, the fault it injected and the outcome in numbers,
before it asserts: ``tools/reliability.py`` runs them with ``GATEWAY_RELIABILITY_RESULTS``
naming a JSON-lines file and writes docs/reliability.md from it (a test that records nothing
still gets a row, from pytest's report). Outside that run ``record`` does nothing.

``GATEWAY_RELIABILITY_LONG=1`` selects the long forms (minutes per fault instead of seconds);
``GATEWAY_SOAK_SECONDS`` sets the long load's
duration (the soak test passes its own default: 100 s in CI, an hour in the long form).
"""

from __future__ import annotations

import json
import os
import platform
import time
from typing import Any

RESULTS_ENV = "GATEWAY_RELIABILITY_RESULTS"
LONG_ENV = "GATEWAY_RELIABILITY_LONG"
SOAK_ENV = "GATEWAY_SOAK_SECONDS"


def long_form() -> bool:
    """Whether the documented long run asked for the long forms."""
    return os.environ.get(LONG_ENV) == "1"


def soak_seconds(default: float = 120.0) -> float:
    return float(os.environ.get(SOAK_ENV) or default)


def current_test() -> str:
    """The running test's node id (pytest sets PYTEST_CURRENT_TEST)."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def record(*, item: str, load: str, fault: str, outcome: str, test: str | None = None,
           **numbers: Any) -> None:
    """Append one result: the issue's item ("2", "3", ...), the load in words, the fault
    injected ("none" for none), the outcome in words, and its numbers (JSON values)."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = json.dumps({"item": item, "test": test or current_test(), "load": load,
                       "fault": fault, "outcome": outcome, "numbers": numbers,
                       "time": time.time(), "host": platform.node()}, default=str)
    # one write of one line to a file opened for appending: whole lines, even from the
    # suite's parallel workers
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
