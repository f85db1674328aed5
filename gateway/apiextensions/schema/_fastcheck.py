"""A schema's kube-openapi validation compiled once into a yes-or-don't-know check.

``compile_check(schema)`` gives a table from a value's Python type to a function that answers
True only when ``_openapi.validate(schema, value, name)`` reports no error at all. False means
"maybe not": the caller then runs the exact validator, which alone words errors. So every
answer here needs only to be sound, never to explain itself, and the check allocates nothing
on the way (no Result, no Error, no path string).

What each node checks is what _openapi.validate checks, derived from the same schema keys with
the same helpers (_integer, _number, formats, the type table), and where a check is rare or
subtle the exact helper itself runs (multipleOf, uniqueItems, enum misses, composition). The
type check is not re-derived at all: _openapi._type is asked once per Go kind at compile time
(its answer depends on the kind alone, and for a float64 on whether it is a JSON integer).
Values of any other Python type than dict, list, str, int (int64), float (finite), bool and
None, and a schema node whose compilation failed, answer False, and the exact path decides.
The data must be decoded JSON: the exact validator sorts object keys, the check does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gateway.apiextensions.schema import _openapi, formats
from gateway.apiextensions.schema._gofmt import (
    INT64_MAX,
    INT64_MIN,
    as_float,
    converted_equal,
    deep_equal,
    is_int,
    is_json_integer,
    trunc_int64,
)
from gateway.apiextensions.schema._regexp import matcher

Check = Callable[[Any], bool]
#: A compiled node: the check for each Python type a JSON value may have.
Node = dict[type, Check]

_MISSING = object()


def _true(value: Any) -> bool:
    return True


def _false(value: Any) -> bool:
    return False


_ANY: Node = {dict: _true, list: _true, str: _true, int: _true, float: _true, bool: _true,
              type(None): _true}


def node_valid(node: Node, value: Any) -> bool:
    """True when ``value`` is valid for ``node`` for sure."""
    check = node.get(type(value))
    return check is not None and check(value)


class _Compiler:
    def __init__(self) -> None:
        self.memo: dict[int, tuple[Any, Node]] = {}
        self.types: dict[tuple, bool] = {}

    def node(self, schema: Any) -> Node:
        if not isinstance(schema, dict):
            return _ANY
        seen = self.memo.get(id(schema))
        if seen is not None and seen[0] is schema:
            return seen[1]
        try:
            node = self._compile(schema)
        except Exception:  # the exact validator will meet (and report) whatever this was
            node = {}
        self.memo[id(schema)] = (schema, node)
        return node

    def exact(self, schema: dict) -> Check:
        """Exact validity of a sub-schema: the check, then the exact validator."""
        node = self.node(schema)

        def valid(value: Any) -> bool:
            return node_valid(node, value) or _openapi.validate(schema, value, "").valid
        return valid

    # -- one schema node -----------------------------------------------------------------------

    def _compile(self, schema: dict) -> Node:
        fmt = formats.supported(schema.get("format"))
        types = tuple(_openapi._types(schema))

        def type_ok(sample: Any) -> bool:
            """_type's verdict on a value of the sample's kind (which only the types and the
            format decide, for a value that is not null)."""
            if not (fmt or types):
                return True
            key = (types, fmt, repr(sample))  # the samples: True "" 0 1.0 0.5 [] {}
            if key not in self.types:
                self.types[key] = _openapi._type(schema, fmt, sample, "").valid
            return self.types[key]

        extra = self._composition(schema)
        enum = self._enum(schema)
        node: Node = {type(None): _true if _openapi.validate(schema, None, "").valid else _false}
        node[bool] = self._bool(type_ok(True), extra, enum)
        node[str] = self._string(schema, fmt, type_ok(""), extra, enum)
        node[int] = self._int(schema, type_ok(0), extra, enum)
        node[float] = self._float(schema, type_ok(1.0), type_ok(0.5), extra, enum)
        node[list] = self._array(schema, type_ok([]), extra, enum)
        node[dict] = self._object(schema, type_ok({}), extra, enum)
        return node

    def _composition(self, schema: dict) -> Check | None:
        """allOf, anyOf, oneOf and not, exactly (each branch checked, then validated)."""
        parts = {key: [self.exact(s) for s in _openapi._subschemas(schema, key)]
                 for key in ("anyOf", "oneOf", "allOf")}
        negated = schema.get("not")
        negated = self.exact(negated) if isinstance(negated, dict) else None
        any_of, one_of, all_of = parts["anyOf"], parts["oneOf"], parts["allOf"]
        if not (any_of or one_of or all_of or negated):
            return None

        def composition(value: Any) -> bool:
            if any_of and not any(valid(value) for valid in any_of):
                return False
            if one_of and sum(1 for valid in one_of if valid(value)) != 1:
                return False
            if all_of and not all(valid(value) for valid in all_of):
                return False
            return negated is None or not negated(value)
        return composition

    @staticmethod
    def _enum(schema: dict) -> Check | None:
        """basicCommonValidator's enum: a value equal to one of the same Go kind is found in a
        set; any other value goes through reflect's conversions (converted_equal)."""
        values = schema.get("enum")
        if not isinstance(values, list) or not values:
            return None
        same: dict[type, set] = {str: set(), int: set(), float: set(), bool: set()}
        for value in values:
            kind = type(value)
            if kind is int and not is_int(value):
                continue
            if kind in same and (kind is not float or value == value):
                same[kind].add(value)
        frozen = {kind: frozenset(found) for kind, found in same.items()}
        empty: frozenset = frozenset()

        def enum(value: Any) -> bool:
            try:
                if value in frozen.get(type(value), empty):
                    return True
            except TypeError:  # unhashable: a list or an object
                pass
            return any(converted_equal(value, candidate) for candidate in values)
        return enum

    @staticmethod
    def _common(check: Check | None, extra: Check | None, enum: Check | None) -> Check:
        """The kind's own check, then composition and enum, which every kind runs."""
        steps = tuple(step for step in (check, extra, enum) if step is not None)
        if not steps:
            return _true
        if len(steps) == 1:
            return steps[0]
        if len(steps) == 2:
            first, second = steps

            def both(value: Any) -> bool:
                return first(value) and second(value)
            return both

        def every(value: Any) -> bool:
            return all(step(value) for step in steps)
        return every

    def _bool(self, type_ok: bool, extra: Check | None, enum: Check | None) -> Check:
        return self._common(None, extra, enum) if type_ok else _false

    def _string(self, schema: dict, fmt: str, type_ok: bool, extra: Check | None,
                enum: Check | None) -> Check:
        if not type_ok:
            return _false
        longest = _openapi._integer(schema, "maxLength")
        shortest = _openapi._integer(schema, "minLength")
        pattern = schema.get("pattern")
        search = None
        if isinstance(pattern, str) and pattern:
            try:
                search = matcher(pattern)
            except re.error:
                return _false  # every string fails: too long, too short or the pattern
        form = formats.CHECKS[fmt.replace("-", "")] if fmt else None
        if longest is None and shortest is None and search is None and form is None:
            return self._common(None, extra, enum)

        def string(value: str) -> bool:
            if longest is not None and len(value) > longest:
                return False
            if shortest is not None and len(value) < shortest:
                return False
            if search is not None and not search(value):
                return False
            return form is None or form(value)
        return self._common(string, extra, enum)

    @staticmethod
    def _bounds(schema: dict) -> tuple[Any, ...]:
        low, high = _openapi._number(schema, "minimum"), _openapi._number(schema, "maximum")
        return (low, schema.get("exclusiveMinimum") is True, high,
                schema.get("exclusiveMaximum") is True, _openapi._number(schema, "multipleOf"))

    def _int(self, schema: dict, type_ok: bool, extra: Check | None,
             enum: Check | None) -> Check:
        if not type_ok:
            return _false
        low, low_excl, high, high_excl, factor = self._bounds(schema)
        # MinimumNativeType/MaximumNativeType: an int64 against the bound truncated to one.
        low = None if low is None else trunc_int64(low)
        high = None if high is None else trunc_int64(high)

        def integer(value: int) -> bool:
            if not INT64_MIN <= value <= INT64_MAX:
                return False  # a float64 to kube: the exact path
            if low is not None and (value <= low if low_excl else value < low):
                return False
            if high is not None and (value >= high if high_excl else value > high):
                return False
            return factor is None or _openapi._multiple_of(factor, value, "") is None
        return self._common(integer, extra, enum)

    def _float(self, schema: dict, integral_ok: bool, fraction_ok: bool,
               extra: Check | None, enum: Check | None) -> Check:
        low, low_excl, high, high_excl, factor = self._bounds(schema)
        low = None if low is None else as_float(low)
        high = None if high is None else as_float(high)

        by_value = integral_ok != fraction_ok  # "integer" types take integral floats

        def number(value: float) -> bool:
            if value - value != 0.0:
                return False  # NaN or infinite: the exact path
            if by_value and not (integral_ok if is_json_integer(value) else fraction_ok):
                return False
            if low is not None and (value <= low if low_excl else value < low):
                return False
            if high is not None and (value >= high if high_excl else value > high):
                return False
            return factor is None or _openapi._multiple_of(factor, value, "") is None
        if not integral_ok and not fraction_ok:
            return _false
        return self._common(number, extra, enum)

    def _array(self, schema: dict, type_ok: bool, extra: Check | None,
               enum: Check | None) -> Check:
        if not type_ok:
            return _false
        items = schema.get("items")
        each = self.node(items) if isinstance(items, dict) else None
        if each is _ANY:
            each = None
        tuple_items = [self.node(s) for s in items] if isinstance(items, list) else None
        fewest = _openapi._integer(schema, "minItems")
        most = _openapi._integer(schema, "maxItems")
        unique = schema.get("uniqueItems") is True

        def array(value: list) -> bool:
            size = len(value)
            if (fewest is not None and size < fewest) or (most is not None and size > most):
                return False
            if each is not None:
                for item in value:
                    check = each.get(type(item))
                    if check is None or not check(item):
                        return False
            if tuple_items is not None:
                for node, item in zip(tuple_items, value, strict=False):
                    if not node_valid(node, item):
                        return False
            return not unique or not any(
                deep_equal(a, b) for i, a in enumerate(value) for b in value[:i])
        if each is None and tuple_items is None and fewest is None and most is None \
                and not unique:
            return self._common(None, extra, enum)
        return self._common(array, extra, enum)

    def _object(self, schema: dict, type_ok: bool, extra: Check | None,
                enum: Check | None) -> Check:
        if not type_ok:
            return _false
        fewest = _openapi._integer(schema, "minProperties")
        most = _openapi._integer(schema, "maxProperties")
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        children = tuple((key, node) for key, node in
                         ((key, self.node(sub)) for key, sub in properties.items())
                         if node is not _ANY)
        required = schema.get("required")
        required = tuple(k for k in required if isinstance(k, str)) \
            if isinstance(required, list) else ()
        additional = schema.get("additionalProperties")
        closed = additional is False
        extra_node = self.node(additional) if isinstance(additional, dict) else None
        if extra_node is _ANY:
            extra_node = None
        patterns = schema.get("patternProperties")
        by_pattern = []
        for pattern, sub in sorted(patterns.items()) if isinstance(patterns, dict) else ():
            if isinstance(sub, dict):
                try:
                    by_pattern.append((matcher(pattern), self.node(sub)))
                except re.error:  # _patterns skips a pattern that does not compile
                    continue
        names = frozenset(properties)

        def keys_ok(value: dict) -> bool:
            """additionalProperties and patternProperties, key by key."""
            for key, item in value.items():
                known = key in names
                matched = [node for search, node in by_pattern if search(key)] \
                    if by_pattern else ()
                if closed:
                    if not known and not matched:
                        return False
                    if known:
                        continue  # patterns are checked for unknown keys only
                for node in matched:
                    if not node_valid(node, item):
                        return False
                if not known and not matched and extra_node is not None and \
                        not node_valid(extra_node, item):
                    return False
            return True

        def known_only(value: dict) -> bool:
            return value.keys() <= names

        scan = keys_ok if by_pattern or extra_node is not None else \
            known_only if closed else None

        def obj(value: dict) -> bool:
            if fewest is not None or most is not None:
                size = len(value)
                if (fewest is not None and size < fewest) or (most is not None and size > most):
                    return False
            for key, node in children:
                item = value.get(key, _MISSING)
                if item is not _MISSING:
                    check = node.get(type(item))
                    if check is None or not check(item):
                        return False
            for key in required:
                if key not in value:
                    return False
            return scan is None or scan(value)
        return self._common(obj, extra, enum)


def compile_check(schema: Any) -> Node:
    """The check of ``schema``'s root."""
    return _Compiler().node(schema)
