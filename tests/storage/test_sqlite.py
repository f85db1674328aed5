"""What only the embedded store has: its file, its locking, its compaction schedule, a full disk."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from gateway.storage.errors import (
    KeyNotFoundError,
    StorageInternalError,
    TooOldResourceVersionError,
)
from gateway.storage.sqlite import SQLiteStorage, StateDatabaseError

P = "/core/configmaps/"


def cm(name: str, size: int = 10) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": "x" * size}}


async def test_a_file_that_is_not_a_database_is_refused_and_kept(tmp_path):
    path = tmp_path / "state.db"
    garbage = b"definitely not sqlite" * 500
    path.write_bytes(garbage)
    store = SQLiteStorage(path)
    with pytest.raises(StateDatabaseError) as err:
        await store.start()
    assert str(path) in str(err.value)
    assert path.read_bytes() == garbage
    await store.close()


async def test_a_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    store = SQLiteStorage(path)
    with pytest.raises(StateDatabaseError, match="not the gateway's state"):
        await store.start()
    await store.close()


async def test_a_path_that_cannot_be_opened_is_refused(tmp_path):
    path = tmp_path / "state.db"
    path.mkdir()
    store = SQLiteStorage(path)
    with pytest.raises(StateDatabaseError):
        await store.start()
    await store.close()


async def test_two_gateways_cannot_share_a_data_dir(tmp_path):
    first = SQLiteStorage(tmp_path / "state.db")
    await first.start()
    second = SQLiteStorage(tmp_path / "state.db")
    try:
        with pytest.raises(StateDatabaseError, match="in use"):
            await second.start()
    finally:
        await second.close()
        await first.close()


async def test_data_and_revisions_survive_a_reopen(tmp_path):
    store = SQLiteStorage(tmp_path / "state.db")
    await store.start()
    made = await store.create(P + "default/a", cm("a"))
    await store.close()
    again = SQLiteStorage(tmp_path / "state.db")
    await again.start()
    try:
        assert await again.get(P + "default/a") == made
        later = await again.create(P + "default/b", cm("b"))
        assert int(later["metadata"]["resourceVersion"]) > int(made["metadata"]["resourceVersion"])
    finally:
        await again.close()


async def test_a_full_disk_fails_the_write_and_leaves_nothing_half_written(tmp_path):
    store = SQLiteStorage(tmp_path / "state.db", max_page_count=40)
    await store.start()
    try:
        kept = await store.create(P + "default/kept", cm("kept"))
        before = await store.current_revision()
        with pytest.raises(StorageInternalError, match="full"):
            for i in range(1000):
                await store.create(P + f"default/big-{i}", cm(f"big-{i}", size=20_000))
        failed_at = i
        # a batch of concurrent writes fails together, and none of it is visible
        results = await asyncio.gather(
            *(store.create(P + f"default/batch-{j}", cm(f"batch-{j}", 20_000)) for j in range(5)),
            return_exceptions=True,
        )
        assert all(isinstance(r, StorageInternalError) for r in results)
        for name in [f"big-{failed_at}"] + [f"batch-{j}" for j in range(5)]:
            with pytest.raises(KeyNotFoundError):
                await store.get(P + f"default/{name}")
        assert await store.get(P + "default/kept") == kept
        listed = await store.list(P)
        assert len(listed.items) == failed_at + 1
        assert await store.current_revision() == before + failed_at
    finally:
        await store.close()


async def test_scheduled_compaction_keeps_the_newest_events(tmp_path):
    store = SQLiteStorage(tmp_path / "state.db", compaction_interval=0.05, retain_seconds=0.1,
                          retain_events=10)
    await store.start()
    try:
        created = [await store.create(P + f"default/o{i}", cm(f"o{i}")) for i in range(40)]
        revs = [int(c["metadata"]["resourceVersion"]) for c in created]
        for _ in range(100):
            await asyncio.sleep(0.05)
            try:
                await store.list(P, revision=revs[0])
            except TooOldResourceVersionError:
                break
        else:
            pytest.fail("history was never compacted")
        # the last 10 events are always kept
        watch = await store.watch(P, revision=revs[-11])
        events = [await asyncio.wait_for(anext(watch), 5) for _ in range(10)]
        assert [e.revision for e in events] == revs[-10:]
        watch.stop()
    finally:
        await store.close()
