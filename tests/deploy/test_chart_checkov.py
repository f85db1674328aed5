"""checkov's Kubernetes and Helm checks over the chart: the helm framework on the chart itself
and the kubernetes framework on the manifests of every documented combination. The only
failures allowed are the checks the chart's .checkov.yaml skips, each with its reason there;
and each of those must still fail without the skip (no stale skips).

checkov cannot share the project's virtualenv: its pins (packaging<24, botocore's
python-dateutil<3) conflict with pytest 9 and the kubernetes client, and it brings aiodns,
which would change aiohttp's resolver under the gateway. It lives in its own virtualenv beside
the project's (<venv>/checkov), created on first use from PyPI at a pinned version. Its helm
framework shells out to `helm`: a small `helm` command answered by Helm's Go SDK
(tests/deploy/helm.py) stands in, since no PyPI wheel ships a Linux helm binary.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import helm

pytestmark = pytest.mark.slow

CHECKOV = "checkov==3.3.30"
CHECKOV_ENV = Path(sys.prefix) / "checkov"
CONFIG = helm.CHART / ".checkov.yaml"


def checkov_command() -> Path:
    """checkov from its own virtualenv, installed once (under a lock: xdist workers)."""
    command = CHECKOV_ENV / "bin" / "checkov"
    stamp = CHECKOV_ENV / "installed"
    CHECKOV_ENV.parent.mkdir(parents=True, exist_ok=True)
    with open(CHECKOV_ENV.parent / "checkov.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == CHECKOV and command.exists()):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(CHECKOV_ENV)],
                           check=True)
            subprocess.run([str(CHECKOV_ENV / "bin" / "pip"), "install", "--quiet",
                            "--disable-pip-version-check", CHECKOV], check=True)
            stamp.write_text(CHECKOV)
    return command


def _documents(output: str) -> list[dict[str, Any]]:
    """checkov prints one JSON value per scanned directory (a report or a list of them)."""
    decoder, reports, at = json.JSONDecoder(), [], 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(output, at)
        reports += value if isinstance(value, list) else [value]
    return reports


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    work = tmp_path_factory.mktemp("checkov")
    rendered = work / "rendered"
    rendered.mkdir()
    for name, values in helm.combinations().items():
        documents = helm.render(values)
        documents += helm.render(values, upgrade=True)
        (rendered / f"{name}.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    shim = work / "bin"
    shim.mkdir()
    (shim / "helm").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tests.deploy.helm "$@"\n')
    (shim / "helm").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}",
           "PYTHONPATH": str(helm.ROOT), "HELM_NAMESPACE": helm.NAMESPACE,
           "BC_SKIP_MAPPING": "TRUE", "CKV_CACHE_DIR": str(work / "cache")}
    # The skips are checked below, not applied: checkov reads .checkov.yaml from a scanned
    # directory, so it scans a copy of the chart without it.
    chart = work / "chart" / helm.CHART.name
    shutil.copytree(helm.CHART, chart, ignore=shutil.ignore_patterns(CONFIG.name))
    result = subprocess.run(
        [str(checkov_command()), "--directory", str(rendered), "--directory", str(chart),
         "--framework", "kubernetes", "helm", "--skip-download", "--compact", "--quiet",
         "--output", "json"],
        capture_output=True, text=True, env=env, cwd=work, timeout=600)
    assert result.returncode in (0, 1), result.stderr  # 1: checks failed
    return _documents(result.stdout)


def _skips() -> set[str]:
    return set(yaml.safe_load(CONFIG.read_text())["skip-check"])


def test_both_frameworks_scanned_the_chart(reports: list[dict[str, Any]]) -> None:
    scanned = {}
    for report in reports:
        scanned.setdefault(report["check_type"], 0)
        scanned[report["check_type"]] += report["summary"]["resource_count"]
        assert report["summary"]["parsing_errors"] == 0
    assert scanned.get("helm", 0) >= 8  # the default release's objects, templated by Helm
    assert scanned.get("kubernetes", 0) >= 60  # every combination's objects


def test_only_the_named_skips_fail(reports: list[dict[str, Any]]) -> None:
    failed: dict[str, set[str]] = {}
    for report in reports:
        for check in report["results"]["failed_checks"]:
            failed.setdefault(check["check_id"], set()).add(check["resource"])
    unexpected = {check: sorted(where) for check, where in failed.items()
                  if check not in _skips()}
    assert unexpected == {}
    assert set(failed) == _skips(), "a skip in .checkov.yaml no longer fails: drop it"


def test_every_skip_is_justified_in_the_config() -> None:
    text = CONFIG.read_text()
    for check in _skips():
        before = text[:text.index(f"- {check}")].rstrip().splitlines()[-1]
        assert before.lstrip().startswith("#"), f"{check} has no reason above it"
