"""Hostile input from the gateway's own OpenAPI (issue 19, item 4): schemathesis generates
requests for every operation of every group the gateway serves, from ``/openapi/v2`` and from
every ``/openapi/v3`` group version, and sends them as the admin user (so that they reach the
handlers, not just authorization), mostly in a namespace and on objects that exist. Every
answer must be kube's kind of answer (see tests/support/fuzz.py): an error is a metav1.Status
with its code, a 5xx only where kube answers one itself, and no request hangs. Afterwards the
gateway still serves, and its log holds no panic.

CI runs about 2,100 requests with a fixed seed, the two documents side by side. The longer
run (docs/hostile-input.md):

    GATEWAY_FUZZ_EXAMPLES=20 GATEWAY_FUZZ_SEED=random \\
        .venv/bin/pytest -p no:xdist -rP tests/e2e/test_openapi_fuzz.py

(the same as ``GATEWAY_RELIABILITY_LONG=1``, which ``tools/reliability.py --long`` sets).

(``GATEWAY_FUZZ_PHASES=examples,coverage,fuzzing`` adds schemathesis' boundary values.)
"""

from __future__ import annotations

import json
import os
import resource
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support import fuzz, reliability
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow

#: Cases per operation in CI: about 1,100 requests for each document (184 operations each).
EXAMPLES = 6
#: Requests each document's run must have sent in CI (2,000 together at least).
AT_LEAST = 1000


#: The long form's cases per operation (GATEWAY_RELIABILITY_LONG=1, tools/reliability.py
#: --long), with a random seed.
LONG_EXAMPLES = 20


def _examples() -> int:
    given = os.environ.get("GATEWAY_FUZZ_EXAMPLES")
    return int(given) if given else LONG_EXAMPLES if reliability.long_form() else EXAMPLES


def _seed() -> int | None:
    seed = os.environ.get("GATEWAY_FUZZ_SEED", "random" if reliability.long_form() else "19")
    return None if seed == "random" else int(seed)


def _fetch(gw: GatewayProcess, path: str) -> Any:
    code, body = gw.request("GET", path)
    assert code == 200, (path, body[:300])
    return json.loads(body)


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_openapi_v2_and_every_v3_group_version(tmp_path: Path) -> None:
    """One gateway, with ``fuzz.SEEDED`` applied, fuzzed from both documents at once. One
    test, not one per document: under xdist two tests could land on two workers, and each
    would fuzz both."""
    with GatewayProcess(tmp_path) as gw:
        gw.kubectl("apply", "-f", "-", input=fuzz.SEEDED)
        v3 = fuzz.merged_v3(lambda path: _fetch(gw, path))
        groups = {path.split("/")[2] for path in v3["paths"] if path.startswith("/apis/")}
        assert {"rbac.authorization.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io",
                "admissionregistration.k8s.io", "coordination.k8s.io"} <= groups, groups
        (tmp_path / "openapi-v3.json").write_text(json.dumps(v3))
        options = {"examples": _examples(),
                   "seed": _seed(),
                   "phases": os.environ.get("GATEWAY_FUZZ_PHASES", "examples,fuzzing")}
        before = _cpu_seconds(resource.RUSAGE_CHILDREN)
        runs = {"v2": fuzz.Run(gw.url, f"{gw.url}/openapi/v2", gw.cert_dir, tmp_path / "v2",
                               **options),
                "v3": fuzz.Run(gw.url, str(tmp_path / "openapi-v3.json"), gw.cert_dir,
                               tmp_path / "v3", **options)}
        done = {name: run.finish() for name, run in runs.items()}
        # CPU, which says more than wall time on a shared machine: schemathesis' generation
        # takes nearly all of it, the gateway little
        cpu = {"schemathesis": round(_cpu_seconds(resource.RUSAGE_CHILDREN) - before, 1),
               "gateway": round(_process_cpu_seconds(gw.proc.pid), 1) if gw.proc else 0.0}
        print(f"CPU seconds: {cpu}")  # shown with -rP
        statuses = sum((outcome.statuses for outcome in done.values()), Counter())
        failed = [name for name, outcome in done.items() if outcome.returncode != 0]
        reliability.record(
            item="4", load=f"schemathesis, {options['examples']} cases per operation, "
            "OpenAPI v2 and v3 side by side", fault="hostile input",
            outcome=f"{sum(statuses.values()):,} requests on "
            f"{' + '.join(str(o.operations) for o in done.values())} operations; statuses "
            + ", ".join(f"{code}: {count:,}" for code, count in sorted(statuses.items()))
            + (f"; failures in {', '.join(failed)}" if failed else
               "; every answer kube's kind, 5xx only kube's own, no hang"),
            requests=sum(statuses.values()),
            operations={name: outcome.operations for name, outcome in done.items()},
            statuses={str(code): count for code, count in sorted(statuses.items())},
            seconds=round(max(outcome.seconds for outcome in done.values()), 1),
            cpu_seconds=cpu, seeds={name: outcome.seed for name, outcome in done.items()})
        for name, outcome in done.items():  # shown with -rP
            print(f"{name}: schemathesis (seed {outcome.seed}) sent "
                  f"{sum(outcome.statuses.values())} requests on {outcome.operations} "
                  f"operations in {outcome.seconds:.0f} s; statuses "
                  f"{dict(sorted(outcome.statuses.items()))}")
        for name, outcome in done.items():
            _judge(name, outcome)
        assert gw.request("GET", "/readyz")[0] == 200, "the gateway still serves"
        assert "panic while serving" not in gw.log_path.read_text(errors="replace")


def _judge(name: str, outcome: fuzz.Outcome) -> None:
    marks = [outcome.output.find(f" {mark} ") for mark in ("FAILURES", "ERRORS")]
    found = [mark for mark in marks if mark >= 0]
    failures = outcome.output[min(found):] if found else outcome.output[-6000:]
    assert outcome.returncode == 0, f"{name}: {failures[:20000]}"
    minimum = AT_LEAST if _examples() >= EXAMPLES else 0
    assert outcome.cases >= minimum, outcome.output[-3000:]
    assert outcome.operations >= 180, outcome.output[-3000:]


def test_the_check_refuses_what_kube_would_not_answer() -> None:
    """The check itself, on answers written by hand: it must fail a panic's 500, a 5xx of the
    gateway's own, an error that is no Status and a Status whose code is another."""
    from types import SimpleNamespace

    def answer(code: int, body: object, method: str = "GET") -> bool:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            fuzz.kube_answers(None, SimpleNamespace(status_code=code, content=content),
                              SimpleNamespace(method=method, operation=SimpleNamespace(path="/")))
        except AssertionError:
            return False
        return True

    def status(code: int, message: str, reason: str = "") -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                "message": message, "reason": reason}

    assert answer(200, {"kind": "ConfigMap"})
    assert answer(404, status(404, "configmaps \"x\" not found", "NotFound"))
    assert answer(503, b"service unavailable\n")
    assert answer(500, status(500, "resourceVersion: Invalid value: \"x\": strconv.ParseUint: "
                                   "parsing \"x\": invalid syntax"))
    assert not answer(500, status(500, f"Internal error occurred: {fuzz.PANIC}", "InternalError"))
    assert not answer(500, status(500, "Internal error occurred: boom", "InternalError"))
    assert not answer(400, b"400 Bad Request")
    assert not answer(422, status(400, "bad", "BadRequest"))
