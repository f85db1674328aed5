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
from dataclasses import dataclass, field
from typing import Any, Protocol

Object = dict[str, Any]

#: Given the current object (None when it is missing and the caller allowed that), return the
#: object to store. Raise to abort; return the very same content for a no-op (nothing written).
UpdateFunc = Callable[[Object | None], Awaitable[Object]]

#: A filter applied to objects in lists and watches (label and field selectors).
Predicate = Callable[[Object], bool]


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    #: No object change: the store has reached ``revision`` (etcd's progress notify).
    BOOKMARK = "BOOKMARK"
    #: The watch ends with ``error`` (a StorageError, e.g. TooOldResourceVersionError).
    ERROR = "ERROR"


@dataclass(slots=True)
class WatchEvent:
    """One change. For DELETED, ``object`` is the last state with the deletion's revision."""

    type: EventType
    key: str
    object: Object | None
    revision: int
    prev_object: Object | None = None
    error: Exception | None = None
    #: A BOOKMARK that closes the initial events of a watch-list (sendInitialEvents).
    initial_events_end: bool = False
    #: Encodings of this event made once and shared by every watcher that sends it.
    cache: dict[Any, Any] = field(default_factory=dict)


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


@dataclass(slots=True)
class ListResult:
    items: list[Object]
    #: The revision the list was read at (the list's resourceVersion).
    revision: int
    #: Token for the next page, or "" when this is the last page.
    continue_token: str = ""
    #: Items left after this page, when known (no predicate was applied).
    remaining: int | None = None


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
    ) -> Object:
        """Read, apply ``update``, compare-and-swap; retry on a concurrent change.

        Preconditions are checked against the current object on every try. When ``update``
        returns an object equal to the current one, nothing is written.
        """

    async def delete(
        self,
        key: str,
        *,
        preconditions: Preconditions | None = None,
        validate: Callable[[Object], Awaitable[None]] | None = None,
    ) -> Object:
        """Delete the key; returns its last state, resourceVersion = the deletion."""

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
