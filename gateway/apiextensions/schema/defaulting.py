"""Structural defaulting of custom resources (apiextensions-apiserver
pkg/apiserver/schema/defaulting/algorithm.go), applied on the way in and on every read from
storage.

A property with a default is set when it is missing, or when it is null and the property is
not nullable; map values (additionalProperties) and list items that are such nulls get their
schema's default too. Defaulting then goes down into properties, additionalProperties and
items, x-kubernetes-preserve-unknown-fields or not (fields the schema does not specify have no
defaults). Defaults are deep-copied. A default of null is no default.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["apply_defaults"]


def _schema(value: Any) -> dict | None:
    return value if isinstance(value, dict) else None


def _default_for_null(value: Any, schema: dict | None) -> bool:
    """isNonNullableNull: a null where the schema does not allow one."""
    return value is None and schema is not None and schema.get("nullable") is not True


def apply_defaults(obj: Any, schema: dict | None) -> None:
    """Default ``obj`` in place from ``schema`` (structural.Default)."""
    schema = _schema(schema)
    if schema is None:
        return
    if isinstance(obj, dict):
        _default_object(obj, schema)
    elif isinstance(obj, list):
        items = _schema(schema.get("items"))
        for i, item in enumerate(obj):
            if items is not None and _default_for_null(item, items):
                obj[i] = item = copy.deepcopy(items.get("default"))
            apply_defaults(item, items)


def _default_object(obj: dict, schema: dict) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for name, prop in properties.items():
        prop = _schema(prop)
        if prop is None or prop.get("default") is None:
            continue
        if name not in obj or _default_for_null(obj[name], prop):
            obj[name] = copy.deepcopy(prop["default"])
    additional = _schema(schema.get("additionalProperties"))
    for name in list(obj):
        if name in properties:
            apply_defaults(obj[name], _schema(properties[name]))
        elif additional is not None:
            if _default_for_null(obj[name], additional):
                obj[name] = copy.deepcopy(additional.get("default"))
            apply_defaults(obj[name], additional)


# -- compiled ----------------------------------------------------------------------------------


class _Node:
    """What defaulting does at one schema node, with every part that can change nothing left
    out: the properties with a default, the children below which something has a default,
    additionalProperties and items when they have a default (for their nulls) or something
    below them has one."""

    __slots__ = ("additional", "additional_default", "additional_nullable", "children",
                 "defaults", "items", "items_default", "items_nullable", "names")

    def __init__(self) -> None:
        self.defaults: tuple[tuple[str, Any, bool], ...] = ()
        self.children: tuple[tuple[str, _Node], ...] = ()
        self.names: frozenset = frozenset()
        self.additional: _Node | None = None
        self.additional_default: Any = None
        self.additional_nullable = True
        self.items: _Node | None = None
        self.items_default: Any = None
        self.items_nullable = True


def _compile(schema: dict | None, memo: dict[int, _Node | None]) -> _Node | None:
    """The node, or None when defaulting below ``schema`` changes nothing."""
    if schema is None:
        return None
    if id(schema) in memo:
        return memo[id(schema)]
    memo[id(schema)] = None  # a schema is a tree; this only guards against a cycle
    node = _Node()
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    node.names = frozenset(properties)
    node.defaults = tuple((name, prop["default"], prop.get("nullable") is True)
                          for name, prop in properties.items()
                          if isinstance(prop, dict) and prop.get("default") is not None)
    node.children = tuple((name, child) for name, child in
                          ((name, _compile(_schema(prop), memo)) for name, prop in
                           properties.items()) if child is not None)
    additional = _schema(schema.get("additionalProperties"))
    if additional is not None:
        node.additional = _compile(additional, memo)
        node.additional_default = additional.get("default")
        node.additional_nullable = additional.get("nullable") is True
    items = _schema(schema.get("items"))
    if items is not None:
        node.items = _compile(items, memo)
        node.items_default = items.get("default")
        node.items_nullable = items.get("nullable") is True
    if not (node.defaults or node.children or node.additional is not None
            or node.additional_default is not None or node.items is not None
            or node.items_default is not None):
        return None
    memo[id(schema)] = node
    return node


def _apply(obj: Any, node: _Node) -> None:
    """apply_defaults with the node's schema."""
    if isinstance(obj, dict):
        for name, default, nullable in node.defaults:
            if name not in obj or (obj[name] is None and not nullable):
                obj[name] = copy.deepcopy(default)
        for name, child in node.children:
            if name in obj:
                _apply(obj[name], child)
        if node.additional is not None or node.additional_default is not None:
            names, extra = node.names, node.additional
            for name in list(obj):
                if name in names:
                    continue
                if obj[name] is None and not node.additional_nullable:
                    obj[name] = copy.deepcopy(node.additional_default)
                if extra is not None:
                    _apply(obj[name], extra)
    elif isinstance(obj, list) and (node.items is not None or node.items_default is not None):
        items = node.items
        for i, item in enumerate(obj):
            if item is None and not node.items_nullable:
                obj[i] = item = copy.deepcopy(node.items_default)
            if items is not None:
                _apply(item, items)


def _changes(obj: Any, node: _Node) -> bool:
    """Whether _apply would change anything: a default to set below ``obj``."""
    if isinstance(obj, dict):
        for name, _default, nullable in node.defaults:
            if name not in obj or (obj[name] is None and not nullable):
                return True
        for name, child in node.children:
            if name in obj and _changes(obj[name], child):
                return True
        if node.additional is not None or node.additional_default is not None:
            names, extra = node.names, node.additional
            fills = node.additional_default is not None and not node.additional_nullable
            for name, value in obj.items():
                if name in names:
                    continue
                if value is None:
                    if fills:
                        return True
                elif extra is not None and _changes(value, extra):
                    return True
    elif isinstance(obj, list) and (node.items is not None or node.items_default is not None):
        items = node.items
        fills = node.items_default is not None and not node.items_nullable
        for item in obj:
            if item is None:
                if fills:
                    return True
            elif items is not None and _changes(item, items):
                return True
    return False


class DefaultTree:
    """``apply_defaults`` for one schema, prepared once: only the parts of the schema with a
    default anywhere below them are walked."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self._root = _compile(_schema(schema), {})

    @property
    def has_defaults(self) -> bool:
        """Whether defaulting can change anything at all."""
        return self._root is not None

    def apply(self, obj: Any) -> None:
        """apply_defaults(obj, schema): ``obj`` defaulted in place."""
        if self._root is not None:
            _apply(obj, self._root)

    def changes(self, obj: Any) -> bool:
        """Whether apply(obj) would change ``obj`` (reads only)."""
        return self._root is not None and _changes(obj, self._root)

    def defaulted(self, obj: Any) -> Any:
        """``obj`` itself when defaulting changes nothing in it, else a defaulted deep copy."""
        if not self.changes(obj):
            return obj
        out = copy.deepcopy(obj)
        assert self._root is not None  # changes() found a default to set
        _apply(out, self._root)
        return out
