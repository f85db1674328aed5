"""A CRD version's structural schema prepared once for the request path.

``compile_schema(schema)`` gives a CompiledSchema whose methods answer exactly as the
module-level functions do for that schema, faster:

    validate / schema_causes / embedded_causes / list_causes   validation.py
    prune(obj, root=, nulls=)                                  pruning.prune
    apply_defaults(obj)                                        defaulting.apply_defaults
    defaulted(obj)                                             a defaulted copy, or obj itself

Validation first runs a check compiled from the schema (_fastcheck) that allocates nothing and
says only "valid" or "don't know"; on "don't know" the exact validator runs and words the
errors, so messages, causes and their order are the exact validator's. The embedded-resource
and list-type passes run only when some node the walks can reach (through properties,
additionalProperties, items) has x-kubernetes-embedded-resource or a set/map
x-kubernetes-list-type. Pruning walks once with prepared nodes (PruneTree); defaulting walks
only where a default lies below (DefaultTree).

The schema must not change after compilation (a CRD version's schema never does: an update of
the CRD brings new dicts). compile_schema caches by the dict's identity and keeps a reference,
so an id is never reused while cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from gateway.apiextensions.schema._embedded import EMBEDDED, embedded_causes
from gateway.apiextensions.schema._fastcheck import compile_check
from gateway.apiextensions.schema._listtype import list_causes
from gateway.apiextensions.schema.defaulting import DefaultTree
from gateway.apiextensions.schema.pruning import PruneTree
from gateway.apiextensions.schema.validation import schema_causes
from gateway.apimachinery.status import Cause

__all__ = ["CompiledSchema", "compile_schema"]

_CACHE_SIZE = 256
_cache: OrderedDict[int, tuple[Any, CompiledSchema]] = OrderedDict()
_lock = threading.Lock()


def compile_schema(schema: Any) -> CompiledSchema:
    """The CompiledSchema of ``schema``, made once per schema dict (least recently used of
    the last 256 kept)."""
    key = id(schema)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is schema:
            _cache.move_to_end(key)
            return hit[1]
    compiled = CompiledSchema(schema)
    with _lock:
        _cache[key] = (schema, compiled)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def _reachable(schema: Any) -> list[dict]:
    """The schema nodes the embedded-resource and list-type walks can visit."""
    out, stack, seen = [], [schema], set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        properties = node.get("properties")
        if isinstance(properties, dict):
            stack.extend(properties.values())
        stack.append(node.get("additionalProperties"))
        stack.append(node.get("items"))
    return out


class CompiledSchema:
    """One schema, prepared: see the module's docstring."""

    __slots__ = ("_check", "_defaults", "_prune", "has_embedded", "has_list_types", "schema")

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        nodes = _reachable(schema)
        self.has_embedded = any(node.get(EMBEDDED) is True for node in nodes)
        self.has_list_types = any(node.get("x-kubernetes-list-type") in ("set", "map")
                                  for node in nodes)
        self._check = compile_check(schema) if isinstance(schema, dict) else None
        self._prune = PruneTree(schema, has_embedded=self.has_embedded)
        self._defaults = DefaultTree(schema)

    # -- validation ----------------------------------------------------------------------------

    def valid(self, obj: Any) -> bool:
        """True when kube-openapi's validation of ``obj`` finds nothing (the embedded-resource
        and list-type checks aside); False when it may find something."""
        check = self._check.get(type(obj)) if self._check is not None else None
        if check is None:
            return self._check is None
        try:
            return check(obj)
        except Exception:  # the exact validator meets it again, and decides
            return False

    def schema_causes(self, obj: Any, path: str = "") -> list[Cause]:
        """validation.schema_causes(schema, obj, path)."""
        if self._check is None:
            return []
        if self.valid(obj):
            return []
        return schema_causes(self.schema, obj, path)

    def embedded_causes(self, obj: Any, path: str = "") -> list[Cause]:
        """validation.embedded_causes(schema, obj, path)."""
        return embedded_causes(self.schema, obj, path) if self.has_embedded else []

    def list_causes(self, obj: Any, path: str = "") -> list[Cause]:
        """validation.list_causes(schema, obj, path)."""
        return list_causes(self.schema, obj, path) if self.has_list_types else []

    def validate(self, obj: Any, path: str = "") -> list[Cause]:
        """validation.validate(schema, obj, path): all of kube's schema checks, in its order."""
        if self._check is None:
            return []
        return self.schema_causes(obj, path) + self.embedded_causes(obj, path) + \
            self.list_causes(obj, path)

    # -- pruning and defaulting ----------------------------------------------------------------

    def prune(self, obj: Any, *, root: bool = True, nulls: bool = True) -> list[str]:
        """pruning.prune(obj, schema, root=root, nulls=nulls)."""
        return self._prune.prune(obj, root=root, nulls=nulls)

    @property
    def has_defaults(self) -> bool:
        """Whether defaulting can change any object at all."""
        return self._defaults.has_defaults

    def apply_defaults(self, obj: Any) -> None:
        """defaulting.apply_defaults(obj, schema)."""
        self._defaults.apply(obj)

    def defaulted(self, obj: Any) -> Any:
        """``obj`` itself when defaulting would change nothing in it, else a deep copy with
        the defaults applied (for reads from storage, whose objects may be shared)."""
        return self._defaults.defaulted(obj)
