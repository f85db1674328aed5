"""The watch cache in front of a real store: fan-out, resume, 410, bookmarks, slow watchers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.storage.errors import FutureRevisionError, TooOldResourceVersionError
from gateway.storage.interface import EventType
from gateway.storage.watchcache import Cacher, TimeBudget
from tests.storage.conftest import open_store

P = "/core/configmaps/"


def cm(name: str, ns: str = "default", labels: dict | None = None, **data: str) -> dict:
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def key(name: str, ns: str = "default") -> str:
    return f"{P}{ns}/{name}"


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


@pytest.fixture(params=["sqlite", "etcd"])
async def backend(request, tmp_path) -> AsyncIterator[object]:
    etcd = request.getfixturevalue("etcd_server") if request.param == "etcd" else None
    store = await open_store(request.param, tmp_path, etcd)
    yield store
    await store.close()


@pytest.fixture
async def sqlite_store(tmp_path) -> AsyncIterator[object]:
    store = await open_store("sqlite", tmp_path, None)
    yield store
    await store.close()


async def started(store, **kwargs) -> Cacher:
    cacher = Cacher(store, P, **kwargs)
    await cacher.start()
    await cacher.wait_ready(10)
    return cacher


async def create_many(store, names: list[str], batch: int = 100) -> list[dict]:
    created = []
    for i in range(0, len(names), batch):
        chunk = names[i : i + batch]
        created += await asyncio.gather(*(store.create(key(n), cm(n)) for n in chunk))
    return created


async def collect(watch, count: int, timeout: float = 60) -> list:
    got = []

    async def run():
        async for event in watch:
            if event.type != EventType.BOOKMARK:
                got.append(event)
                if len(got) == count:
                    return

    await asyncio.wait_for(run(), timeout)
    return got


async def test_a_thousand_watchers_each_get_a_thousand_events_in_order(backend):
    cacher = await started(backend, watcher_buffer=100)
    try:
        watchers = [await cacher.watch_cached(P) for _ in range(1000)]
        consumers = [asyncio.create_task(collect(w, 1000, timeout=300)) for w in watchers]
        created = await create_many(backend, [f"obj-{i:04d}" for i in range(1000)])
        expected = sorted(rv(c) for c in created)
        results = await asyncio.gather(*consumers)
        for events in results:
            assert [e.revision for e in events] == expected
        assert cacher.terminated_watchers == 0
        for w in watchers:
            w.stop()
        assert cacher.watcher_count == 0
    finally:
        await cacher.close()


async def test_a_watcher_that_never_reads_is_dropped_without_holding_up_the_others(sqlite_store):
    cacher = await started(sqlite_store, watcher_buffer=50, budget=TimeBudget(0.1, 0.05))
    try:
        stuck = await cacher.watch_cached(P)
        healthy = [await cacher.watch_cached(P) for _ in range(20)]
        consumers = [asyncio.create_task(collect(w, 400)) for w in healthy]
        created = await create_many(sqlite_store, [f"o{i:03d}" for i in range(400)], batch=50)
        results = await asyncio.gather(*consumers)
        expected = sorted(rv(c) for c in created)
        assert all([e.revision for e in events] == expected for events in results)
        assert cacher.terminated_watchers == 1
        assert stuck.closed
        buffered = [e async for e in stuck]  # what it had buffered, then the end
        assert len(buffered) <= 50
        assert [e.revision for e in buffered] == expected[: len(buffered)]
    finally:
        await cacher.close()


async def test_watch_resumes_from_any_revision_in_the_window_and_older_is_gone(backend):
    cacher = await started(backend, window=10)
    try:
        created = await create_many(backend, [f"o{i:02d}" for i in range(30)], batch=1)
        await cacher.wait_fresh(rv(created[-1]))
        resume_from = rv(created[24])
        watch = await cacher.watch_cached(P, revision=resume_from)
        events = await collect(watch, 5)
        assert [e.revision for e in events] == [rv(c) for c in created[25:]]
        watch.stop()
        with pytest.raises(TooOldResourceVersionError):
            await cacher.watch_cached(P, revision=rv(created[5]))
    finally:
        await cacher.close()


async def test_initial_events_then_the_end_bookmark_then_live_events(sqlite_store):
    created = await create_many(sqlite_store, ["a", "b", "c"])
    cacher = await started(sqlite_store)
    try:
        watch = await cacher.watch_cached(P, revision=0, send_initial=True, bookmarks=True,
                                          mark_initial_end=True)
        first = [await anext(watch) for _ in range(4)]
        assert [(e.type, e.key) for e in first[:3]] == [
            (EventType.ADDED, key("a")),
            (EventType.ADDED, key("b")),
            (EventType.ADDED, key("c")),
        ]
        end = first[3]
        assert end.type == EventType.BOOKMARK and end.initial_events_end
        assert end.revision == rv(created[-1])
        later = await sqlite_store.create(key("d"), cm("d"))
        event = await asyncio.wait_for(anext(watch), 10)
        assert (event.type, event.revision) == (EventType.ADDED, rv(later))
        watch.stop()
    finally:
        await cacher.close()


async def test_objects_entering_and_leaving_a_selector(sqlite_store):
    cacher = await started(sqlite_store)
    try:

        def blue(obj):
            return obj["metadata"].get("labels", {}).get("color") == "blue"

        watch = await cacher.watch_cached(P, predicate=blue)
        await sqlite_store.create(key("x"), cm("x", labels={"color": "red"}))

        async def paint(color):
            async def update(cur):
                return {**cur, "metadata": {**cur["metadata"], "labels": {"color": color}}}

            return await sqlite_store.guaranteed_update(key("x"), update)

        turned_blue = await paint("blue")
        turned_red = await paint("red")
        events = await collect(watch, 2)
        assert [(e.type, e.revision) for e in events] == [
            (EventType.ADDED, rv(turned_blue)),
            (EventType.DELETED, rv(turned_red)),
        ]
        assert events[1].object["metadata"]["labels"] == {"color": "blue"}
        assert rv(events[1].object) == rv(turned_red)
        watch.stop()
    finally:
        await cacher.close()


async def test_bookmarks_carry_the_cache_revision(sqlite_store):
    cacher = await started(sqlite_store, bookmark_interval=0.2)
    try:
        made = await sqlite_store.create(key("a"), cm("a"))
        watch = await cacher.watch_cached(P, bookmarks=True)
        quiet = await cacher.watch_cached(P)
        event = await asyncio.wait_for(anext(watch), 10)
        assert event.type == EventType.BOOKMARK and event.revision >= rv(made)
        assert quiet.queue.qsize() == 0, "no bookmarks for a watcher that did not ask"
    finally:
        await cacher.close()


async def test_cached_reads_wait_until_fresh(backend):
    cacher = await started(backend, fresh_timeout=5)
    try:
        made = await backend.create(key("a"), cm("a", v="1"))
        listed = await cacher.list_cached(P, min_revision=rv(made))
        assert [o["metadata"]["name"] for o in listed.items] == ["a"]
        assert listed.revision >= rv(made)
        got = await cacher.get_cached(key("a"), min_revision=rv(made))
        assert got["data"] == {"v": "1"}
        # a revision written elsewhere in the store is reached through a progress request
        other = await backend.create("/core/secrets/default/s", cm("s"))
        await cacher.wait_fresh(rv(other))
        assert cacher.revision >= rv(other)
    finally:
        await cacher.close()


async def test_a_revision_the_store_never_reaches_is_too_large(sqlite_store):
    cacher = await started(sqlite_store, fresh_timeout=0.3)
    try:
        with pytest.raises(FutureRevisionError):
            await cacher.list_cached(P, min_revision=10_000)
    finally:
        await cacher.close()
