"""One version of one object as the watch cache holds it (kube's cachingObject).

The cache keeps each object version as its JSON, resourceVersion included, encoded once when
the version arrives: every JSON list and watch event that sends it splices those bytes into
its answer instead of encoding the object again, and the bytes cost less than half the memory
of the decoded dict (measured in bench/memory.py).

A dict is made only when something reads the object in process (the RBAC authorizer,
controllers, admission, selectors, Table, protobuf and YAML rendering). ``decode()`` gives a
new dict each time unless the object is *kept*: the cache keeps the decoded dict of objects
read often in process (``keep()``), and hands that one dict to every such reader. A kept dict
is shared and must never be changed by a reader; ``unchanged()`` checks that it still encodes
to the bytes, which the cache does when asked to (tests run the gateway so).
"""

from __future__ import annotations

from gateway.storage import codec
from gateway.storage.interface import Object


class CachedObject:
    """An object version's JSON bytes and, when kept, its shared decoded dict."""

    __slots__ = ("_object", "data", "labels", "revision")

    def __init__(self, data: bytes, revision: int, obj: Object | None = None,
                 labels: dict[str, str] | None = None) -> None:
        #: The object's JSON with its resourceVersion: what a JSON answer sends.
        self.data = data
        self.revision = revision
        self._object = obj
        #: The object's labels (None: none), so a label selector is answered without decoding
        #: the object, as kube's cache keeps each object's labels beside it.
        self.labels = labels

    @classmethod
    def encode(cls, obj: Object, revision: int, *, keep: bool = False) -> CachedObject:
        """``obj`` (stamped with ``revision``) encoded once; with ``keep``, ``obj`` itself is
        kept as the shared dict, so it must not be changed afterwards by anyone."""
        meta = obj.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        return cls(codec.dumps_to_keep(obj), revision, obj if keep else None,
                   labels if isinstance(labels, dict) and labels else None)

    @property
    def kept(self) -> bool:
        return self._object is not None

    def decode(self) -> Object:
        """The object as a dict: the shared one when kept (never change it), else a new one."""
        obj = self._object
        return obj if obj is not None else codec.loads(self.data)

    def keep(self) -> Object:
        """The shared dict, decoded now if it was not kept yet (never change it)."""
        obj = self._object
        if obj is None:
            obj = self._object = codec.loads(self.data)
        return obj

    def unchanged(self) -> bool:
        """Whether the kept dict (if any) still encodes to the bytes: False means a reader
        changed a shared object, which in-process readers would then see and clients not."""
        return self._object is None or codec.dumps(self._object) == self.data

    def __repr__(self) -> str:
        return f"CachedObject(revision={self.revision}, {len(self.data)} bytes, " \
               f"kept={self.kept})"
