"""Pruning of what a structural schema does not specify, as kube-apiserver v1.32 prunes
custom resources when it decodes them (unstructuredSchemaCoercer.apply).

Three steps, in kube's order: unknown fields go (schema/pruning/algorithm.go), then
non-nullable nulls that have no default (schema/defaulting/prunenulls.go), then every embedded
resource's metadata is read as an ObjectMeta and written back (schema/objectmeta), which drops
its unknown and empty fields. The first and last steps report what they dropped, each list
sorted: pruned fields as dotted paths ("spec.foo", "spec.items[0].bar", map keys after a dot:
"spec.labels.a"), embedded metadata fields after the embedded object's field.Path
("spec.template.metadata.foo", "spec.templates[web].metadata.foo").
"""

from __future__ import annotations

from typing import Any

from gateway.apiextensions.schema._embedded import meta_error, walk
from gateway.apiextensions.schema._metadata import coerce_meta

__all__ = ["prune", "prune_non_nullable_nulls", "prune_unknown"]

_META_FIELDS = ("apiVersion", "kind", "metadata")
EMBEDDED = "x-kubernetes-embedded-resource"
PRESERVE = "x-kubernetes-preserve-unknown-fields"


def prune(obj: Any, schema: dict, *, root: bool = True, nulls: bool = True) -> list[str]:
    """Prune ``obj`` in place as kube does on the way in (and from storage); the paths
    dropped, for the `unknown field "<path>"` warnings or errors. ``root``: ``obj`` is a
    whole custom resource, whose apiVersion, kind and metadata stay (its metadata is ObjectMeta
    decoding's business).

    The first two steps share one walk (``PruneTree``): both follow properties,
    additionalProperties and items to the same sub-schemas, and each removes only what the
    other does not look at again (unknown keys; nulls, which have nothing below them). The
    result is prune_unknown, then prune_non_nullable_nulls, then coerce_embedded_metadata.
    The tree is made anew each call (a schema changed in place is read as it is now)."""
    return PruneTree(schema).prune(obj, root=root, nulls=nulls)


def _null_dropped(value: Any, schema: dict | None) -> bool:
    """prune_non_nullable_nulls of a field the first step leaves alone (an embedded
    resource's apiVersion, kind, metadata): whether it goes, else its own nulls go."""
    if _droppable_null(value, schema):
        return True
    prune_non_nullable_nulls(value, schema)
    return False


def prune_unknown(obj: Any, schema: Any, *, root: bool = True) -> list[str]:
    """PruneWithOptions with unknown field paths tracked: the sorted paths removed."""
    if root:
        schema = {**schema, EMBEDDED: True} if isinstance(schema, dict) else {EMBEDDED: True}
    found: list[str] = []
    _prune(obj, schema if isinstance(schema, dict) else None, "", found)
    return sorted(found)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _drop_all(obj: dict, path: str, found: list[str]) -> None:
    found.extend(_join(path, name) for name in obj)
    obj.clear()


def _prune(value: Any, schema: dict | None, path: str, found: list[str]) -> None:
    if schema is not None and schema.get(PRESERVE) is True:
        _keep(value, schema, path, found)
    elif isinstance(value, dict):
        if schema is None:
            _drop_all(value, path, found)
            return
        properties, additional = _children(schema)
        for name in list(value):
            if schema.get(EMBEDDED) is True and name in _META_FIELDS:
                continue
            if name in properties:
                _prune(value[name], _schema(properties[name]), _join(path, name), found)
            elif additional is not None:
                _prune(value[name], _schema(additional), _join(path, name), found)
            else:
                if name not in _META_FIELDS or path:
                    found.append(_join(path, name))
                del value[name]
    elif isinstance(value, list):
        items = _schema(schema.get("items")) if schema is not None else None
        for i, item in enumerate(value):
            _prune(item, items, f"{path}[{i}]", found)


def _keep(value: Any, schema: dict, path: str, found: list[str]) -> None:
    """skipPrune: under x-kubernetes-preserve-unknown-fields unknown fields stay, but what
    the schema specifies is pruned as usual."""
    if isinstance(value, dict):
        properties, additional = _children(schema)
        for name in value:
            if schema.get(EMBEDDED) is True and name in _META_FIELDS:
                continue
            if name in properties:
                _prune(value[name], _schema(properties[name]), _join(path, name), found)
            elif additional is not None:
                _prune(value[name], _schema(additional), _join(path, name), found)
    elif isinstance(value, list):
        items = _schema(schema.get("items"))
        if items is not None:
            for i, item in enumerate(value):
                _keep(item, items, f"{path}[{i}]", found)


def _schema(value: Any) -> dict | None:
    """A sub-schema, or None where the structural schema has none (additionalProperties
    given as a boolean)."""
    return value if isinstance(value, dict) else None


def _children(schema: dict) -> tuple[dict, Any]:
    properties = schema.get("properties")
    return (properties if isinstance(properties, dict) else {},
            schema.get("additionalProperties"))


# -- non-nullable nulls ------------------------------------------------------------------------


def _field_schema(schema: dict | None, name: str) -> dict | None:
    if schema is None:
        return None
    properties, additional = _children(schema)
    if name in properties:
        return _schema(properties[name])
    return _schema(additional)


def _droppable_null(value: Any, schema: dict | None) -> bool:
    return value is None and schema is not None and schema.get("nullable") is not True \
        and schema.get("default") is None


def prune_non_nullable_nulls(obj: Any, schema: Any) -> None:
    """PruneNonNullableNullsWithoutDefaults: a null map value whose schema neither allows
    null nor has a default goes (one with a default is defaulting's). List items stay."""
    schema = _schema(schema)
    if isinstance(obj, dict):
        for name in list(obj):
            sub = _field_schema(schema, name)
            if _droppable_null(obj[name], sub):
                del obj[name]
            else:
                prune_non_nullable_nulls(obj[name], sub)
    elif isinstance(obj, list):
        items = _schema(schema.get("items")) if schema is not None else None
        for item in obj:
            prune_non_nullable_nulls(item, items)


# -- embedded metadata -------------------------------------------------------------------------


def coerce_embedded_metadata(obj: Any, schema: Any, *, root: bool = True) -> list[str]:
    """CoerceWithOptions: each embedded resource's metadata round-tripped through ObjectMeta;
    the sorted paths of the unknown fields it lost. Metadata that does not decode stays as it
    is (kube fails the request; validation reports it)."""
    found: list[str] = []
    for path, resource in walk(schema, obj, ""):
        if (root and not path) or not isinstance(resource.get("metadata"), dict):
            continue
        if meta_error(resource["metadata"]) is None:
            meta_path = f"{path}.metadata" if path else "metadata"
            found += coerce_meta(resource["metadata"], meta_path)
    return sorted(found)


# -- compiled ----------------------------------------------------------------------------------


class _Node:
    """One schema node as pruning reads it: children for every name in properties (None for
    a property whose schema is no object), additionalProperties (``open``: it is given at
    all; ``additional``: its node when it is a schema), items."""

    __slots__ = ("additional", "children", "droppable", "embedded", "items", "open", "preserve",
                 "schema")

    def __init__(self, schema: dict) -> None:
        self.schema = schema
        self.preserve = schema.get(PRESERVE) is True
        self.embedded = schema.get(EMBEDDED) is True
        self.droppable = schema.get("nullable") is not True and schema.get("default") is None
        self.children: dict[str, _Node | None] = {}
        self.open = False
        self.additional: _Node | None = None
        self.items: _Node | None = None


def _compile(schema: Any, memo: dict[int, _Node]) -> _Node | None:
    if not isinstance(schema, dict):
        return None
    if id(schema) in memo:
        return memo[id(schema)]
    node = memo[id(schema)] = _Node(schema)
    properties, additional = _children(schema)
    node.children = {name: _compile(sub, memo) for name, sub in properties.items()}
    node.open = additional is not None
    node.additional = _compile(additional, memo)
    node.items = _compile(schema.get("items"), memo)
    return node


class PruneTree:
    """``prune`` for one schema, its walk prepared once: ``PruneTree(schema).prune(obj,
    root=..., nulls=...)`` is ``prune(obj, schema, root=..., nulls=...)``. ``has_embedded``:
    whether any node reachable through properties, additionalProperties and items is an
    embedded resource (without one the metadata step has nothing to do)."""

    def __init__(self, schema: Any, *, has_embedded: bool = True) -> None:
        self.schema = schema
        self.has_embedded = has_embedded
        self._root = _compile(schema, {})
        self._top = self._root if self._root is not None else _Node({})

    def prune(self, obj: Any, *, root: bool = True, nulls: bool = True) -> list[str]:
        found: list[str] = []
        if isinstance(obj, dict | list):
            if root:
                _tree_pass(obj, self._top, "", found, nulls, True)
            else:
                node = self._root
                _tree_pass(obj, node, "", found, nulls, node is not None and node.embedded)
        if found:
            found.sort()
        if self.has_embedded:
            return found + coerce_embedded_metadata(obj, self.schema, root=root)
        return found


def _tree_pass(value: Any, node: _Node | None, path: str, found: list[str], nulls: bool,
               embedded: bool, preserve: bool = False) -> None:
    """Unknown keys pruned (``embedded``: the node's mark, or the root's) and, with ``nulls``,
    non-nullable nulls without a default dropped, below ``value``. Under
    x-kubernetes-preserve-unknown-fields (the node's, or ``preserve``: the items of a
    preserving array) unknown keys stay."""
    preserve = preserve or (node is not None and node.preserve)
    if isinstance(value, dict):
        if node is None:
            _drop_all(value, path, found)
            return
        children = node.children
        doomed = None
        for name, item in value.items():
            if name in children:
                sub = children[name]
            elif node.open or (embedded and name in _META_FIELDS):
                sub = node.additional
            elif preserve:
                continue
            else:
                if name not in _META_FIELDS or path:
                    found.append(_join(path, name))
                doomed = doomed or []
                doomed.append(name)
                continue
            if embedded and name in _META_FIELDS:
                if nulls and _null_dropped(item, sub.schema if sub is not None else None):
                    doomed = doomed or []
                    doomed.append(name)
            elif item is None:
                if nulls and sub is not None and sub.droppable:
                    doomed = doomed or []
                    doomed.append(name)
            elif isinstance(item, dict | list):
                _tree_pass(item, sub, _join(path, name), found, nulls,
                           sub is not None and sub.embedded)
        if doomed:
            for name in doomed:
                del value[name]
    elif isinstance(value, list):
        items = node.items if node is not None else None
        if preserve and items is None:
            return
        embedded = items is not None and items.embedded
        for i, item in enumerate(value):
            if isinstance(item, dict | list):
                _tree_pass(item, items, f"{path}[{i}]", found, nulls, embedded, preserve)
