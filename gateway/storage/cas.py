"""The compare-and-swap loops every backend runs for updates and deletes (kube's
GuaranteedUpdate and conditional delete), written once.

A backend supplies the current (revision, bytes) of the key and a ``swap`` that applies a
change only if the key is still at the revision read; a lost race returns the key's newer
state, and the loop tries again with it, without an extra read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.storage import codec
from gateway.storage.errors import KeyNotFoundError
from gateway.storage.interface import Object, Preconditions, UpdateFunc

#: (revision, stored bytes) of a key, or None when it does not exist.
Current = tuple[int, bytes] | None
#: Swap outcome: (True, revision of the write) or (False, the key's current state).
Outcome = tuple[bool, "int | Current"]
PutSwap = Callable[[int, bytes | None, bytes], Awaitable[Outcome]]
DeleteSwap = Callable[[int, bytes], Awaitable[Outcome]]


async def guaranteed_update(
    key: str,
    current: Current,
    update: UpdateFunc,
    swap: PutSwap,
    *,
    preconditions: Preconditions | None = None,
    ignore_not_found: bool = False,
    fetch: Callable[[], Awaitable[Current]] | None = None,
) -> Object:
    """With ``fetch``, ``current`` is a guess that may be stale (the watch cache's copy, as
    kube's GuaranteedUpdate takes one): anything that fails on it (a precondition, the
    update itself, a missing key) is tried once more on the state ``fetch`` reads, and a
    lost swap returns the newer state anyway."""
    while True:
        revision, data = current if current is not None else (0, None)
        try:
            obj = codec.decode(data, revision, key) if data is not None else None
            if obj is None and not ignore_not_found:
                raise KeyNotFoundError(key)
            if obj is not None and preconditions is not None:
                preconditions.check(key, obj)
            new_data = codec.encode(await update(obj))
        except Exception:
            if fetch is None:
                raise
            current, fetch = await fetch(), None  # it may have failed on stale data
            continue
        if data is not None and _same(new_data, data, revision, key):
            if fetch is not None:  # nothing to write, as far as a guess tells: look
                current, fetch = await fetch(), None
                continue
            return codec.decode(data, revision, key)  # a no-op writes nothing
        fetch = None  # the swap tells whether the guess was current
        done, outcome = await swap(revision, data, new_data)
        if done:
            assert isinstance(outcome, int)
            return codec.decode(new_data, outcome, key)
        current = outcome  # type: ignore[assignment]


def _same(new_data: bytes, data: bytes, revision: int, key: str) -> bool:
    """The same object: the same bytes, or the same content with keys in another order."""
    return new_data == data or \
        codec.decode(new_data, revision, key) == codec.decode(data, revision, key)


async def guaranteed_delete(
    key: str,
    current: Current,
    swap: DeleteSwap,
    *,
    preconditions: Preconditions | None = None,
    validate: Callable[[Object], Awaitable[None]] | None = None,
    fetch: Callable[[], Awaitable[Current]] | None = None,
) -> Object:
    """Delete once the preconditions and ``validate`` hold of the current state; returns the
    last state stamped with the deletion's revision. ``fetch``: as guaranteed_update's."""
    while True:
        try:
            if current is None:
                raise KeyNotFoundError(key)
            revision, data = current
            obj = codec.decode(data, revision, key)
            if preconditions is not None:
                preconditions.check(key, obj)
            if validate is not None:
                await validate(obj)
        except Exception:
            if fetch is None:
                raise
            current, fetch = await fetch(), None
            continue
        fetch = None
        done, outcome = await swap(revision, data)
        if done:
            assert isinstance(outcome, int)
            return codec.decode(data, outcome, key)
        current = outcome  # type: ignore[assignment]
