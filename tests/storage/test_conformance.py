"""One conformance suite for every storage backend (design §2), run on SQLite and real etcd."""

from __future__ import annotations

import asyncio

import pytest

from gateway.storage.errors import (
    ConflictError,
    FutureRevisionError,
    InvalidContinueError,
    KeyExistsError,
    KeyNotFoundError,
    TooOldResourceVersionError,
)
from gateway.storage.interface import EventType, Preconditions
from tests.storage.helpers import P, changes, expect_next_is_only, key, next_change
from tests.support.api import configmap, rv
from tests.support.wait import eventually_async

# -- create / get -------------------------------------------------------------------------


async def test_create_then_get_returns_the_object_with_its_revision(store):
    created = await store.create(key("a"), configmap("a", x="1"))
    assert rv(created) > 0
    assert created["data"] == {"x": "1"}
    got = await store.get(key("a"))
    assert got == created
    assert await store.current_revision() == rv(created)


async def test_create_ignores_a_resource_version_in_the_input(store):
    obj = configmap("a")
    obj["metadata"]["resourceVersion"] = "999999"
    created = await store.create(key("a"), obj)
    assert rv(created) == await store.current_revision()
    assert await store.get(key("a")) == created
    assert obj["metadata"]["resourceVersion"] == "999999", "the caller's dict is untouched"


async def test_create_of_an_existing_key_is_already_exists_and_keeps_the_first(store):
    first = await store.create(key("a"), configmap("a", v="first"))
    with pytest.raises(KeyExistsError) as exists:
        await store.create(key("a"), configmap("a", v="second"))
    assert (str(exists.value), exists.value.key) == (f"key exists: {key('a')}", key("a"))
    assert await store.get(key("a")) == first


async def test_get_of_a_missing_key_is_not_found(store):
    with pytest.raises(KeyNotFoundError) as missing:
        await store.get(key("missing"))
    assert (str(missing.value), missing.value.key) == (
        f"key not found: {key('missing')}", key("missing"))


async def test_revisions_increase_with_every_write(store):
    revs = [rv(await store.create(key(f"k{i}"), configmap(f"k{i}"))) for i in range(5)]
    assert revs == sorted(revs) and len(set(revs)) == 5


# -- list ---------------------------------------------------------------------------------


async def test_list_returns_keys_under_the_prefix_in_key_order(store):
    for name in ["b", "a", "c"]:
        await store.create(key(name), configmap(name))
    await store.create(key("x", ns="other"), configmap("x", namespace="other"))
    await store.create("/core/secrets/default/s", configmap("s"))
    result = await store.list(P + "default/")
    assert [o["metadata"]["name"] for o in result.items] == ["a", "b", "c"]
    assert result.continue_token == ""
    everything = await store.list(P)
    assert [o["metadata"]["name"] for o in everything.items] == ["a", "b", "c", "x"]
    assert everything.revision == await store.current_revision()
    assert await store.count(P) == 4


async def test_list_of_an_empty_prefix_has_the_current_revision(store):
    await store.create(key("a"), configmap("a"))
    result = await store.list("/nothing/here/")
    assert result.items == []
    assert result.revision == await store.current_revision()


async def test_paged_list_is_a_consistent_snapshot_while_writes_go_on(store):
    names = [f"obj-{i:03d}" for i in range(50)]
    for name in names:
        await store.create(key(name), configmap(name, v="original"))

    first = await store.list(P, limit=7)
    snapshot_rev = first.revision
    assert len(first.items) == 7
    assert first.continue_token

    # A writer runs beside the pager. Each of its rounds writes where the pager has not read
    # yet: a new key after the last name, and a change to one of the last seven names.
    rounds = 0
    stop = asyncio.Event()

    async def writer() -> None:
        nonlocal rounds
        while not stop.is_set():
            await store.create(key(f"obj-049-new-{rounds:04d}"),
                               configmap(f"obj-049-new-{rounds:04d}"))

            async def change(cur, i=rounds):
                return {**cur, "data": {"v": f"changed-{i}"}}

            await store.guaranteed_update(key(names[-1 - rounds % 7]), change)
            rounds += 1

    task = asyncio.create_task(writer())
    try:
        pages, token = [first], first.continue_token
        while token:
            # a round completed since the last page: a write between every two pages
            before = rounds
            await eventually_async(lambda before=before: rounds > before,
                                   what="another round of writes")
            page = await store.list(P, limit=7, continue_token=token)
            assert page.revision == snapshot_rev, "every page is read at the first page's revision"
            pages.append(page)
            token = page.continue_token
    finally:
        stop.set()
        await task

    assert rounds >= len(pages) - 1 >= 7, "the last seven names changed before their page"
    assert [len(page.items) for page in pages] == [7] * 7 + [1]
    assert [page.remaining for page in pages] == [43, 36, 29, 22, 15, 8, 1, None]
    items = [o for page in pages for o in page.items]
    assert [o["metadata"]["name"] for o in items] == names
    assert [o["data"] for o in items] == [{"v": "original"}] * 50
    assert all(rv(o) <= snapshot_rev for o in items)
    # the present has moved on: what the snapshot hid is there now
    now = await store.list(P)
    assert len(now.items) == 50 + rounds
    assert now.revision > snapshot_rev


async def test_paged_list_with_a_predicate_fills_pages_with_matches(store):
    for i in range(30):
        await store.create(key(f"o{i:02d}"), configmap(f"o{i:02d}", parity=str(i % 2)))

    def even(obj):
        return obj["data"]["parity"] == "0"

    pages, token = [], ""
    while True:
        page = await store.list(P, limit=4, continue_token=token, predicate=even)
        assert page.remaining is None
        pages.append([o["metadata"]["name"] for o in page.items])
        token = page.continue_token
        if not token:
            break
    evens = [f"o{i:02d}" for i in range(0, 30, 2)]
    assert pages == [evens[0:4], evens[4:8], evens[8:12], evens[12:]]


async def test_list_at_an_older_revision_shows_that_state(store):
    a = await store.create(key("a"), configmap("a", v="1"))

    async def bump(cur):
        return {**cur, "data": {"v": "2"}}

    await store.guaranteed_update(key("a"), bump)
    await store.create(key("b"), configmap("b"))
    old = await store.list(P, revision=rv(a))
    assert [(o["metadata"]["name"], o["data"]) for o in old.items] == [("a", {"v": "1"})]
    assert old.revision == rv(a)


async def test_list_at_a_future_revision_is_refused(store):
    await store.create(key("a"), configmap("a"))
    head = await store.current_revision()
    with pytest.raises(FutureRevisionError) as future:
        await store.list(P, revision=head + 1000)
    assert (future.value.requested, future.value.current) == (head + 1000, head)


async def test_a_malformed_continue_token_is_invalid(store):
    with pytest.raises(InvalidContinueError, match=r"^continue key is not valid$"):
        await store.list(P, limit=1, continue_token="not-a-token")


# -- guaranteed update ----------------------------------------------------------------------


async def test_fifty_concurrent_writers_lose_no_update(store):
    await store.create(key("counter"), configmap("counter", n="0"))

    async def increment(cur):
        # every writer reads the same revision before any swaps: all but one must retry
        await asyncio.sleep(0)
        return {**cur, "data": {"n": str(int(cur["data"]["n"]) + 1)}}

    results = await asyncio.gather(
        *(store.guaranteed_update(key("counter"), increment) for _ in range(50))
    )
    final = await store.get(key("counter"))
    assert final["data"]["n"] == "50"
    assert sorted(int(r["data"]["n"]) for r in results) == list(range(1, 51))
    assert len({rv(r) for r in results}) == 50


async def test_update_of_a_missing_key_is_not_found_unless_allowed(store):
    async def make(cur):
        assert cur is None
        return configmap("fresh", v="made")

    with pytest.raises(KeyNotFoundError, match=r"^key not found: /core/configmaps/default/fresh$"):
        await store.guaranteed_update(key("fresh"), make)
    with pytest.raises(KeyNotFoundError):
        await store.get(key("fresh"))
    made = await store.guaranteed_update(key("fresh"), make, ignore_not_found=True)
    assert (await store.get(key("fresh"))) == made


async def test_a_no_op_update_writes_nothing_and_sends_no_event(store):
    created = await store.create(key("a"), configmap("a", v="1"))
    watch = await store.watch(P, revision=rv(created))
    try:

        async def same(cur):
            return dict(cur)

        result = await store.guaranteed_update(key("a"), same)
        assert rv(result) == rv(created)
        assert await store.current_revision() == rv(created)
        await expect_next_is_only(store, watch)
    finally:
        watch.stop()


def with_uid(obj: dict, uid: str) -> dict:
    obj["metadata"]["uid"] = uid
    return obj


async def test_update_preconditions_are_checked(store):
    created = await store.create(key("a"), with_uid(configmap("a", v="1"), "uid-a"))

    async def change(cur):
        return {**cur, "data": {"v": "2"}}

    stale = str(rv(created) + 1)
    with pytest.raises(ConflictError) as conflict:
        await store.guaranteed_update(
            key("a"), change, preconditions=Preconditions(resource_version=stale)
        )
    assert str(conflict.value) == (
        f"Precondition failed: ResourceVersion in precondition: {stale}, "
        f"ResourceVersion in object meta: {rv(created)}")
    with pytest.raises(ConflictError) as conflict:
        await store.guaranteed_update(key("a"), change, preconditions=Preconditions(uid="nope"))
    assert str(conflict.value) == (
        "Precondition failed: UID in precondition: nope, UID in object meta: uid-a")
    assert await store.get(key("a")) == created
    updated = await store.guaranteed_update(
        key("a"),
        change,
        preconditions=Preconditions(uid="uid-a", resource_version=str(rv(created))),
    )
    assert updated["data"] == {"v": "2"}


async def test_an_update_function_that_raises_writes_nothing(store):
    created = await store.create(key("a"), configmap("a", v="1"))

    async def refuse(cur):
        raise ValueError("no")

    with pytest.raises(ValueError, match=r"^no$"):
        await store.guaranteed_update(key("a"), refuse)
    assert await store.get(key("a")) == created


# -- delete ---------------------------------------------------------------------------------


async def test_delete_with_a_stale_precondition_is_a_conflict(store):
    created = await store.create(key("a"), with_uid(configmap("a", v="1"), "uid-a"))

    async def change(cur):
        return {**cur, "data": {"v": "2"}}

    updated = await store.guaranteed_update(key("a"), change)
    with pytest.raises(ConflictError) as conflict:
        await store.delete(key("a"), preconditions=Preconditions(resource_version=str(rv(created))))
    assert str(conflict.value) == (
        f"Precondition failed: ResourceVersion in precondition: {rv(created)}, "
        f"ResourceVersion in object meta: {rv(updated)}")
    with pytest.raises(ConflictError, match="UID in precondition: someone-else, UID in object"):
        await store.delete(key("a"), preconditions=Preconditions(uid="someone-else"))
    assert await store.get(key("a")) == updated


async def test_delete_returns_the_last_state_at_the_deletion_revision(store):
    created = await store.create(key("a"), with_uid(configmap("a", v="1"), "uid-a"))
    deleted = await store.delete(key("a"), preconditions=Preconditions(uid="uid-a"))
    assert deleted["data"] == {"v": "1"}
    assert rv(deleted) > rv(created)
    assert rv(deleted) == await store.current_revision()
    with pytest.raises(KeyNotFoundError):
        await store.get(key("a"))
    with pytest.raises(KeyNotFoundError):
        await store.delete(key("a"))
    recreated = await store.create(key("a"), configmap("a", v="again"))
    assert recreated["data"] == {"v": "again"}


async def test_delete_validation_can_refuse(store):
    created = await store.create(key("a"), configmap("a"))

    async def refuse(cur):
        raise PermissionError("kept")

    with pytest.raises(PermissionError, match=r"^kept$"):
        await store.delete(key("a"), validate=refuse)
    assert await store.get(key("a")) == created


# -- watch ----------------------------------------------------------------------------------


async def test_watch_from_a_revision_replays_in_order_exactly_once(store):
    start = await store.create(key("before"), configmap("before"))
    a1 = await store.create(key("a"), configmap("a", v="1"))

    async def bump(cur):
        return {**cur, "data": {"v": "2"}}

    a2 = await store.guaranteed_update(key("a"), bump)
    b = await store.create(key("b", ns="other"), configmap("b", namespace="other"))
    gone = await store.delete(key("a"))
    await store.create("/core/secrets/default/elsewhere", configmap("elsewhere"))

    watch = await store.watch(P, revision=rv(start))
    try:
        events = await changes(watch, 4)
        assert [(e.type, e.key) for e in events] == [
            (EventType.ADDED, key("a")),
            (EventType.MODIFIED, key("a")),
            (EventType.ADDED, key("b", ns="other")),
            (EventType.DELETED, key("a")),
        ]
        assert [e.revision for e in events] == [rv(a1), rv(a2), rv(b), rv(gone)]
        assert [rv(e.object) for e in events] == [rv(a1), rv(a2), rv(b), rv(gone)]
        added, modified, _, deleted = events
        assert added.prev_object is None
        assert modified.object["data"] == {"v": "2"}
        assert modified.prev_object["data"] == {"v": "1"}
        assert rv(modified.prev_object) == rv(a1)
        assert deleted.object["data"] == {"v": "2"}
        assert deleted.prev_object["data"] == {"v": "2"}

        live = await store.create(key("c"), configmap("c"))
        event = await next_change(watch)
        assert (event.type, event.key, event.revision) == (EventType.ADDED, key("c"), rv(live))
        await expect_next_is_only(store, watch)
    finally:
        watch.stop()


async def test_watch_from_now_sees_only_later_changes(store):
    await store.create(key("old"), configmap("old"))
    watch = await store.watch(P)
    try:
        # "old" is not replayed: the first change the watch gives is the next write
        new = await store.create(key("new"), configmap("new"))
        event = await next_change(watch)
        assert (event.type, event.key, event.revision) == (EventType.ADDED, key("new"), rv(new))
    finally:
        watch.stop()


async def test_a_watch_after_a_list_misses_nothing_written_between_them(store):
    """What a watch cache does: list, then watch after the list's revision. On a store that
    has never been written that revision is 0, which must mean "after 0", not "from now":
    a write landing between the two would otherwise be lost to the cache for good."""
    listed = await store.list(P)
    made = await store.create(key("between"), configmap("between"))
    watch = await store.watch(P, revision=listed.revision)
    try:
        event = await next_change(watch)
        assert (event.type, event.key, event.revision) == (EventType.ADDED, key("between"),
                                                           rv(made))
    finally:
        watch.stop()


async def test_concurrent_writes_reach_a_watcher_in_revision_order(store):
    watch = await store.watch(P)
    try:
        writes = (store.create(key(f"k{i}"), configmap(f"k{i}")) for i in range(40))
        created = await asyncio.gather(*writes)
        events = await changes(watch, 40)
        assert [e.revision for e in events] == sorted(rv(c) for c in created)
    finally:
        watch.stop()


async def test_a_watcher_that_reads_late_still_gets_every_event(store):
    watch = await store.watch(P)
    try:
        total = 2500  # more than any watch buffer
        for start in range(0, total, 100):
            names = [f"k{i:05d}" for i in range(start, start + 100)]
            await asyncio.gather(*(store.create(key(n), configmap(n)) for n in names))
        events = await changes(watch, total, timeout=30)
        revisions = [e.revision for e in events]
        assert revisions == sorted(revisions) and len(set(revisions)) == total
        assert {e.key for e in events} == {key(f"k{i:05d}") for i in range(total)}
    finally:
        watch.stop()


async def test_stopping_a_watch_ends_its_iteration(store):
    watch = await store.watch(P)
    watch.stop()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(watch.__anext__(), 5)


# -- compaction -----------------------------------------------------------------------------


async def test_compacted_revisions_are_too_old_for_watch_list_and_continue(store):
    first = await store.create(key("a"), configmap("a"))
    for i in range(5):
        await store.create(key(f"b{i}"), configmap(f"b{i}"))
    page = await store.list(P, limit=2)
    for i in range(5):
        await store.create(key(f"c{i}"), configmap(f"c{i}"))
    head = await store.current_revision()
    await store.compact(head)

    with pytest.raises(TooOldResourceVersionError) as watched:
        await store.watch(P, revision=rv(first))
    with pytest.raises(TooOldResourceVersionError) as listed:
        await store.list(P, revision=rv(first))
    with pytest.raises(TooOldResourceVersionError) as continued:
        await store.list(P, limit=2, continue_token=page.continue_token)
    assert [(e.value.requested, e.value.compacted) for e in (watched, listed, continued)] == [
        (rv(first), head), (rv(first), head), (page.revision, head)]

    # the present is untouched, and a watch from the compaction point still works
    assert len((await store.list(P)).items) == 11
    watch = await store.watch(P, revision=head)
    try:
        later = await store.create(key("d"), configmap("d"))
        event = await next_change(watch)
        assert event.revision == rv(later)
    finally:
        watch.stop()


async def test_history_after_the_compaction_point_is_kept(store):
    await store.create(key("a"), configmap("a", v="1"))

    async def bump(cur):
        return {**cur, "data": {"v": str(int(cur["data"]["v"]) + 1)}}

    mid = await store.guaranteed_update(key("a"), bump)
    await store.guaranteed_update(key("a"), bump)
    await store.delete(key("a"))
    await store.compact(rv(mid))
    watch = await store.watch(P, revision=rv(mid))
    try:
        events = await changes(watch, 2)
        assert [e.type for e in events] == [EventType.MODIFIED, EventType.DELETED]
        assert events[0].prev_object["data"] == {"v": "2"}
        assert events[1].object["data"] == {"v": "3"}
    finally:
        watch.stop()
    state = await store.list(P, revision=rv(mid))
    assert [o["data"] for o in state.items] == [{"v": "2"}]


# -- writes that start from a cached guess (the watch cache's copy) ------------------------------


async def _stale_guess(store) -> tuple[tuple[int, bytes], dict]:
    """A guess of the object's state one write behind, and the object as it is now."""
    from gateway.storage import codec

    first = await store.create(key("g"), configmap("g", v="1"))
    guess = (rv(first), codec.dumps(first))

    def bump(current):
        return {**current, "data": {"v": "2"}}

    now = await store.guaranteed_update(key("g"), _async(bump))
    return guess, now


def _async(fn):
    async def call(current):
        return fn(current)
    return call


async def test_an_update_from_a_stale_guess_applies_to_the_stored_state(store):
    guess, now = await _stale_guess(store)
    seen = []

    def update(current):
        seen.append(current["data"]["v"])
        return {**current, "data": {**current["data"], "w": "3"}}

    # a precondition only the stored state meets: it must not fail on the stale guess
    done = await store.guaranteed_update(
        key("g"), _async(update), cached=guess,
        preconditions=Preconditions(resource_version=now["metadata"]["resourceVersion"]))
    assert done["data"] == {"v": "2", "w": "3"}
    assert seen[-1] == "2"
    assert (await store.get(key("g")))["data"] == {"v": "2", "w": "3"}


async def test_an_update_that_fails_on_a_stale_guess_is_tried_on_the_stored_state(store):
    guess, now = await _stale_guess(store)

    def update(current):  # as the REST store's resourceVersion check does
        if current["metadata"]["resourceVersion"] != now["metadata"]["resourceVersion"]:
            raise ConflictError("stale", key=key("g"))
        return {**current, "data": {"v": "4"}}

    done = await store.guaranteed_update(key("g"), _async(update), cached=guess)
    assert done["data"] == {"v": "4"}


async def test_a_delete_from_a_stale_guess_checks_the_stored_state(store):
    guess, now = await _stale_guess(store)
    gone = await store.delete(key("g"), cached=guess, preconditions=Preconditions(
        resource_version=now["metadata"]["resourceVersion"]))
    assert gone["data"] == {"v": "2"}
    with pytest.raises(KeyNotFoundError):
        await store.get(key("g"))


async def test_a_stale_guess_of_a_deleted_object_is_not_found(store):
    guess, _ = await _stale_guess(store)
    await store.delete(key("g"))
    with pytest.raises(KeyNotFoundError):
        await store.guaranteed_update(key("g"), _async(lambda c: c), cached=guess)
    with pytest.raises(KeyNotFoundError):
        await store.delete(key("g"), cached=guess)
