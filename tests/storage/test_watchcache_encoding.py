"""The watch cache's shared encodings (gateway/storage/cachedobject.py): each object version is
encoded once, with its own resourceVersion, and that encoding is what lists, live events, the
window's replays and initial events carry; dicts kept for in-process readers follow every
change; a reader that changes a shared object is found."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from gateway.storage import codec
from gateway.storage.cachedobject import CachedObject
from gateway.storage.interface import EventType, ListResult, WatchEvent
from gateway.storage.watchcache import Cacher
from tests.storage.conftest import open_store
from tests.storage.helpers import P, changes, key
from tests.support.api import configmap, rv


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


def with_data(**data: str):
    async def update(current: dict[str, Any]) -> dict[str, Any]:
        return {**current, "data": data}

    return update


def sent(cached: CachedObject | None) -> Any:
    """What a JSON answer that splices ``cached`` says the object is."""
    assert cached is not None
    return orjson.loads(cached.data)


async def test_every_version_is_encoded_with_its_own_resource_version(store):
    cacher = await started(store)
    try:
        live = await cacher.watch_cached(P)
        a1 = await store.create(key("a"), configmap("a", namespace="default", v="1"))
        b1 = await store.create(key("b"), configmap("b", namespace="default", v="1"))
        a2 = await store.guaranteed_update(key("a"), with_data(v="2"))
        gone = await store.delete(key("b"))
        c1 = await store.create(key("c"), configmap("c", namespace="default", v="1"))
        a3 = await store.guaranteed_update(key("a"), with_data(v="3"))

        listed = await cacher.list_cached(P, min_revision=rv(a3))
        assert listed.encoded is not None
        assert [sent(cached) for cached in listed.encoded] == [a3, c1]
        assert listed.items == [a3, c1]

        expected = [(EventType.ADDED, b1, None), (EventType.MODIFIED, a2, a1),
                    (EventType.DELETED, gone, b1), (EventType.ADDED, c1, None),
                    (EventType.MODIFIED, a3, a2)]
        # as they happened (the storage's dicts and the cache's encodings), and as the window
        # replays them to a watch that resumes after a1
        for events in (await changes(live, 6), await changes(
                await cacher.watch_cached(P, revision=rv(a1)), 5)):
            events = [e for e in events if e.key != key("a") or e.revision != rv(a1)]
            assert [(e.type, sent(e.encoded), e.prev_encoded and sent(e.prev_encoded))
                    for e in events] == expected
            assert [(e.object, e.prev_object) for e in events] == [
                (obj, prev) for _, obj, prev in expected]
            assert [e.revision for e in events] == [rv(obj) for _, obj, _ in expected]

        initial = await cacher.watch_cached(P, revision=0, send_initial=True)
        events = await changes(initial, 2)
        assert [(e.type, e.revision, sent(e.encoded)) for e in events] == [
            (EventType.ADDED, rv(a3), a3), (EventType.ADDED, rv(c1), c1)]
    finally:
        await cacher.close()


async def test_selectors_read_decoded_objects_and_send_the_encoding(sqlite_store):
    cacher = await started(sqlite_store)
    try:
        def wanted(obj):
            return obj["data"].get("v") == "yes"

        await sqlite_store.create(key("a"), configmap("a", namespace="default", v="yes"))
        await sqlite_store.create(key("b"), configmap("b", namespace="default", v="no"))
        a2 = await sqlite_store.guaranteed_update(key("a"), with_data(v="yes", w="2"))
        listed = await cacher.list_cached(P, predicate=wanted, min_revision=rv(a2))
        assert listed.encoded is not None
        assert [sent(cached) for cached in listed.encoded] == [a2]
        initial = await cacher.watch_cached(P, revision=0, send_initial=True, predicate=wanted)
        assert [sent(e.encoded) for e in await changes(initial, 1)] == [a2]
    finally:
        await cacher.close()


async def test_objects_kept_for_in_process_readers_follow_every_change(store):
    cacher = await started(store)
    try:
        await store.create(key("a"), configmap("a", namespace="default", v="1"))
        b = await store.create(key("b"), configmap("b", namespace="default", v="1"))
        await cacher.wait_fresh(rv(b))
        assert sorted(o["metadata"]["name"] for o in cacher.objects()) == ["a", "b"]
        # from now on every version is kept decoded as it arrives
        a2 = await store.guaranteed_update(key("a"), with_data(v="2"))
        await store.delete(key("b"))
        c = await store.create(key("c"), configmap("c", namespace="default", v="1"))
        await cacher.wait_fresh(rv(c))
        assert sorted((o["metadata"]["name"], o["data"]["v"], rv(o))
                      for o in cacher.objects()) == [("a", "2", rv(a2)), ("c", "1", rv(c))]
        assert await cacher.get_cached(key("a")) == a2
        listed = await cacher.list_cached(P)
        assert listed.encoded is not None
        assert [sent(cached) for cached in listed.encoded] == listed.items == [a2, c]
    finally:
        await cacher.close()


async def test_an_object_read_in_process_stays_decoded_through_its_changes(store):
    cacher = await started(store)
    try:
        made = await store.create(key("a"), configmap("a", namespace="default", v="1"))
        other = await store.create(key("b"), configmap("b", namespace="default", v="1"))
        first = await cacher.get_cached(key("a"), min_revision=rv(other))
        assert first == made
        assert await cacher.get_cached(key("a")) is first  # one shared dict
        changed = await store.guaranteed_update(key("a"), with_data(v="2"))
        second = await cacher.get_cached(key("a"), min_revision=rv(changed))
        assert second == changed
        assert await cacher.get_cached(key("a")) is second
        # an object nobody read in process is not kept decoded: a new dict each time
        assert await cacher.get_cached(key("b")) == other
        listed = await cacher.list_cached(P)
        assert [sent(cached) for cached in listed.encoded or []] == [changed, other]
    finally:
        await cacher.close()


async def test_a_reader_that_changes_a_shared_object_is_found(sqlite_store):
    cacher = await started(sqlite_store)
    cacher.verify_shared = True
    try:
        made = await sqlite_store.create(key("a"), configmap("a", namespace="default", v="1"))
        shared = await cacher.get_cached(key("a"), min_revision=rv(made))
        shared["data"]["v"] = "changed by a reader"
        changed = await sqlite_store.guaranteed_update(key("a"), with_data(v="2"))
        await cacher.wait_fresh(rv(changed))
        assert cacher.changed_shared_objects == 1
        # untouched objects pass; what is still held is checked when the cache closes
        await sqlite_store.guaranteed_update(key("a"), with_data(v="3"))
        made = await sqlite_store.create(key("b"), configmap("b", namespace="default"))
        await cacher.wait_fresh(rv(made))
        assert cacher.changed_shared_objects == 1
        cacher.objects()[0]["metadata"]["labels"] = {"changed": "yes"}
    finally:
        await cacher.close()
    assert cacher.changed_shared_objects == 2


# -- the values that carry encodings -----------------------------------------------------------


def test_a_list_result_whose_items_are_replaced_no_longer_carries_their_encodings():
    stored = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}}
    result = ListResult(encoded=[CachedObject.encode(stored, 1)], revision=1)
    assert result.items == [stored]
    assert result.encoded is not None
    result.items = [{**stored, "apiVersion": "v2"}]  # converted, say
    assert result.encoded is None
    assert result.items == [{**stored, "apiVersion": "v2"}]
    assert ListResult(items=[stored], revision=1).encoded is None


def test_an_event_decodes_its_object_only_when_read():
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "7"}}
    cached = CachedObject.encode(obj, 7)
    event = WatchEvent(EventType.ADDED, key("a"), None, 7, encoded=cached)
    assert event._object is None
    assert event.object == obj
    assert event.object is event.object  # decoded once per event
    assert WatchEvent(EventType.ADDED, key("a"), None, 7).object is None


def test_kept_bytes_hold_only_their_length():
    obj = configmap("a", namespace="default", v="x" * 1300)
    cached = CachedObject.encode(obj, 1)
    assert cached.data == codec.dumps(obj)
    assert not cached.kept
    assert cached.decode() == obj and cached.decode() is not cached.decode()
    assert CachedObject.encode(obj, 1, keep=True).decode() is obj


@pytest.mark.parametrize("splice", [True, False])
def test_spliced_items_write_the_json_their_objects_would(monkeypatch, splice):
    items = [configmap(f"c{i}", namespace="default", v="é\u2028" * i) for i in range(3)]
    if not splice:  # plain json, or an orjson without Fragment
        monkeypatch.setattr(codec, "_Fragment", None)
    listed = {"kind": "ConfigMapList", "items": codec.embedded([codec.dumps(i) for i in items])}
    assert orjson.loads(codec.dumps(listed)) == {"kind": "ConfigMapList", "items": items}
    if splice:
        assert codec.dumps(listed) == codec.dumps({"kind": "ConfigMapList", "items": items})


def label_predicate(selector: str):
    """A predicate as the REST store makes for a label selector: ``on_labels`` answers from
    the labels; the object form must not be needed (it fails the test if called)."""
    from gateway.apimachinery.labels import parse_label_selector

    labels = parse_label_selector(selector)

    def on_object(obj: dict) -> bool:
        raise AssertionError("the cache decoded an object to answer a label selector")

    on_object.on_labels = labels.matches  # type: ignore[attr-defined]
    return on_object


async def test_label_selectors_are_answered_from_each_versions_labels(store):
    cacher = await started(store)
    try:
        await store.create(key("a"), configmap("a", {"app": "one"}, namespace="default"))
        await store.create(key("b"), configmap("b", {"app": "two"}, namespace="default"))
        await store.create(key("c"), configmap("c", namespace="default"))
        relabel = await store.guaranteed_update(key("b"), _relabelled({"app": "one"}))
        await cacher.wait_fresh(rv(relabel))
        listed = await cacher.list_cached(P, predicate=label_predicate("app=one"))
        assert [sent(c)["metadata"]["name"] for c in listed.encoded] == ["a", "b"]
        none = await cacher.list_cached(P, predicate=label_predicate("app"))
        assert len(none.encoded) == 2
        watch = await cacher.watch_cached(P, predicate=label_predicate("!app"),
                                          send_initial=True)
        first = await watch.__anext__()
        assert first.key == key("c")
        watch.stop()
    finally:
        await cacher.close()


def _relabelled(labels: dict[str, str]):
    async def update(current: dict[str, Any]) -> dict[str, Any]:
        return {**current, "metadata": {**current["metadata"], "labels": labels}}

    return update
