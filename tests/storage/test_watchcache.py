"""The watch cache in front of a real store: fan-out, resume, 410, bookmarks, slow watchers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.storage.errors import FutureRevisionError, TooOldResourceVersionError
from gateway.storage.interface import EventType
from gateway.storage.watchcache import Cacher, TimeBudget
from tests.storage.conftest import open_store
from tests.storage.helpers import P, drain, key
from tests.support.api import configmap, rv, sized_configmap


@pytest.fixture
async def sqlite_store(tmp_path) -> AsyncIterator[object]:
    store = await open_store("sqlite", tmp_path, None)
    try:
        yield store
    finally:
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
        created += await asyncio.gather(*(store.create(key(n), sized_configmap(n)) for n in chunk))
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


async def test_a_thousand_watchers_each_get_a_thousand_events_in_order(store):
    cacher = await started(store, watcher_buffer=100)
    try:
        watchers = [await cacher.watch_cached(P) for _ in range(1000)]
        consumers = [asyncio.create_task(collect(w, 1000, timeout=300)) for w in watchers]
        created = await create_many(store, [f"obj-{i:04d}" for i in range(1000)])
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
    told: list[str] = []  # what the gateway counts in apiserver_terminated_watchers_total
    cacher = await started(sqlite_store, watcher_buffer=50, budget=TimeBudget(0.1, 0.05),
                           on_terminated=told.append)
    try:
        stuck = await cacher.watch_cached(P)
        healthy = [await cacher.watch_cached(P) for _ in range(20)]
        consumers = [asyncio.create_task(collect(w, 400)) for w in healthy]
        created = await create_many(sqlite_store, [f"o{i:03d}" for i in range(400)], batch=50)
        results = await asyncio.gather(*consumers)
        expected = sorted(rv(c) for c in created)
        assert [[e.revision for e in events] for events in results] == [expected] * 20
        assert cacher.terminated_watchers == 1
        assert told == [P]
        assert stuck.closed
        buffered = await drain(stuck)  # what its buffer held, then the end
        assert [e.revision for e in buffered] == expected[:50]
    finally:
        await cacher.close()


async def test_watch_resumes_from_any_revision_in_the_window_and_older_is_gone(store):
    cacher = await started(store, window=10)
    try:
        created = await create_many(store, [f"o{i:02d}" for i in range(30)], batch=1)
        await cacher.wait_fresh(rv(created[-1]))
        for resume_from in (24, 19):  # 19: the oldest revision the window of 10 replays after
            watch = await cacher.watch_cached(P, revision=rv(created[resume_from]))
            events = await collect(watch, 29 - resume_from)
            assert [e.revision for e in events] == [rv(c) for c in created[resume_from + 1:]]
            watch.stop()
        with pytest.raises(TooOldResourceVersionError) as gone:
            await cacher.watch_cached(P, revision=rv(created[18]))
        assert (gone.value.requested, gone.value.compacted, gone.value.current) == (
            rv(created[18]), rv(created[19]), rv(created[29]))
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
        later = await sqlite_store.create(key("d"), sized_configmap("d"))
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
        await sqlite_store.create(key("x"), configmap("x", {"color": "red"}, namespace="default"))

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
        made = await sqlite_store.create(key("a"), sized_configmap("a"))
        await cacher.wait_fresh(rv(made))
        watch = await cacher.watch_cached(P, bookmarks=True)
        quiet = await cacher.watch_cached(P)
        event = await asyncio.wait_for(anext(watch), 30)
        assert (event.type, event.object, event.revision) == (EventType.BOOKMARK, None, rv(made))
        # both watchers were visited in the same round of the bookmark loop
        assert quiet.queue.qsize() == 0, "no bookmarks for a watcher that did not ask"
    finally:
        await cacher.close()


async def test_cached_reads_wait_until_fresh(store):
    cacher = await started(store, fresh_timeout=5)
    try:
        made = await store.create(key("a"), configmap("a", namespace="default", v="1"))
        listed = await cacher.list_cached(P, min_revision=rv(made))
        assert [o["metadata"]["name"] for o in listed.items] == ["a"]
        assert listed.revision >= rv(made)
        got = await cacher.get_cached(key("a"), min_revision=rv(made))
        assert got["data"] == {"v": "1"}
        # a revision written elsewhere in the store is reached through a progress request
        other = await store.create("/core/secrets/default/s", sized_configmap("s"))
        await cacher.wait_fresh(rv(other))
        assert cacher.revision >= rv(other)
    finally:
        await cacher.close()


async def test_a_revision_the_store_never_reaches_is_too_large(sqlite_store):
    cacher = await started(sqlite_store, fresh_timeout=0.3)
    try:
        with pytest.raises(FutureRevisionError) as future:
            await cacher.list_cached(P, min_revision=10_000)
        assert (future.value.requested, future.value.current) == (10_000, cacher.revision)
    finally:
        await cacher.close()


async def test_lists_and_initial_events_by_prefix_follow_creates_and_deletes(store):
    """The cache's ordered index of keys (what a namespace's list reads) against the store."""
    cacher = await started(store)
    try:
        for name in ("m", "c", "x", "a"):
            for ns in ("ab", "a", "b"):  # "a" is a prefix of "ab", not its namespace
                await store.create(key(name, ns), configmap(name, namespace=ns))
        await store.delete(key("c", "a"))
        await store.delete(key("m", "b"))
        await store.create(key("c", "a"), configmap("c", namespace="a"))
        last = await store.create(key("b", "b"), configmap("b", namespace="b"))
        for prefix in (P, f"{P}a/", f"{P}ab/", f"{P}b/", f"{P}c/"):
            expected = [o["metadata"] for o in (await store.list(prefix)).items]
            listed = await cacher.list_cached(prefix, min_revision=rv(last))
            assert [o["metadata"] for o in listed.items] == expected, prefix
            watch = await cacher.watch_cached(prefix, revision=0, send_initial=True)
            initial = [watch.next_nowait() for _ in expected]
            assert [e.object["metadata"] for e in initial] == expected, prefix
            assert watch.next_nowait() is None
            watch.stop()
    finally:
        await cacher.close()
