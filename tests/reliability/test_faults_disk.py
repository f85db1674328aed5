"""The embedded store's disk full, under a steady mixed load (issue 19, item 3).

One gateway on the embedded store (SQLite) whose data directory is a size-limited tmpfs,
driven by the mixed load of tests/support/load.py (python-client writers, raw-HTTPS updaters,
listers and watchers, kubectl). While the load runs, a file fills what is left of the tmpfs;
later it is removed, as an operator frees space.

What must hold (docs/operations.md, "Failures"):

- while the disk is full, a write fails with a Status: 500 ``InternalError``, the store's words
  ("database or disk is full"), at once. kube-apiserver on etcd whose space quota is exhausted
  answers a 500 too (etcd's "mvcc: database space exceeded", passed on without a reason); the
  embedded store's failure is an internal error of its own, so it is one (507
  InsufficientStorage is WebDAV's and no kube client knows it);
- reads go on: gets, lists (from the store and from the watch cache), watches, kubectl; /readyz
  stays ready, as kube's does under etcd's NOSPACE alarm (its etcd check reads);
- a write that failed left nothing: a writer that tries the same name again after the space
  returned gets 201, never 409;
- once space returns, writes succeed again without a restart; after the run the database
  passes SQLite's integrity check and, after a restart, holds every acknowledged write.

Mounting a tmpfs needs root (or CAP_SYS_ADMIN); where that is refused the test is skipped and
says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import GatewayProcess
from tests.support.load import Load, Mix, Replica
from tests.support.reliability import long_form, record
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

#: Load before the disk fills, how long it stays full once writes fail, load after.
BEFORE, FULL, AFTER = (30.0, 60.0, 60.0) if long_form() else (4.0, 5.0, 6.0)
#: The tmpfs: room for the store's files (its WAL grows to about 4 MiB between checkpoints).
TMPFS_SIZE = "64m"
#: Writes start failing once the store needs a page the disk does not have: at once when
#: its WAL must grow, else at the next checkpoint (every 1,000 pages written, a few seconds
#: of this load). Generous for a busy machine.
FAILS_WITHIN = 60.0
#: After the space returns, every write and read succeeds from this long on (margin for the
#: client that was backing off).
GRACE = 5.0
#: The load's kinds of operation that write.
WRITES = ("create", "update")
FULL_MESSAGE = "the embedded store failed the write: database or disk is full"


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where``. Where mounting is refused the test fails with
    the reason (it needs root, as CI has): a skip would pass without testing anything."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                              str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem is full, in ever smaller pieces down to one
    byte; the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as out:
        piece = 1 << 20
        while piece:
            try:
                written += out.write(b"\0" * piece)
            except OSError:
                piece //= 4
    return written


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def integrity(db: Path) -> list[str]:
    """SQLite's integrity check of the store's database (after the gateway stopped)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def mix() -> Mix:
    return Mix(writers=4, writer_rate=10, updaters=2, updater_rate=5, listers=1,
               lister_rate=2, kubectl_every=3, watchers=3)


def describe_load(m: Mix) -> str:
    return (f"{m.writers} writers ({m.writer_rate:g}/s each, python client), {m.updaters} "
            f"updaters and {m.listers} lister (raw HTTPS), {m.watchers} watchers, kubectl "
            f"every {m.kubectl_every:g} s; one gateway on the embedded store")


def write_failures(load: Load, since: float) -> list[Any]:
    return [op for op in load.recorder.snapshot()
            if op.start >= since and op.kind in WRITES and op.status == 500]


def test_the_embedded_stores_disk_full(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", TMPFS_SIZE) as disk:
        gateway = GatewayProcess(tmp_path / "gateway")
        gateway.data_dir = disk / "data"
        gateway.start()
        try:
            _run(gateway, disk)
        finally:
            gateway.stop()


def _run(gateway: GatewayProcess, disk: Path) -> None:
    namespace = f"d-{uuid.uuid4().hex[:8]}"
    code, body = gateway.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    assert code == 201, body
    cm = f"/api/v1/namespaces/{namespace}/configmaps"
    m = mix()
    load = Load([Replica.of(gateway)], namespace, m, name="disk").start()
    filler = disk / "filler"
    probes: dict[str, Any] = {}
    try:
        time.sleep(BEFORE)
        full_at = time.monotonic()
        filled = fill(filler)
        # the store's next page has nowhere to go: writes fail from then on
        eventually(lambda: write_failures(load, full_at), timeout=FAILS_WITHIN, interval=0.2,
                   what="a write failing on the full disk")
        time.sleep(FULL)
        # while full: a write, a read from the store and one from the cache, /readyz
        probes["write"] = gateway.request("POST", cm, {"metadata": {"name": "while-full"}})
        probes["get"] = gateway.request("GET", f"/api/v1/namespaces/{namespace}")
        probes["list"] = gateway.request("GET", f"{cm}?limit=5")
        probes["cached list"] = gateway.request("GET", f"{cm}?resourceVersion=0")
        probes["readyz"] = gateway.request("GET", "/readyz")
        freed_at = time.monotonic()
        filler.unlink()
        time.sleep(AFTER)
    finally:
        load.stop()
        with contextlib.suppress(FileNotFoundError):
            filler.unlink()
    report = load.verify()
    assert not load.failures, load.failures
    full_errors = write_failures(load, full_at)
    first_failure = min(op.start for op in full_errors)
    during = report.errors(since=full_at, until=freed_at)
    reads_failed = [op for op in during if op.kind not in WRITES]
    # a write may still succeed on a full disk, in pages the store's files already hold
    written = sum(1 for op in report.ops if op.ok and op.kind in WRITES
                  and first_failure <= op.start < freed_at)
    late = report.errors(since=freed_at + GRACE)
    # the same name again after a failed create: a 201 (nothing of it was stored)
    after_space = gateway.request("POST", cm, {"metadata": {"name": "while-full"}})
    # stopped: the database as SQLite sees it; started again: every acknowledged write there
    gateway.stop()
    checked = integrity(gateway.data_dir / "state.db")
    gateway.start()
    again = load.verify()
    s = report.summary()
    record(item="3", load=describe_load(m),
           fault=f"the data directory's tmpfs ({TMPFS_SIZE}) filled by another file "
                 f"({filled / 2**20:.0f} MiB) for {freed_at - full_at:.0f} s, then the file "
                 "removed",
           outcome=(f"writes failed {first_failure - full_at:.1f} s after the disk filled, "
                    f"each a 500 InternalError Status ('{FULL_MESSAGE}'; "
                    f"{len(full_errors)} failed writes, {written} succeeded in space the "
                    f"store's files held); reads and watches went on "
                    f"({len(reads_failed)} failed reads); /readyz {probes['readyz'][0]}; "
                    f"writes succeeded again without a restart; integrity check "
                    f"{'/'.join(checked)}; {s['acked_writes']} acknowledged writes, "
                    f"{report.lost_writes} lost (after a restart: {again.lost_writes}), "
                    f"{report.duplicates} duplicated, {s['applied_despite_error']} failed "
                    f"writes applied; longest unavailability {s['longest_unavailability_s']} s "
                    f"({s['longest_unavailability_client']})"),
           failed_writes=len(full_errors), writes_while_full=written,
           failed_reads=len(reads_failed),
           writes_failed_after_s=round(first_failure - full_at, 1), integrity=checked,
           lost_after_restart=again.lost_writes, **s)
    # writes fail with a Status: 500 InternalError in the store's words, at once
    code, raw = probes["write"]
    body = json.loads(raw)
    assert (code, body["kind"], body["reason"], body["code"]) == (
        500, "Status", "InternalError", 500), raw
    assert body["details"]["causes"][0]["message"] == FULL_MESSAGE, raw
    assert all(op.end - op.start < 5 for op in full_errors), "a write waited on the full disk"
    # reads go on, and the gateway stays ready
    for what in ("get", "list", "cached list", "readyz"):
        assert probes[what][0] == 200, (what, probes[what])
    assert not reads_failed, [(op.client, op.kind, op.status, op.error) for op in reads_failed]
    # a failed write left nothing behind; once space returned, writes went on
    assert after_space[0] == 201, after_space
    assert not late, [(op.client, op.kind, op.status, op.error) for op in late[:10]]
    # nothing corrupted, nothing acknowledged lost, nothing twice
    assert checked == ["ok"], checked
    report.assert_intact()
    assert again.lost_writes == 0, again.describe()
    assert s["applied_despite_error"] == 0, report.describe()

