"""JSON encoding of stored objects, shared by the backends.

An object is stored without ``metadata.resourceVersion`` (the revision is the store's to
say) and gets it back, as a string, when read.
"""

from __future__ import annotations

from typing import Any

from gateway.storage.errors import StorageInternalError
from gateway.storage.interface import Object

try:  # orjson is several times faster on the hot path; plain json works as well
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    _loads = orjson.loads
    # pre-encoded JSON spliced into dumps' output as it is (orjson >= 3.9)
    _Fragment: Any = getattr(orjson, "Fragment", None)
except ImportError:  # pragma: no cover - exercised only without the `fast` extra
    import json

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def _loads(obj: bytes | bytearray | memoryview | str) -> Any:
        return json.loads(obj.tobytes() if isinstance(obj, memoryview) else obj)

    _Fragment = None


def encode(obj: Object) -> bytes:
    """Serialize ``obj`` for storage, leaving the caller's dict untouched."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        meta = dict(meta)
        del meta["resourceVersion"]
        obj = {**obj, "metadata": meta}
    return _dumps(obj)


def decode(data: bytes, revision: int, key: str = "") -> Object:
    """Deserialize stored bytes and stamp the object with ``revision``."""
    try:
        obj = _loads(data)
    except ValueError as err:
        raise StorageInternalError(f"stored object is not valid JSON: {err}", key=key) from err
    if not isinstance(obj, dict):
        raise StorageInternalError("stored object is not a JSON object", key=key)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(revision)
    return obj


def dumps(obj: Any) -> bytes:
    return _dumps(obj)


def dumps_to_keep(obj: Any) -> bytes:
    """``dumps`` for bytes held a long time: orjson's result keeps the whole buffer it grew
    while writing (16 KiB of memory for 1.3 KB of JSON, 130 KiB for 10 KB), a copy holds
    just its length."""
    return bytes(memoryview(_dumps(obj)))


def loads(data: bytes | str) -> Any:
    return _loads(data)


def embedded(encoded: list[bytes]) -> list[Any]:
    """JSON values already encoded, to put into something ``dumps`` will write: each is
    written as it is (no decoding, no encoding again) where orjson can splice, and decoded
    where it cannot, which writes the same JSON more slowly."""
    if _Fragment is not None:
        return [_Fragment(data) for data in encoded]
    return [_loads(data) for data in encoded]
