"""The storage interface every backend implements, and the values it passes around.

Objects are JSON-shaped dicts (a Kubernetes object: ``apiVersion``, ``kind``, ``metadata``...).
A backend stores them as JSON without ``metadata.resourceVersion`` and sets that field, as a
string, to the object's revision on everything it returns: the revision is the store's single,
global, increasing change counter (etcd's mod_revision), as in k8s.io/apiserver's storage.

Keys are absolute paths such as ``/core/configmaps/default/x``; a *prefix* ends in ``/`` and
names a directory of keys. The etcd backend stores a key under ``--etcd-prefix``
(``/registry/core/configmaps/default/x``) and strips that prefix again on the way out, so
callers never see it. Conformance: tests/storage/test_conformance.py.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gateway.storage.cachedobject import CachedObject

Object = dict[str, Any]

#: Given the current object (None when it is missing and the caller allowed that), return the
#: object to store. Raise to abort; return the very same content for a no-op (nothing written).
UpdateFunc = Callable[[Object | None], Awaitable[Object]]

#: A filter applied to objects in lists and watches (label and field selectors).
#: Whether an object is selected. One that reads only the object's labels may say so with an
#: attribute ``on_labels``, a function of the labels alone (the watch cache then needs no
#: decoded object to answer it).
Predicate = Callable[[Object], bool]


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    #: No object change: the store has reached ``revision`` (etcd's progress notify).
    BOOKMARK = "BOOKMARK"
    #: The watch ends with ``error`` (a StorageError, e.g. TooOldResourceVersionError).
    ERROR = "ERROR"


class WatchEvent:
    """One change. For DELETED, ``object`` is the last state with the deletion's revision.

    An event from the watch cache also carries ``encoded`` (and ``prev_encoded``): the
    object's JSON encoded once and shared by every watcher and list that sends it; its
    ``object`` is then decoded only if something reads it. Objects are shared: never change
    them (make a new event instead).
    """

    __slots__ = (
        "_cache",
        "_object",
        "_prev_object",
        "encoded",
        "error",
        "initial_events_end",
        "key",
        "prev_encoded",
        "revision",
        "type",
    )

    def __init__(
        self,
        type: EventType,
        key: str,
        object: Object | None,
        revision: int,
        prev_object: Object | None = None,
        error: Exception | None = None,
        initial_events_end: bool = False,
        *,
        encoded: CachedObject | None = None,
        prev_encoded: CachedObject | None = None,
    ) -> None:
        self.type = type
        self.key = key
        self.revision = revision
        self.error = error
        #: A BOOKMARK that closes the initial events of a watch-list (sendInitialEvents).
        self.initial_events_end = initial_events_end
        self.encoded = encoded
        self.prev_encoded = prev_encoded
        self._object = object
        self._prev_object = prev_object
        self._cache: dict[Any, Any] | None = None

    @property
    def object(self) -> Object | None:
        if self._object is None and self.encoded is not None:
            self._object = self.encoded.decode()
        return self._object

    @property
    def prev_object(self) -> Object | None:
        if self._prev_object is None and self.prev_encoded is not None:
            self._prev_object = self.prev_encoded.decode()
        return self._prev_object

    @property
    def cache(self) -> dict[Any, Any]:
        """Encodings of this event made once and shared by every watcher that sends it."""
        if self._cache is None:
            self._cache = {}
        return self._cache

    def __repr__(self) -> str:
        return (f"WatchEvent({self.type.value}, {self.key!r}, revision={self.revision}"
                + (f", error={self.error!r}" if self.error is not None else "") + ")")


@dataclass(frozen=True, slots=True)
class Preconditions:
    """What must hold of the current object for an update or delete to proceed."""

    uid: str | None = None
    resource_version: str | None = None

    def check(self, key: str, current: Object) -> None:
        from gateway.storage.errors import ConflictError

        meta = current.get("metadata", {})
        if self.uid is not None and meta.get("uid") != self.uid:
            raise ConflictError(
                f"Precondition failed: UID in precondition: {self.uid}, "
                f"UID in object meta: {meta.get('uid', '')}",
                key=key,
            )
        if (
            self.resource_version is not None
            and meta.get("resourceVersion") != self.resource_version
        ):
            raise ConflictError(
                "Precondition failed: ResourceVersion in precondition: "
                f"{self.resource_version}, ResourceVersion in object meta: "
                f"{meta.get('resourceVersion', '')}",
                key=key,
            )


class ListResult:
    """A list's objects and where it stands.

    A list from the watch cache carries ``encoded``: each item's JSON, encoded once and
    shared, which a JSON answer splices; ``items`` are then decoded only when read. Setting
    ``items`` (converted objects, say) drops ``encoded``, which would no longer be them.
    """

    __slots__ = ("_encoded", "_items", "continue_token", "remaining", "revision")

    def __init__(
        self,
        items: list[Object] | None = None,
        revision: int = 0,
        continue_token: str = "",
        remaining: int | None = None,
        *,
        encoded: list[CachedObject] | None = None,
    ) -> None:
        #: The revision the list was read at (the list's resourceVersion).
        self.revision = revision
        #: Token for the next page, or "" when this is the last page.
        self.continue_token = continue_token
        #: Items left after this page, when known (no predicate was applied).
        self.remaining = remaining
        self._items = items if items is not None or encoded is not None else []
        self._encoded = encoded

    @property
    def items(self) -> list[Object]:
        if self._items is None:
            assert self._encoded is not None
            self._items = [cached.decode() for cached in self._encoded]
        return self._items

    @items.setter
    def items(self, items: list[Object]) -> None:
        self._items = items
        self._encoded = None

    @property
    def encoded(self) -> list[CachedObject] | None:
        """The items' shared encodings, as long as ``items`` was not replaced."""
        return self._encoded


class Watch(Protocol):
    """A stream of events; iterate it, and call stop() when done with it."""

    def __aiter__(self) -> AsyncIterator[WatchEvent]: ...

    async def __anext__(self) -> WatchEvent: ...

    def stop(self) -> None: ...

    async def request_progress(self) -> None:
        """Ask for a BOOKMARK carrying the store's current revision once every event up to
        it was delivered (etcd's WatchProgressRequest), so a cache can prove it is fresh."""


class Storage(Protocol):
    """Operations on one store. Every method may raise gateway.storage.errors.*."""

    async def start(self) -> None:
        """Open the store (raises for a store that cannot be used, e.g. corrupt)."""

    async def close(self) -> None:
        """Release everything; pending watches end."""

    async def create(self, key: str, obj: Object) -> Object:
        """Store a new key; KeyExistsError when it exists. Returns the stored object."""

    async def get(self, key: str) -> Object:
        """The current object; KeyNotFoundError when missing."""

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str = "",
        revision: int = 0,
        predicate: Predicate | None = None,
    ) -> ListResult:
        """Objects under ``prefix`` in key order.

        ``revision`` 0 reads the newest state, N reads the state at N (TooOld when compacted,
        FutureRevision when not reached). ``limit`` > 0 pages; the continue token pins the
        revision of the first page. The predicate filters while paging, so a page holds up
        to ``limit`` matching items.
        """

    async def guaranteed_update(
        self,
        key: str,
        update: UpdateFunc,
        *,
        preconditions: Preconditions | None = None,
        ignore_not_found: bool = False,
        cached: tuple[int, bytes] | None = None,
    ) -> Object:
        """Read, apply ``update``, compare-and-swap; retry on a concurrent change.

        Preconditions are checked against the current object on every try. When ``update``
        returns an object equal to the current one, nothing is written. ``cached`` is the
        caller's (revision, JSON) of the object, perhaps stale (the watch cache's): a store
        for which a read costs a round trip may start from it instead of reading, as kube's
        GuaranteedUpdate starts from the cache's object; what fails on it is tried again on
        the stored state.
        """

    async def delete(
        self,
        key: str,
        *,
        preconditions: Preconditions | None = None,
        validate: Callable[[Object], Awaitable[None]] | None = None,
        cached: tuple[int, bytes] | None = None,
    ) -> Object:
        """Delete the key; returns its last state, resourceVersion = the deletion.
        ``cached``: as guaranteed_update's."""

    async def watch(self, prefix: str, *, revision: int | None = None) -> Watch:
        """Events under ``prefix`` after ``revision`` (None: from now on; 0: every event since
        the store began, what a list of an empty store at revision 0 must be followed by),
        in order, once each.

        Raises TooOldResourceVersionError at once when ``revision`` is compacted.
        """

    async def current_revision(self) -> int:
        """The newest revision of the whole store."""

    async def count(self, prefix: str) -> int:
        """How many keys live under ``prefix``."""

    async def compact(self, revision: int) -> None:
        """Forget history older than ``revision``; reads and watches before it get TooOld."""

    async def check_health(self) -> None:
        """Return when the store answers; raise StorageUnavailableError otherwise."""


def prefix_end(prefix: str) -> str:
    """The first key after every key that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
