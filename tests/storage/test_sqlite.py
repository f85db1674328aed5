"""What only the embedded store has: its file, its locking, its compaction schedule, a full disk."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from gateway.storage.errors import (
    KeyNotFoundError,
    StorageInternalError,
    TooOldResourceVersionError,
)
from gateway.storage.sqlite import SQLiteStorage, StateDatabaseError
from tests.storage.helpers import P, changes, key
from tests.support.api import rv, sized_configmap
from tests.support.wait import eventually_async


async def refusal(path: Path) -> str:
    """Why a store on ``path`` refuses to start (StateDatabaseError's message)."""
    store = SQLiteStorage(path)
    try:
        with pytest.raises(StateDatabaseError) as err:
            await store.start()
    finally:
        await store.close()
    return str(err.value)


async def test_a_file_that_is_not_a_database_is_refused_and_kept(tmp_path):
    path = tmp_path / "state.db"
    garbage = b"definitely not sqlite" * 500
    path.write_bytes(garbage)
    assert await refusal(path) == (
        f"{path} is not a usable SQLite database: file is not a database")
    assert path.read_bytes() == garbage


async def test_a_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    assert await refusal(path) == f"{path} is a SQLite database, but not the gateway's state"


async def test_a_path_that_cannot_be_opened_is_refused(tmp_path):
    path = tmp_path / "state.db"
    path.mkdir()
    assert await refusal(path) == f"{path} cannot be opened: unable to open database file"


async def test_two_gateways_cannot_share_a_data_dir(tmp_path):
    first = SQLiteStorage(tmp_path / "state.db")
    await first.start()
    second = SQLiteStorage(tmp_path / "state.db")
    try:
        with pytest.raises(StateDatabaseError) as err:
            await second.start()
        assert str(err.value) == (f"{tmp_path / 'state.db'} is in use by another gateway "
                                  f"process (lock {tmp_path / 'state.db.lock'})")
    finally:
        await second.close()
        await first.close()


async def test_data_and_revisions_survive_a_reopen(tmp_path):
    store = SQLiteStorage(tmp_path / "state.db")
    await store.start()
    made = await store.create(key("a"), sized_configmap("a"))
    await store.close()
    again = SQLiteStorage(tmp_path / "state.db")
    await again.start()
    try:
        assert await again.get(key("a")) == made
        later = await again.create(key("b"), sized_configmap("b"))
        assert rv(later) == rv(made) + 1
    finally:
        await again.close()


async def test_a_full_disk_fails_the_write_and_leaves_nothing_half_written(tmp_path):
    store = SQLiteStorage(tmp_path / "state.db", max_page_count=40)
    await store.start()
    try:
        kept = await store.create(key("kept"), sized_configmap("kept"))
        before = await store.current_revision()
        full = "the embedded store failed the write: database or disk is full"
        with pytest.raises(StorageInternalError, match=f"^{full}$"):
            for i in range(1000):
                await store.create(key(f"big-{i}"), sized_configmap(f"big-{i}", size=20_000))
        failed_at = i
        # a batch of concurrent writes fails together, and none of it is visible
        results = await asyncio.gather(
            *(store.create(key(f"batch-{j}"), sized_configmap(f"batch-{j}", 20_000))
              for j in range(5)),
            return_exceptions=True,
        )
        assert [(type(r), str(r)) for r in results] == [(StorageInternalError, full)] * 5
        for name in [f"big-{failed_at}"] + [f"batch-{j}" for j in range(5)]:
            with pytest.raises(KeyNotFoundError):
                await store.get(key(name))
        assert await store.get(key("kept")) == kept
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
        created = [await store.create(key(f"o{i}"), sized_configmap(f"o{i}")) for i in range(40)]
        revs = [rv(c) for c in created]

        async def too_old(revision: int) -> bool:
            try:
                await store.list(P, revision=revision)
            except TooOldResourceVersionError:
                return True
            return False

        # compaction goes as far as it may: everything before the last 10 events...
        await eventually_async(lambda: too_old(revs[-12]), what="compaction up to revs[-11]")
        # ...and no further, however many rounds run
        listed = await store.list(P, revision=revs[-11])
        assert sorted(rv(o) for o in listed.items) == revs[:-10]
        watch = await store.watch(P, revision=revs[-11])
        assert [e.revision for e in await changes(watch, 10)] == revs[-10:]
        watch.stop()
    finally:
        await store.close()
