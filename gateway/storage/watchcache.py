"""The watch cache: one resource's objects and recent events, kept in memory.

Like k8s.io/apiserver's Cacher, it lists and watches the storage once per resource, keeps the
current objects and a sliding window of the latest events, and fans events out to any number
of watchers. It answers lists and gets "from cache" (resourceVersion=0) and watches from any
revision inside its window; an older revision is TooOld (410).

Fan-out never lets one slow watcher hold up the others: each watcher has a bounded buffer;
when it is full the dispatcher waits, for all blocked watchers together, at most what is left
of a small time budget (refilled over time, as kube's timeBudget), then closes those that still
have no room. A closed watcher's client re-lists, as with kube-apiserver.

Each object version is held as its JSON, encoded once when it arrives (``CachedObject``):
lists and watch events in JSON splice those bytes, and a dict is made only for what reads the
object in process. A resource that in-process readers scan (``objects()``: RBAC, CRDs,
APIServices...) is kept decoded as well; the window of events refers to the same versions.

Writes and uncached reads go straight to the storage, so a Cacher can stand wherever a
Storage is expected.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from gateway.storage.cachedobject import CachedObject
from gateway.storage.errors import (
    FutureRevisionError,
    KeyNotFoundError,
    StorageError,
    StorageUnavailableError,
    TooOldResourceVersionError,
)
from gateway.storage.interface import (
    EventType,
    ListResult,
    Object,
    Preconditions,
    Predicate,
    Storage,
    UpdateFunc,
    Watch,
    WatchEvent,
    prefix_end,
)
from gateway.storage.watchstream import QueueWatch

log = structlog.get_logger(__name__)

#: Set (to anything) to have every cache check, whenever it lets go of a kept object, that no
#: reader changed it: the end-to-end tests run the gateway so.
VERIFY_SHARED_ENV = "GATEWAY_VERIFY_SHARED_OBJECTS"
#: What the cache logs when that check fails (tests look for it).
CHANGED_SHARED_OBJECT = "a reader changed a shared object of the watch cache"


class TimeBudget:
    """How long the dispatcher may still wait for slow watchers: up to ``maximum`` seconds,
    refilled at ``refill_per_second`` of wall time."""

    def __init__(self, maximum: float = 0.1, refill_per_second: float = 0.05) -> None:
        self.maximum = maximum
        self.refill = refill_per_second
        self._left = maximum
        self._stamp = time.monotonic()

    def take(self) -> float:
        now = time.monotonic()
        self._left = min(self.maximum, self._left + (now - self._stamp) * self.refill)
        self._stamp = now
        left, self._left = self._left, 0.0
        return left

    def give_back(self, unused: float) -> None:
        self._left = min(self.maximum, self._left + max(0.0, unused))


def convert_for(event: WatchEvent, prefix: str, predicate: Predicate | None) -> WatchEvent | None:
    """The event as one watcher should see it, or None.

    With a predicate (a selector), an object that starts to match is ADDED and one that stops
    matching is DELETED (its previous state at the event's revision), as kube's cacheWatcher.
    """
    if not event.key.startswith(prefix):
        return None
    if predicate is None or event.type == EventType.BOOKMARK:
        return event
    if event.type in (EventType.ADDED, EventType.DELETED):
        return event if event.object is not None and predicate(event.object) else None
    now = event.object is not None and predicate(event.object)
    before = event.prev_object is not None and predicate(event.prev_object)
    if now and before:
        return event
    if now:
        return WatchEvent(EventType.ADDED, event.key, event.object, event.revision,
                          encoded=event.encoded)
    if before:
        assert event.prev_object is not None
        meta = {**event.prev_object.get("metadata", {}), "resourceVersion": str(event.revision)}
        gone = {**event.prev_object, "metadata": meta}
        return WatchEvent(EventType.DELETED, event.key, gone, event.revision, event.prev_object,
                          prev_encoded=event.prev_encoded)
    return None


class _Change:
    """An event as the window keeps it: the versions it names, no decoded objects (a watch
    that resumes from the window gets new WatchEvents made of these)."""

    __slots__ = ("key", "prev", "revision", "type", "version")

    def __init__(self, type: EventType, key: str, revision: int, version: CachedObject,
                 prev: CachedObject | None) -> None:
        self.type = type
        self.key = key
        self.revision = revision
        self.version = version
        self.prev = prev

    def event(self) -> WatchEvent:
        return WatchEvent(self.type, self.key, None, self.revision, encoded=self.version,
                          prev_encoded=self.prev)


#: Delivers one event to a watcher's client at once; False when it cannot take it now.
Push = Callable[[WatchEvent], bool]


#: A watch that allows bookmarks gets one this long before its deadline (kube's 2 s).
BOOKMARK_BEFORE_DEADLINE = 2.0


class CacheWatcher:
    """One watch on the cache: its initial events first, then live ones.

    Live events are either queued for the consumer to pull (bounded), or, once the consumer
    has caught up and attached a ``push`` function, handed straight to it by the dispatcher:
    with many watchers that saves a task switch per event per watcher. A push that fails
    (the client's buffer is full) drops the watcher back to its queue and wakes the consumer.
    """

    def __init__(
        self,
        cacher: Cacher,
        prefix: str,
        predicate: Predicate | None,
        buffer: int,
        bookmarks: bool,
        initial: list[WatchEvent],
        deadline: float | None = None,
    ) -> None:
        self.prefix = prefix
        self.predicate = predicate
        self.bookmarks = bookmarks
        #: When the watch will end (time.monotonic()); a bookmark goes out shortly before.
        self.deadline = deadline
        self.next_bookmark = self.bookmark_after(time.monotonic(), cacher.bookmark_interval)
        self.initial = deque(initial)
        self.queue = QueueWatch(buffer, on_stop=lambda: cacher._forget(self))
        self.push: Push | None = None
        self.wake = asyncio.Event()

    def bookmark_after(self, now: float, interval: float) -> float:
        """kube's next bookmark time: after ``interval``, or 2 s before the watch's deadline
        when that comes first, so a client resumes from a fresh resourceVersion."""
        due = now + interval
        if self.deadline is not None:
            due = min(due, max(now, self.deadline - BOOKMARK_BEFORE_DEADLINE))
        return due

    def __aiter__(self) -> CacheWatcher:
        return self

    async def __anext__(self) -> WatchEvent:
        if self.initial and not self.queue.done:
            return self.initial.popleft()
        return await self.queue.__anext__()

    def next_nowait(self) -> WatchEvent | None:
        """The next event if one is waiting (initial first, then queued), else None."""
        if self.queue.done and not self.queue.qsize():
            return None
        if self.initial:
            return self.initial.popleft()
        return self.queue.get_nowait()

    def attach(self, push: Push) -> bool:
        """Switch to push delivery, if nothing is waiting to be pulled first."""
        if self.initial or self.queue.qsize() or self.queue.done:
            return False
        self.wake.clear()
        self.push = push
        return True

    def deliver(self, event: WatchEvent) -> bool:
        """Hand ``event`` over: pushed when attached, else queued (False: queue full)."""
        push = self.push
        if push is not None:
            if push(event):
                return True
            self.push = None  # the client is behind: its queue takes over
            self.wake.set()
        return self.queue.put_nowait(event)

    def stop(self) -> None:
        self.push = None
        self.initial.clear()
        self.queue.stop()
        self.wake.set()

    async def request_progress(self) -> None:
        """Bookmarks come from the cache on its own schedule; nothing to ask for."""

    @property
    def closed(self) -> bool:
        return self.queue.done


class Cacher:
    """The watch cache of one resource prefix (see the module docstring)."""

    def __init__(
        self,
        storage: Storage,
        prefix: str,
        *,
        window: int = 10_000,
        watcher_buffer: int = 100,
        bookmark_interval: float = 60.0,
        fresh_timeout: float = 3.0,
        budget: TimeBudget | None = None,
        key_func: Callable[[str, Object], str] | None = None,
        on_terminated: Callable[[str], None] | None = None,
    ) -> None:
        self.storage = storage
        self.prefix = prefix
        #: Told this cache's prefix whenever it closes a watcher that cannot keep up (the
        #: gateway counts it in apiserver_terminated_watchers_total).
        self.on_terminated = on_terminated
        self.key_func = key_func or namespaced_key
        self.window_size = window
        self.watcher_buffer = watcher_buffer
        self.bookmark_interval = bookmark_interval
        self.fresh_timeout = fresh_timeout
        self.budget = budget or TimeBudget()
        #: When set, a write returns only once this cache has applied it: the RBAC authorizer
        #: reads its caches directly, and a binding must work as soon as its create returns.
        self.read_your_writes = False
        self.revision = 0  # every event up to here is applied
        self.oldest = 0  # a watch may resume from any revision >= this
        self._objects: dict[str, CachedObject] = {}
        #: The keys of _objects in order: a list or the initial events of a watch read the
        #: range of a prefix (a namespace's) instead of sorting every key of the resource.
        self._keys: list[str] = []
        #: The kept dicts by key, once in-process readers scan this resource (objects()):
        #: from then on every version is kept decoded as it arrives, for them to read at once.
        self._decoded: dict[str, Object] | None = None
        self._window: deque[_Change] = deque()
        self.verify_shared = bool(os.environ.get(VERIFY_SHARED_ENV))
        self.changed_shared_objects = 0  # found by verify_shared, for tests
        self._watchers: dict[int, CacheWatcher] = {}
        self._ready = asyncio.Event()
        self._fresh_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._source: Watch | None = None
        #: Set when the storage became unreachable: the revision to watch on from.
        self._resume_from = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.terminated_watchers = 0  # watchers closed for being too slow, for tests and metrics

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._reflect()),
            loop.create_task(self._bookmark_loop()),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._terminate_all()
        for cached in self._objects.values():
            self._released(cached)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self, timeout: float | None = None) -> None:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
        # that arrives as the wait ends, and a stopping gateway would wait on that task forever
        async with asyncio.timeout(timeout):
            await self._ready.wait()

    # -- filling the cache ----------------------------------------------------------------

    async def _reflect(self) -> None:
        """List, then follow the storage's events; after a failure list again, except when
        the storage is only unreachable: then the watchers are ended (their clients see a
        clean end and watch again), and once it answers the cache watches on from its own
        revision, its window intact, so those clients resume where they were instead of
        re-listing on a 410."""
        delay = 0.1
        while True:
            try:
                if self._resume_from:
                    await self._resume_watch()
                else:
                    await self._list_and_watch()
                delay = 0.1
            except StorageUnavailableError as err:
                if self._ready.is_set() or self._resume_from:
                    self._resume_from = self.revision
                self._terminate_all()
                log.warning("watch cache lost its storage; resuming", prefix=self.prefix,
                            error=str(err), revision=self._resume_from, retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except StorageError as err:
                self._resume_from = 0
                log.warning("watch cache lost its watch; re-listing", prefix=self.prefix,
                            error=str(err), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except Exception:
                self._resume_from = 0
                log.exception("watch cache failed; re-listing", prefix=self.prefix)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            finally:
                self._ready.clear()
                if self._source is not None:
                    self._source.stop()
                    self._source = None

    async def _resume_watch(self) -> None:
        """Watch the storage from the cache's own revision (TooOld if compacted meanwhile:
        the caller lists again)."""
        self._source = await self.storage.watch(self.prefix, revision=self._resume_from)
        self._resume_from = 0
        self._ready.set()
        log.info("watch cache resumed", prefix=self.prefix, revision=self.revision)
        await self._follow_source()

    async def _list_and_watch(self) -> None:
        listed = await self.storage.list(self.prefix)
        self._source = await self.storage.watch(self.prefix, revision=listed.revision)
        self._terminate_all()  # their revisions may not be in the new window
        keep = self._decoded is not None
        for old in self._objects.values():
            self._released(old)
        self._objects = {
            self.key_func(self.prefix, obj): CachedObject.encode(obj, _revision_of(obj),
                                                                 keep=keep)
            for obj in listed.items}
        self._keys = sorted(self._objects)
        if keep:
            self._decoded = {key: cached.keep() for key, cached in self._objects.items()}
        self._window.clear()
        self.revision = self.oldest = listed.revision
        self._ready.set()
        log.debug("watch cache ready", prefix=self.prefix, revision=self.revision)
        await self._follow_source()

    async def _follow_source(self) -> None:
        assert self._source is not None
        async for event in self._source:
            if event.type == EventType.ERROR:
                assert event.error is not None
                raise event.error
            await self._apply(event)
        raise StorageError(f"the storage watch on {self.prefix} ended")

    async def _apply(self, event: WatchEvent) -> None:
        if event.type == EventType.BOOKMARK:
            self._advance(event.revision)
            return
        live = self._store(event)
        self._advance(event.revision)
        await self._dispatch(live)

    def _store(self, event: WatchEvent) -> WatchEvent:
        """Apply a storage event to the objects and the window; the event to dispatch, with
        the versions' shared encodings."""
        key, obj = event.key, event.object
        assert obj is not None
        prev = self._objects.get(key)
        if prev is None and event.prev_object is not None:  # not expected: kept consistent
            prev = CachedObject.encode(event.prev_object, _revision_of(event.prev_object))
        decoded = self._decoded
        if event.type == EventType.DELETED:
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect_left(self._keys, key)]
            if decoded is not None:
                decoded.pop(key, None)
            version = CachedObject.encode(obj, event.revision)  # only ever sent, never read
        else:
            # a version is kept decoded when in-process readers read this resource or this
            # object (keep()); the storage's dict is then the shared one, decoded already
            keep = decoded is not None or (prev is not None and prev.kept)
            if key not in self._objects:
                insort(self._keys, key)
            version = self._objects[key] = CachedObject.encode(obj, event.revision, keep=keep)
            if decoded is not None:
                decoded[key] = obj
        if prev is not None:
            self._released(prev)
        self._window.append(_Change(event.type, key, event.revision, version, prev))
        if len(self._window) > self.window_size:
            self.oldest = self._window.popleft().revision
        return WatchEvent(event.type, key, obj, event.revision, event.prev_object,
                          encoded=version, prev_encoded=prev)

    def _advance(self, revision: int) -> None:
        if revision > self.revision:
            self.revision = revision
            if self._fresh_waiters:
                self._wake_fresh_waiters()

    def _released(self, cached: CachedObject) -> None:
        """With verify_shared, check that no reader changed a kept object the cache is done
        with (it may still be read, but nobody may change it then either)."""
        if self.verify_shared and not cached.unchanged():
            self.changed_shared_objects += 1
            log.error(CHANGED_SHARED_OBJECT, prefix=self.prefix, revision=cached.revision)

    # -- fan-out --------------------------------------------------------------------------

    async def _dispatch(self, event: WatchEvent) -> None:
        blocked: list[tuple[CacheWatcher, WatchEvent]] = []
        for watcher in list(self._watchers.values()):
            converted = convert_for(event, watcher.prefix, watcher.predicate)
            if converted is None or watcher.deliver(converted):
                continue
            if not watcher.closed:
                blocked.append((watcher, converted))
        if blocked:
            await self._wait_for(blocked)
        await asyncio.sleep(0)  # let the watchers' consumers run before the next event

    async def _wait_for(self, blocked: list[tuple[CacheWatcher, WatchEvent]]) -> None:
        """Give blocked watchers what is left of the budget; close those still full."""
        budget = self.budget.take()
        started = time.monotonic()
        puts = {asyncio.ensure_future(w.queue.put(e)): w for w, e in blocked}
        _, late = await asyncio.wait(puts, timeout=budget) if budget > 0 else (set(), set(puts))
        self.budget.give_back(budget - (time.monotonic() - started))
        for put in late:
            put.cancel()
            watcher = puts[put]
            log.info("closing a watcher that cannot keep up", prefix=watcher.prefix,
                     buffered=watcher.queue.qsize())
            self.terminated_watchers += 1
            if self.on_terminated is not None:
                self.on_terminated(self.prefix)
            self._close_watcher(watcher)

    def _close_watcher(self, watcher: CacheWatcher) -> None:
        self._forget(watcher)
        watcher.push = None
        watcher.queue.finish()
        watcher.wake.set()

    def _forget(self, watcher: CacheWatcher) -> None:
        self._watchers.pop(id(watcher), None)

    def _terminate_all(self) -> None:
        for watcher in list(self._watchers.values()):
            self._close_watcher(watcher)

    async def _bookmark_loop(self) -> None:
        """Send each watcher that wants them a BOOKMARK at the cache's revision, now and then."""
        tick = min(1.0, self.bookmark_interval / 2)
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for watcher in list(self._watchers.values()):
                if watcher.bookmarks and now >= watcher.next_bookmark:
                    mark = WatchEvent(EventType.BOOKMARK, "", None, self.revision)
                    if watcher.deliver(mark):
                        watcher.next_bookmark = now + self.bookmark_interval
                        if watcher.deadline is not None and \
                                watcher.next_bookmark >= watcher.deadline:
                            watcher.next_bookmark = float("inf")  # the pre-deadline one went

    # -- reads ------------------------------------------------------------------------------

    def _wake_fresh_waiters(self) -> None:
        waiting = []
        for revision, future in self._fresh_waiters:
            if revision <= self.revision:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((revision, future))
        self._fresh_waiters = waiting

    async def wait_fresh(self, revision: int) -> None:
        """Wait until the cache has applied ``revision``; FutureRevision after fresh_timeout."""
        if revision <= self.revision and self.ready:
            return
        await self.wait_ready(self.fresh_timeout)
        if revision <= self.revision:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._fresh_waiters.append((revision, future))
        if self._source is not None:
            await self._source.request_progress()
        try:
            async with asyncio.timeout(self.fresh_timeout):
                await future
        except TimeoutError:
            raise FutureRevisionError(revision, self.revision) from None
        finally:
            self._fresh_waiters = [(r, f) for r, f in self._fresh_waiters if f is not future]

    async def list_cached(
        self, prefix: str, *, predicate: Predicate | None = None, min_revision: int = 0
    ) -> ListResult:
        """Every object under ``prefix`` (that matches), as of the cache's revision."""
        await self.wait_fresh(min_revision)
        objects = self._objects
        versions = [objects[k] for k in self._keys_under(prefix)]
        if predicate is not None:
            versions = [cached for cached in versions if _selected(predicate, cached)]
        return ListResult(encoded=versions, revision=self.revision)

    def _keys_under(self, prefix: str) -> list[str]:
        """The cached keys that start with ``prefix``, in order."""
        keys = self._keys
        if not prefix:
            return list(keys)
        return keys[bisect_left(keys, prefix):bisect_left(keys, prefix_end(prefix))]

    def objects(self, prefix: str = "") -> list[Object]:
        """The cached objects under ``prefix`` (all of the resource by default), unsorted.

        For in-process readers (authorizers, controllers) that want the current state at once;
        the objects are shared and must not be changed. The first call makes this cache keep
        every object decoded from then on, so that the next calls cost what a dict read does."""
        prefix = prefix or self.prefix
        decoded = self._decoded
        if decoded is None:
            decoded = self._decoded = {key: cached.keep() for key, cached in self._objects.items()}
        return [obj for key, obj in decoded.items() if key.startswith(prefix)]

    async def get_cached(self, key: str, *, min_revision: int = 0) -> Object:
        """The cached object (shared: never change it). It is kept decoded from then on, and
        so are its next versions: what is read once in process is read again."""
        await self.wait_fresh(min_revision)
        try:
            return self._objects[key].keep()
        except KeyError:
            raise KeyNotFoundError(key) from None

    async def watch_cached(
        self,
        prefix: str,
        *,
        revision: int | None = None,
        predicate: Predicate | None = None,
        send_initial: bool = False,
        bookmarks: bool = False,
        mark_initial_end: bool = False,
        deadline: float | None = None,
    ) -> CacheWatcher:
        """Watch events under ``prefix``.

        ``send_initial``: first an ADDED for every current object (as of ``revision`` or
        later), then, when ``mark_initial_end`` and ``bookmarks``, a BOOKMARK marked
        initial_events_end (watch-list). Otherwise ``revision`` None starts from now and N
        replays the window's events after N.
        """
        if revision is not None and revision > 0:
            if not send_initial and revision < self.oldest:
                raise TooOldResourceVersionError(revision, self.oldest, self.revision)
            await self.wait_fresh(revision)
        else:
            await self.wait_ready(self.fresh_timeout)
        if send_initial:
            initial = self._initial_state(prefix, predicate)
            if bookmarks and mark_initial_end:
                initial.append(
                    WatchEvent(EventType.BOOKMARK, "", None, self.revision, initial_events_end=True)
                )
        elif revision is None or revision == 0:
            initial = []
        else:
            initial = self._replay(prefix, predicate, revision)
        watcher = CacheWatcher(self, prefix, predicate, self.watcher_buffer, bookmarks, initial,
                               deadline)
        self._watchers[id(watcher)] = watcher
        return watcher

    def _initial_state(self, prefix: str, predicate: Predicate | None) -> list[WatchEvent]:
        events = []
        objects = self._objects
        for key in self._keys_under(prefix):
            cached = objects[key]
            if predicate is not None and not _selected(predicate, cached):
                continue
            events.append(WatchEvent(EventType.ADDED, key, None, cached.revision, encoded=cached))
        return events

    def _replay(self, prefix: str, predicate: Predicate | None, after: int) -> list[WatchEvent]:
        replay = []
        for change in self._window:
            if change.revision > after and change.key.startswith(prefix):
                converted = convert_for(change.event(), prefix, predicate)
                if converted is not None:
                    replay.append(converted)
        return replay

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    # -- the rest of Storage goes to the store ------------------------------------------------

    async def get(self, key: str) -> Object:
        return await self.storage.get(key)

    async def list(self, prefix: str, **kwargs: Any) -> ListResult:
        return await self.storage.list(prefix, **kwargs)

    async def _applied(self, revision: int) -> None:
        """With read_your_writes, wait (bounded) until this cache has applied ``revision``."""
        if self.read_your_writes:
            with contextlib.suppress(StorageError):
                await self.wait_fresh(revision)

    async def create(self, key: str, obj: Object) -> Object:
        created = await self.storage.create(key, obj)
        await self._applied(_revision_of(created))
        return created

    async def guaranteed_update(
        self,
        key: str,
        update: UpdateFunc,
        *,
        preconditions: Preconditions | None = None,
        ignore_not_found: bool = False,
        min_revision: int = 0,
    ) -> Object:
        """``min_revision``: the caller knows of that revision of the object; a cached copy
        older than it is stale for sure, and not offered to the store."""
        updated = await self.storage.guaranteed_update(
            key, update, preconditions=preconditions, ignore_not_found=ignore_not_found,
            cached=self._cached_state(key, min_revision),
        )
        await self._applied(_revision_of(updated))
        return updated

    async def delete(
        self,
        key: str,
        *,
        preconditions: Preconditions | None = None,
        validate: Callable[[Object], Awaitable[None]] | None = None,
    ) -> Object:
        deleted = await self.storage.delete(key, preconditions=preconditions, validate=validate,
                                            cached=self._cached_state(key))
        if self.read_your_writes:
            await self._applied(await self.storage.current_revision())
        return deleted

    def _cached_state(self, key: str, min_revision: int = 0) -> tuple[int, bytes] | None:
        """The cache's (revision, JSON) of ``key`` for a write to start from, perhaps stale
        (the store tries again on what it reads when anything fails on it)."""
        known = self._objects.get(key) if self.ready else None
        if known is None or known.revision < min_revision:
            return None
        return known.revision, known.data

    async def count(self, prefix: str) -> int:
        return await self.storage.count(prefix)

    async def current_revision(self) -> int:
        return await self.storage.current_revision()


def _selected(predicate: Predicate, cached: CachedObject) -> bool:
    """Whether a cached version matches: from its labels alone when the predicate reads
    nothing else (``on_labels``), else from the decoded object."""
    on_labels = getattr(predicate, "on_labels", None)
    if on_labels is not None:
        return on_labels(cached.labels or {})
    return predicate(cached.decode())


def _revision_of(obj: Object) -> int:
    return int(obj.get("metadata", {}).get("resourceVersion") or 0)


def namespaced_key(prefix: str, obj: Object) -> str:
    """The storage key of an object under a resource prefix: ``<prefix>[<ns>/]<name>``."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{prefix}{namespace}/{meta['name']}" if namespace else f"{prefix}{meta['name']}"
