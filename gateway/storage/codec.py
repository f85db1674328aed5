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
except ImportError:  # pragma: no cover - exercised only without the `fast` extra
    import json

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    _loads = json.loads


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


def with_revision(obj: Object, revision: int) -> Object:
    """A shallow copy of ``obj`` whose resourceVersion is ``revision``."""
    return {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(revision)}}


def dumps(obj: Any) -> bytes:
    return _dumps(obj)


def loads(data: bytes | str) -> Any:
    return _loads(data)
