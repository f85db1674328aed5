"""The embedded store: SQLite in WAL mode, one global revision, an append-only change log.

As k3s's kine does, every write appends a row to ``log`` whose id is the new revision: a
create, an update (``prev_revision`` names the row it supersedes) or a deletion (a tombstone).
``current`` maps each live key to its newest row, so reads of the present are index lookups,
while reads at an older revision and watches from a revision are answered from the log.

Writes are serialized on one writer thread and committed in groups: whatever requests arrive
while a commit is in flight share the next transaction and its single fsync
(``synchronous=FULL``, so an acknowledged write survives a crash). Reads run on a small pool
of reader threads, each with its own connection; a read of one key runs on the event loop
itself, because an indexed lookup costs less than the hop to a thread. Events are published
on the event loop after their commit, in revision order.

Compaction deletes history older than the compact revision, on a schedule that keeps at
least the last 5 minutes and 10,000 events; a read or watch before it is TooOld (410).
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from gateway.storage import cas, codec, continuetoken
from gateway.storage.errors import (
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    StorageError,
    StorageInternalError,
    StorageUnavailableError,
    TooOldResourceVersionError,
)
from gateway.storage.interface import (
    EventType,
    ListResult,
    Object,
    Preconditions,
    Predicate,
    UpdateFunc,
    WatchEvent,
    prefix_end,
)
from gateway.storage.watchstream import QueueWatch

log = structlog.get_logger(__name__)

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY,             -- the revision of this change
    name TEXT NOT NULL,                 -- the key
    created INTEGER NOT NULL,           -- 1: this row creates the key
    deleted INTEGER NOT NULL,           -- 1: this row is a tombstone
    prev_revision INTEGER NOT NULL,     -- the row this one supersedes, 0 for none
    value BLOB                          -- the object as JSON; NULL for a tombstone
);
CREATE INDEX IF NOT EXISTS log_name_id ON log (name, id);
CREATE TABLE IF NOT EXISTS current (
    name TEXT PRIMARY KEY,
    id INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
"""
_OUR_TABLES = {"log", "current", "meta"}

#: Most operations one transaction commits together.
_MAX_BATCH = 256
#: How many log rows one catch-up read of a watch takes at a time.
_CATCH_UP_CHUNK = 1000


class StateDatabaseError(StorageError):
    """state.db cannot be used: unreadable, corrupt, not ours, or locked by another gateway."""


# ---------------------------------------------------------------------------------------------
# write operations, applied on the writer thread inside one transaction


@dataclass(slots=True)
class _Written:
    """A successful write: its revision, and the event it produces."""

    revision: int
    event: WatchEvent


@dataclass(slots=True)
class _Stale:
    """A compare-and-swap lost: the key is now at ``revision`` with ``value`` (None: absent)."""

    revision: int
    value: bytes | None


@dataclass(slots=True)
class _Put:
    """Create (expected 0) or replace (expected = the row read) the key with ``data``."""

    key: str
    data: bytes
    expected: int
    prev_data: bytes | None  # the bytes of row ``expected``, for the event's previous object
    must_not_exist: bool = False  # create: an existing key is KeyExists, not a stale read


@dataclass(slots=True)
class _Delete:
    key: str
    expected: int
    prev_data: bytes


@dataclass(slots=True)
class _Compact:
    revision: int


_Op = _Put | _Delete | _Compact


class _Writer:
    """Owns the write connection and the revision counter; used only on the writer thread."""

    def __init__(self, conn: sqlite3.Connection, revision: int, compacted: int) -> None:
        self.conn = conn
        self.revision = revision
        self.compacted = compacted

    def apply_batch(self, ops: Sequence[_Op]) -> list[object]:
        """Apply ``ops`` in one transaction; each result is _Written, _Stale, an error or None."""
        start_revision, start_compacted = self.revision, self.compacted
        results: list[object] = []
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            for op in ops:
                results.append(self._apply(op))
            self.conn.execute("COMMIT")
        except sqlite3.Error as err:
            self._rollback()
            self.revision, self.compacted = start_revision, start_compacted
            failure = _write_failure(err)
            return [failure] * len(ops)
        return results

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")

    def _apply(self, op: _Op) -> object:
        if isinstance(op, _Put):
            return self._put(op)
        if isinstance(op, _Delete):
            return self._delete(op)
        return self._compact(op.revision)

    def _current(self, key: str) -> tuple[int, bytes] | None:
        return self.conn.execute(
            "SELECT l.id, l.value FROM current c JOIN log l ON l.id = c.id WHERE c.name = ?",
            (key,),
        ).fetchone()

    def _put(self, op: _Put) -> object:
        current = self._current(op.key)
        current_id = current[0] if current else 0
        if op.must_not_exist and current is not None:
            return KeyExistsError(op.key)
        if current_id != op.expected:
            return _Stale(current_id, current[1] if current else None)
        self.revision += 1
        rev, created = self.revision, int(current is None)
        self.conn.execute(
            "INSERT INTO log (id, name, created, deleted, prev_revision, value) "
            "VALUES (?, ?, ?, 0, ?, ?)",
            (rev, op.key, created, current_id, op.data),
        )
        self.conn.execute(
            "INSERT INTO current (name, id) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET id = excluded.id",
            (op.key, rev),
        )
        prev = None if created or op.prev_data is None else codec.decode(op.prev_data, current_id)
        event = WatchEvent(
            type=EventType.ADDED if created else EventType.MODIFIED,
            key=op.key,
            object=codec.decode(op.data, rev, op.key),
            revision=rev,
            prev_object=prev,
        )
        return _Written(rev, event)

    def _delete(self, op: _Delete) -> object:
        current = self._current(op.key)
        if current is None:
            return KeyNotFoundError(op.key)
        if current[0] != op.expected:
            return _Stale(current[0], current[1])
        self.revision += 1
        rev = self.revision
        self.conn.execute(
            "INSERT INTO log (id, name, created, deleted, prev_revision, value) "
            "VALUES (?, ?, 0, 1, ?, NULL)",
            (rev, op.key, op.expected),
        )
        self.conn.execute("DELETE FROM current WHERE name = ?", (op.key,))
        event = WatchEvent(
            type=EventType.DELETED,
            key=op.key,
            object=codec.decode(op.prev_data, rev, op.key),
            revision=rev,
            prev_object=codec.decode(op.prev_data, op.expected, op.key),
        )
        return _Written(rev, event)

    def _compact(self, revision: int) -> object:
        """Drop rows superseded before ``revision`` and tombstones older than it.

        What stays answers every read at a revision >= ``revision`` and every watch event
        after it, with its previous object (see the module docstring).
        """
        if revision <= self.compacted:
            return None
        if revision > self.revision:
            return FutureRevisionError(revision, self.revision)
        low = self.compacted
        self.conn.execute(
            "DELETE FROM log WHERE id IN (SELECT prev_revision FROM log "
            "WHERE id >= ? AND id < ? AND prev_revision > 0)",
            (low, revision),
        )
        self.conn.execute(
            "DELETE FROM log WHERE deleted = 1 AND id >= ? AND id < ?", (low, revision)
        )
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES ('compact_revision', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (revision,),
        )
        self.compacted = revision
        return None


def _write_failure(err: sqlite3.Error) -> StorageError:
    """The error every write of a failed transaction gets: nothing of it was written."""
    code = getattr(err, "sqlite_errorcode", None)
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StorageUnavailableError(f"the embedded store is busy: {err}")
    return StorageInternalError(f"the embedded store failed the write: {err}")


# ---------------------------------------------------------------------------------------------
# reads, on the reader threads


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: every query inside sees the same committed state."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def _meta(conn: sqlite3.Connection, key: str) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else 0


def _head(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT COALESCE(MAX(id), 0) FROM log").fetchone()[0]


def _read_current(conn: sqlite3.Connection, key: str) -> tuple[int, bytes] | None:
    return conn.execute(
        "SELECT l.id, l.value FROM current c JOIN log l ON l.id = c.id WHERE c.name = ?",
        (key,),
    ).fetchone()


def _range_rows(
    conn: sqlite3.Connection, start: str, end: str, revision: int, head: int, limit: int
) -> list[tuple[str, int, bytes]]:
    """Live keys in [start, end) as of ``revision``: (name, mod revision, value)."""
    if revision >= head:  # the present: the current table answers directly
        sql = (
            "SELECT c.name, l.id, l.value FROM current c JOIN log l ON l.id = c.id "
            "WHERE c.name >= ? AND c.name < ? ORDER BY c.name LIMIT ?"
        )
        return conn.execute(sql, (start, end, limit)).fetchall()
    sql = (
        "SELECT l.name, l.id, l.value FROM log l JOIN ("
        " SELECT MAX(id) AS id FROM log WHERE name >= ? AND name < ? AND id <= ? GROUP BY name"
        ") m ON l.id = m.id WHERE l.deleted = 0 ORDER BY l.name LIMIT ?"
    )
    return conn.execute(sql, (start, end, revision, limit)).fetchall()


def _count_rows(conn: sqlite3.Connection, start: str, end: str, revision: int, head: int) -> int:
    if revision >= head:
        sql = "SELECT COUNT(*) FROM current WHERE name >= ? AND name < ?"
        return conn.execute(sql, (start, end)).fetchone()[0]
    sql = (
        "SELECT COUNT(*) FROM log l JOIN ("
        " SELECT MAX(id) AS id FROM log WHERE name >= ? AND name < ? AND id <= ? GROUP BY name"
        ") m ON l.id = m.id WHERE l.deleted = 0"
    )
    return conn.execute(sql, (start, end, revision)).fetchone()[0]


def _event_from_row(row: tuple[Any, ...]) -> WatchEvent:
    rev, name, created, deleted, value, prev_value, prev_id = row
    if deleted:
        return WatchEvent(
            type=EventType.DELETED,
            key=name,
            object=codec.decode(prev_value, rev, name),
            revision=rev,
            prev_object=codec.decode(prev_value, prev_id, name),
        )
    prev = None if created or prev_value is None else codec.decode(prev_value, prev_id, name)
    return WatchEvent(
        type=EventType.ADDED if created else EventType.MODIFIED,
        key=name,
        object=codec.decode(value, rev, name),
        revision=rev,
        prev_object=prev,
    )


# ---------------------------------------------------------------------------------------------
# watches


class _LogWatcher:
    """One storage watch: replays the log from its revision, then follows live events.

    A watcher whose buffer is full falls back to reading the log (the log is its buffer), so
    a slow consumer neither blocks the publisher nor loses events.
    """

    def __init__(self, store: SQLiteStorage, prefix: str, revision: int, buffer: int) -> None:
        self.store = store
        self.prefix = prefix
        self.end = prefix_end(prefix)
        self.scanned = revision  # every event <= scanned for this prefix was delivered
        self.live = False
        self.queue = QueueWatch(buffer, on_stop=self._on_stop, on_progress=self.request_progress)
        self.task: asyncio.Task[None] | None = None
        self.progress_wanted = False

    def offer(self, event: WatchEvent) -> None:
        """A live event, on the loop, in revision order."""
        if self.queue.done or not event.key.startswith(self.prefix):
            return
        if self.queue.put_nowait(event):
            self.scanned = event.revision
            return
        self.live = False
        self.scanned = event.revision - 1
        self.start_catch_up()

    async def request_progress(self) -> None:
        """Bookmark the published revision; a lagging watcher bookmarks once caught up."""
        self.progress_wanted = True
        self.progress(self.store._published)

    def progress(self, revision: int) -> None:
        if self.live and not self.queue.full():
            self.progress_wanted = False
            self.queue.put_nowait(
                WatchEvent(type=EventType.BOOKMARK, key="", object=None, revision=revision)
            )

    def start_catch_up(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._catch_up())

    async def _catch_up(self) -> None:
        try:
            while not self.queue.done:
                target = self.store._published
                if self.scanned >= target:
                    self.live = True  # on the loop: no event can slip in between
                    if self.progress_wanted:
                        self.progress(target)
                    return
                events = await self.store._read(
                    self.store._events_between, self.prefix, self.scanned, target
                )
                for event in events:
                    if not await self.queue.put(event):
                        return
                self.scanned = events[-1].revision if len(events) == _CATCH_UP_CHUNK else target
        except StorageError as err:
            self.queue.finish(err)
            self.store._forget(self)
        except asyncio.CancelledError:
            raise

    def _on_stop(self) -> None:
        self.store._forget(self)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def close(self) -> None:
        self.queue.finish()
        if self.task is not None and not self.task.done():
            self.task.cancel()


# ---------------------------------------------------------------------------------------------
# the store


class SQLiteStorage:
    """The embedded store (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        compaction_interval: float = 60.0,
        retain_seconds: float = 300.0,
        retain_events: int = 10_000,
        progress_interval: float = 5.0,
        watch_buffer: int = 1024,
        max_page_count: int | None = None,
    ) -> None:
        self.path = Path(path)
        self._compaction_interval = compaction_interval
        self._retain_seconds = retain_seconds
        self._retain_events = retain_events
        self._progress_interval = progress_interval
        self._watch_buffer = watch_buffer
        self._max_page_count = max_page_count
        self._writer: _Writer | None = None
        self._loop_conn: sqlite3.Connection | None = None
        self._write_pool = ThreadPoolExecutor(1, thread_name_prefix="sqlite-write")
        self._read_pool = ThreadPoolExecutor(2, thread_name_prefix="sqlite-read")
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._pending: list[tuple[_Op, asyncio.Future[object]]] = []
        self._flushing = False
        self._flush_task: asyncio.Task[None] | None = None
        self._published = 0  # every revision <= this is committed and its event published
        self._watchers: set[_LogWatcher] = set()
        #: watchers by the resource their prefix lies in, so a write is offered to few
        self._by_resource: dict[str, set[_LogWatcher]] = {}
        self._broad: set[_LogWatcher] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._lock_fd: int | None = None
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._writer = await loop.run_in_executor(self._write_pool, self._open_writer)
        self._loop_conn = _connect(self.path, create=False)
        self._loop_conn.execute("PRAGMA query_only = ON")
        self._published = self._writer.revision
        self._samples.append((time.monotonic(), self._published))
        self._tasks = [
            loop.create_task(self._compaction_loop()),
            loop.create_task(self._progress_loop()),
        ]
        log.info(
            "embedded store opened",
            path=str(self.path),
            revision=self._published,
            compacted=self._writer.compacted,
        )

    def _open_writer(self) -> _Writer:
        self._take_lock()
        conn = _connect(self.path, create=True)
        try:
            _check_and_migrate(conn, self.path)
            conn.execute("PRAGMA synchronous = FULL")
            if self._max_page_count is not None:
                conn.execute(f"PRAGMA max_page_count = {int(self._max_page_count)}")
            revision = _head(conn)
            compacted = _meta(conn, "compact_revision")
        except sqlite3.Error as err:
            conn.close()
            raise StateDatabaseError(f"{self.path} cannot be used: {err}") from err
        except StorageError:
            conn.close()
            raise
        return _Writer(conn, revision, compacted)

    def _take_lock(self) -> None:
        """One gateway per data directory: two writers would corrupt the revision order."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            raise StateDatabaseError(
                f"{self.path} is in use by another gateway process (lock {lock_path})"
            ) from err
        self._lock_fd = fd

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for watcher in list(self._watchers):
            watcher.close()
        self._watchers.clear()
        self._by_resource.clear()
        self._broad.clear()
        if self._flush_task is not None:  # let the commit in flight finish
            await asyncio.gather(self._flush_task, return_exceptions=True)
        loop = asyncio.get_running_loop()
        if self._writer is not None:
            await loop.run_in_executor(self._write_pool, self._close_writer)
        self._write_pool.shutdown(wait=True)
        self._read_pool.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._read_conns:
                conn.close()
            self._read_conns.clear()
        if self._loop_conn is not None:
            self._loop_conn.close()
            self._loop_conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _close_writer(self) -> None:
        assert self._writer is not None
        with contextlib.suppress(sqlite3.Error):
            self._writer.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._writer.conn.close()

    # -- reads --------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path, create=False)
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._conns_lock:
                self._read_conns.append(conn)
        return conn

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._closed:
            raise StorageUnavailableError("the embedded store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._read_pool, fn, *args)
        except sqlite3.Error as err:
            raise StorageInternalError(f"the embedded store failed the read: {err}") from err

    def _get_row(self, key: str) -> tuple[int, bytes] | None:
        """The current (revision, value) of one key, read right here on the loop."""
        if self._closed or self._loop_conn is None:
            raise StorageUnavailableError("the embedded store is closed")
        try:
            return _read_current(self._loop_conn, key)
        except sqlite3.Error as err:
            raise StorageInternalError(f"the embedded store failed the read: {err}") from err

    async def get(self, key: str) -> Object:
        row = self._get_row(key)
        if row is None:
            raise KeyNotFoundError(key)
        return codec.decode(row[1], row[0], key)

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str = "",
        revision: int = 0,
        predicate: Predicate | None = None,
    ) -> ListResult:
        start = prefix
        if continue_token:
            token = continuetoken.decode(continue_token)
            start, revision = prefix + token.start_key, token.revision
        return await self._read(self._list_sync, prefix, start, limit, revision, predicate)

    def _list_sync(
        self, prefix: str, start: str, limit: int, revision: int, predicate: Predicate | None
    ) -> ListResult:
        conn = self._reader()
        end = prefix_end(prefix)
        with _snapshot(conn):
            head = _head(conn)
            revision = self._check_read_revision(conn, revision, head)
            items: list[Object] = []
            more, last = False, ""
            # one row past the page tells whether there is more; a predicate may drop rows,
            # so filtered pages read in larger chunks
            chunk = -1 if limit <= 0 else max(limit + 1, 256) if predicate else limit + 1
            while True:
                rows = _range_rows(conn, start, end, revision, head, chunk)
                for name, rev, value in rows:
                    if limit > 0 and len(items) == limit:
                        more = True
                        break
                    last = name
                    obj = codec.decode(value, rev, name)
                    if predicate is None or predicate(obj):
                        items.append(obj)
                if more or chunk < 0 or len(rows) < chunk:
                    break
                start = last + "\x00"
            result = ListResult(items=items, revision=revision)
            if more:
                result.continue_token = continuetoken.encode(revision, last[len(prefix):] + "\x00")
                if predicate is None:
                    result.remaining = _count_rows(conn, last + "\x00", end, revision, head)
            return result

    @staticmethod
    def _check_read_revision(conn: sqlite3.Connection, revision: int, head: int) -> int:
        if revision == 0:
            return head
        if revision > head:
            raise FutureRevisionError(revision, head)
        compacted = _meta(conn, "compact_revision")
        if revision < compacted:
            raise TooOldResourceVersionError(revision, compacted, head)
        return revision

    def _events_between(self, prefix: str, after: int, upto: int) -> builtins.list[WatchEvent]:
        conn = self._reader()
        with _snapshot(conn):
            compacted = _meta(conn, "compact_revision")
            if after + 1 < compacted:
                raise TooOldResourceVersionError(after, compacted, _head(conn))
            rows = conn.execute(
                "SELECT y.id, y.name, y.created, y.deleted, y.value, x.value, x.id "
                "FROM log y LEFT JOIN log x ON x.id = y.prev_revision "
                "WHERE y.id > ? AND y.id <= ? AND y.name >= ? AND y.name < ? "
                "ORDER BY y.id LIMIT ?",
                (after, upto, prefix, prefix_end(prefix), _CATCH_UP_CHUNK),
            ).fetchall()
        return [_event_from_row(row) for row in rows]

    async def current_revision(self) -> int:
        return self._published

    def _count_sync(self, prefix: str) -> int:
        conn = self._reader()
        sql = "SELECT COUNT(*) FROM current WHERE name >= ? AND name < ?"
        return conn.execute(sql, (prefix, prefix_end(prefix))).fetchone()[0]

    async def count(self, prefix: str) -> int:
        return await self._read(self._count_sync, prefix)

    async def check_health(self) -> None:
        if self._writer is None or self._closed:
            raise StorageUnavailableError("the embedded store is not open")
        await self._read(lambda: self._reader().execute("SELECT 1").fetchone())

    # -- writes -------------------------------------------------------------------------

    def _submit(self, op: _Op) -> asyncio.Future[object]:
        if self._closed or self._writer is None:
            raise StorageUnavailableError("the embedded store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()
        self._pending.append((op, future))
        if not self._flushing:
            self._flushing = True
            self._flush_task = loop.create_task(self._flush())
        return future

    async def _flush(self) -> None:
        """Commit pending writes batch after batch; one commit (one fsync) per batch."""
        loop = asyncio.get_running_loop()
        assert self._writer is not None
        try:
            while self._pending:
                batch, self._pending = self._pending[:_MAX_BATCH], self._pending[_MAX_BATCH:]
                ops = [op for op, _ in batch]
                try:
                    results = await loop.run_in_executor(
                        self._write_pool, self._writer.apply_batch, ops
                    )
                except Exception as err:  # the thread itself failed: nothing was committed
                    failure = StorageInternalError(f"the embedded store failed the write: {err}")
                    results = [failure] * len(ops)
                self._publish(results)
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._flushing = False

    def _publish(self, results: builtins.list[object]) -> None:
        for result in results:
            if isinstance(result, _Written):
                self._published = result.revision
                key = result.event.key
                for watcher in (*self._by_resource.get(_resource_of(key), ()), *self._broad):
                    if watcher.live:
                        watcher.offer(result.event)

    async def _write(self, op: _Op) -> object:
        result = await self._submit(op)
        if isinstance(result, Exception):
            raise result
        return result

    async def create(self, key: str, obj: Object) -> Object:
        data = codec.encode(obj)
        result = await self._write(_Put(key, data, 0, None, must_not_exist=True))
        assert isinstance(result, _Written)
        return codec.decode(data, result.revision, key)

    async def guaranteed_update(
        self,
        key: str,
        update: UpdateFunc,
        *,
        preconditions: Preconditions | None = None,
        ignore_not_found: bool = False,
        cached: tuple[int, bytes] | None = None,
    ) -> Object:
        # the row is read from the local database at once: a cached guess saves nothing
        async def swap(expected: int, data: bytes | None, new_data: bytes) -> cas.Outcome:
            return self._outcome(await self._write(_Put(key, new_data, expected, data)))

        return await cas.guaranteed_update(
            key, self._get_row(key), update, swap,
            preconditions=preconditions, ignore_not_found=ignore_not_found,
        )

    async def delete(
        self,
        key: str,
        *,
        preconditions: Preconditions | None = None,
        validate: Callable[[Object], Awaitable[None]] | None = None,
        cached: tuple[int, bytes] | None = None,
    ) -> Object:
        async def swap(expected: int, data: bytes) -> cas.Outcome:
            return self._outcome(await self._write(_Delete(key, expected, data)))

        return await cas.guaranteed_delete(
            key, self._get_row(key), swap, preconditions=preconditions, validate=validate
        )

    @staticmethod
    def _outcome(result: object) -> cas.Outcome:
        if isinstance(result, _Written):
            return True, result.revision
        assert isinstance(result, _Stale)
        return False, (result.revision, result.value) if result.value is not None else None

    async def compact(self, revision: int) -> None:
        await self._write(_Compact(revision))
        log.info("embedded store compacted", revision=revision)

    # -- watch --------------------------------------------------------------------------

    async def watch(self, prefix: str, *, revision: int | None = None) -> QueueWatch:
        if self._closed:
            raise StorageUnavailableError("the embedded store is closed")
        if revision is None:
            revision = self._published
        elif revision > self._published:
            raise FutureRevisionError(revision, self._published)
        else:
            compacted = self._writer.compacted if self._writer else 0
            if revision + 1 < compacted:
                raise TooOldResourceVersionError(revision, compacted, self._published)
        watcher = _LogWatcher(self, prefix, revision, self._watch_buffer)
        self._register(watcher)
        if revision >= self._published:
            watcher.live = True
        else:
            watcher.start_catch_up()
        return watcher.queue

    def _register(self, watcher: _LogWatcher) -> None:
        self._watchers.add(watcher)
        resource = _resource_of(watcher.prefix)
        if resource:
            self._by_resource.setdefault(resource, set()).add(watcher)
        else:
            self._broad.add(watcher)

    def _forget(self, watcher: _LogWatcher) -> None:
        self._watchers.discard(watcher)
        self._broad.discard(watcher)
        bucket = self._by_resource.get(_resource_of(watcher.prefix))
        if bucket is not None:
            bucket.discard(watcher)

    # -- background work ----------------------------------------------------------------

    async def _progress_loop(self) -> None:
        """Tell live watchers how far the store has come, so caches can bookmark it."""
        notified = self._published
        while True:
            await asyncio.sleep(self._progress_interval)
            if self._published == notified:
                continue
            notified = self._published
            for watcher in list(self._watchers):
                watcher.progress(notified)

    async def _compaction_loop(self) -> None:
        while True:
            await asyncio.sleep(self._compaction_interval)
            target = self._compaction_target(time.monotonic())
            if target and self._writer and target > self._writer.compacted:
                try:
                    await self.compact(target)
                except StorageError as err:
                    log.warning("embedded store compaction failed", error=str(err))

    def _compaction_target(self, now: float) -> int:
        """The newest revision that leaves the last retain_seconds and retain_events intact."""
        self._samples.append((now, self._published))
        old_enough = 0
        while self._samples and self._samples[0][0] <= now - self._retain_seconds:
            old_enough = self._samples.popleft()[1]
        if old_enough:  # keep the sample: it stays the boundary until a newer one ages
            self._samples.appendleft((now - self._retain_seconds, old_enough))
        return max(0, min(old_enough, self._published - self._retain_events))


def _resource_of(key: str) -> str:
    """The resource directory of a key or prefix (``/core/configmaps/``), or "" when it is
    shallower than that."""
    first = key.find("/", 1)
    second = key.find("/", first + 1) if first > 0 else -1
    return key[: second + 1] if second > 0 else ""


def _connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """Open ``path`` without ever creating over, or truncating, an existing file."""
    mode = "rwc" if create else "rw"
    try:
        conn = sqlite3.connect(
            f"file:{path}?mode={mode}", uri=True, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA busy_timeout = 5000")
    except sqlite3.Error as err:
        raise StateDatabaseError(f"{path} cannot be opened: {err}") from err
    return conn


def _check_and_migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a healthy gateway database; create the schema in a new one."""
    try:
        check = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as err:
        raise StateDatabaseError(f"{path} is not a usable SQLite database: {err}") from err
    if check != [("ok",)]:
        first = check[0][0] if check else "unknown"
        raise StateDatabaseError(f"{path} is corrupt ({first}); refusing to start")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if tables and not tables >= _OUR_TABLES:
        raise StateDatabaseError(f"{path} is a SQLite database, but not the gateway's state")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise StateDatabaseError(f"{path}: cannot switch to WAL journal mode (got {mode})")
    conn.executescript(_SCHEMA)
    version = _meta(conn, "schema_version")
    if version == 0:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
        )
    elif version != SCHEMA_VERSION:
        raise StateDatabaseError(
            f"{path} has schema version {version}; this gateway reads version {SCHEMA_VERSION}"
        )
