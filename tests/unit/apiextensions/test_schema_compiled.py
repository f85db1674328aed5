"""compile_schema's answers against the module-level functions', on generated schemas and
objects (valid, nearly valid and wrong), and schema patterns run by Python's re against RE2.

The cases are generated from fixed seeds (no hypothesis here): random structural schemas with
the features kube-openapi checks (types, nullable, int-or-string, lengths, patterns, formats,
bounds, multipleOf, enums, properties, required, additionalProperties, patternProperties,
items, uniqueItems, allOf/anyOf/oneOf/not, embedded resources, list types, defaults,
x-kubernetes-preserve-unknown-fields), and objects made from them with mistakes sown in.
Every answer must be the same: causes (messages, fields, order), pruned paths and pruned
objects, defaulted objects.
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any

import pytest

from gateway.apiextensions.schema import _openapi, compile_schema
from gateway.apiextensions.schema._regexp import _python_equivalent, matcher, search
from gateway.apiextensions.schema.defaulting import apply_defaults
from gateway.apiextensions.schema.pruning import (
    coerce_embedded_metadata,
    prune,
    prune_non_nullable_nulls,
    prune_unknown,
)
from gateway.apiextensions.schema.validation import (
    embedded_causes,
    list_causes,
    schema_causes,
    validate,
)

re2 = pytest.importorskip("re2")

NAMES = ["a", "b", "c", "d", "apiVersion", "kind", "metadata", "x1"]
PATTERNS = ["^[a-z]+$", "[0-9]", "^a", "b$", "^(x|y)?z*$", "^[^@\\s]+@[^@\\s]+$", "(a+)+$",
            "\\pL", "^[[:alpha:]]+$", "+", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "\\d{2,3}",
            "^(?i)ab$", "a\\z", "^[0-9]+(Ki|Mi|Gi)?$"]
FORMATS = ["date-time", "email", "uuid", "int32", "byte", "hostname", "ipv4", "date"]
STRINGS = ["", "a", "abc", "xyz", "12", "a1", "ab@cd", "2024-05-01T12:34:56Z", "é", "zz\n",
           "10.0.0.1", "123e4567-e89b-12d3-a456-426614174000", "aGVsbG8=", "500Mi", "-x-"]


class Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, items: list) -> Any:
        return self.rng.choice(items)

    # -- schemas -------------------------------------------------------------------------------

    def schema(self, depth: int = 0) -> dict:
        kinds = ["string", "integer", "number", "boolean"] + (["object", "array"] * 2
                                                              if depth < 3 else [])
        kind = self.pick(kinds)
        out: dict[str, Any] = {"type": kind}
        if self.chance(0.05):
            out = {"x-kubernetes-int-or-string": True,
                   "anyOf": [{"type": "integer"}, {"type": "string"}]}
            kind = "int-or-string"
        if self.chance(0.15):
            out["nullable"] = True
        getattr(self, "_" + kind.replace("-", "_"))(out, depth)
        if self.chance(0.08):
            out[self.pick(["anyOf", "oneOf", "allOf"])] = [self.fragment()
                                                           for _ in range(self.rng.randint(1, 3))]
        if self.chance(0.05):
            out["not"] = self.fragment()
        return out

    def fragment(self) -> dict:
        return self.pick([{"required": ["a"]}, {"properties": {"a": {"maxLength": 2}}},
                          {"minimum": 3}, {"type": "string"}, {"maxItems": 1},
                          {"enum": ["a", 1]}, {"pattern": "^a"}, {"type": ["integer", "null"]}])

    def _int_or_string(self, out: dict, depth: int) -> None:
        if self.chance(0.3):
            out["maxLength"] = 3

    def _string(self, out: dict, depth: int) -> None:
        if self.chance(0.3):
            out["maxLength"] = self.rng.randint(0, 6)
        if self.chance(0.2):
            out["minLength"] = self.rng.randint(0, 3)
        if self.chance(0.35):
            out["pattern"] = self.pick(PATTERNS)
        if self.chance(0.15):
            out["format"] = self.pick(FORMATS)
        if self.chance(0.15):
            out["enum"] = self.rng.sample(STRINGS, 3) + ([1] if self.chance(0.2) else [])
        if self.chance(0.1):
            out["default"] = self.pick(STRINGS)

    def _integer(self, out: dict, depth: int) -> None:
        self._numbers(out, [0, 3, -2, 2.5, 10, 1e30])
        if self.chance(0.15):
            out["enum"] = [1, 2, 3.0, 65, "A"][: self.rng.randint(1, 5)]
        if self.chance(0.1):
            out["default"] = self.pick([0, 7, 2])

    def _number(self, out: dict, depth: int) -> None:
        self._numbers(out, [0, 1.5, -2, 0.1, 100])
        if self.chance(0.1):
            out["enum"] = [1.5, 2, 0.5]
        if self.chance(0.1):
            out["default"] = 1.5

    def _numbers(self, out: dict, bounds: list) -> None:
        if self.chance(0.35):
            out["minimum"] = self.pick(bounds)
            out["exclusiveMinimum"] = self.chance(0.3)
        if self.chance(0.35):
            out["maximum"] = self.pick(bounds) + 5
            out["exclusiveMaximum"] = self.chance(0.3)
        if self.chance(0.1):
            out["multipleOf"] = self.pick([2, 0.5, 3, 0, -1])

    def _boolean(self, out: dict, depth: int) -> None:
        if self.chance(0.1):
            out["enum"] = [True]
        if self.chance(0.1):
            out["default"] = False

    def _object(self, out: dict, depth: int) -> None:
        names = self.rng.sample(NAMES, self.rng.randint(0, 4))
        if names or self.chance(0.5):
            out["properties"] = {name: self.schema(depth + 1) for name in names}
        if names and self.chance(0.4):
            out["required"] = self.rng.sample(names, self.rng.randint(1, len(names))) + (
                ["zz"] if self.chance(0.1) else [])
        roll = self.rng.random()
        if roll < 0.15:
            out["additionalProperties"] = False
        elif roll < 0.25:
            out["additionalProperties"] = True
        elif roll < 0.4:
            out["additionalProperties"] = self.schema(depth + 1)
        if self.chance(0.15):
            out["patternProperties"] = {"^x": self.schema(depth + 1), "+": {"type": "string"}}
        if self.chance(0.1):
            out["minProperties"] = 1
        if self.chance(0.1):
            out["maxProperties"] = 2
        if self.chance(0.1):
            out["x-kubernetes-preserve-unknown-fields"] = True
        if self.chance(0.08):
            out["x-kubernetes-embedded-resource"] = True
        if self.chance(0.05):
            out["default"] = {"a": "x"}

    def _array(self, out: dict, depth: int) -> None:
        out["items"] = self.schema(depth + 1)
        if self.chance(0.2):
            out["maxItems"] = self.rng.randint(0, 3)
        if self.chance(0.15):
            out["minItems"] = 1
        if self.chance(0.1):
            out["uniqueItems"] = True
        if self.chance(0.15):
            item_kind = out["items"].get("type")
            if item_kind == "object":
                out["x-kubernetes-list-type"] = "map"
                out["x-kubernetes-list-map-keys"] = ["a"]
            else:
                out["x-kubernetes-list-type"] = "set"
        if self.chance(0.05):
            out["items"] = [self.schema(depth + 1), {"type": "string"}]

    # -- values --------------------------------------------------------------------------------

    def value(self, schema: Any, depth: int = 0) -> Any:
        """Mostly what the schema asks for; now and then something else."""
        if not isinstance(schema, dict) or self.chance(0.06) or depth > 5:
            return self.anything(depth)
        if self.chance(0.05):
            return None
        if "enum" in schema and self.chance(0.6):
            return copy.deepcopy(self.pick(schema["enum"]))
        kind = schema.get("type")
        if schema.get("x-kubernetes-int-or-string"):
            kind = self.pick(["integer", "string"])
        if kind == "string":
            return self.pick(STRINGS) if self.chance(0.8) else self.pick(["ab", "a" * 9, "x@y"])
        if kind == "integer":
            return self.pick([0, 1, 2, 3, 4, 7, 8, 10, 16, -3, 2**70, 3.0, 2.5, True])
        if kind == "number":
            return self.pick([0.5, 1.5, 2, 7.25, -1.0, 100.0, 0.1, 3])
        if kind == "boolean":
            return self.pick([True, False, 0])
        if kind == "array":
            items = schema.get("items")
            size = self.rng.randint(0, 3)
            if isinstance(items, list):
                return [self.value(items[i % len(items)], depth + 1) for i in range(size)]
            out = [None if self.chance(0.1) else self.value(items, depth + 1)
                   for _ in range(size)]
            if out and self.chance(0.2):
                out.append(copy.deepcopy(out[0]))
            return out
        if kind == "object":
            out = {}
            properties = schema.get("properties") or {}
            for name, sub in properties.items():
                if self.chance(0.75):
                    out[name] = self.value(sub, depth + 1)
            if self.chance(0.3):
                extra = self.pick(["zz", "x9", "apiVersion", "kind", "metadata", "other"])
                out[extra] = None if self.chance(0.2) else \
                    self.value(schema.get("additionalProperties"), depth + 1)
            if schema.get("x-kubernetes-embedded-resource") and self.chance(0.8):
                out.setdefault("apiVersion", self.pick(["v1", "a/b/c", ""]))
                out.setdefault("kind", self.pick(["Pod", "bad kind", 3]))
                if self.chance(0.6):
                    out["metadata"] = self.pick([{"name": "x", "junk": 1}, {"name": "a/b"},
                                                 {"labels": {"a": None}}, None, "m"])
            return out
        return self.anything(depth)

    def anything(self, depth: int) -> Any:
        if depth > 4:
            return self.pick(["s", 1, None])
        return self.pick(["s", "", 0, 3, -1, 1.5, 2.0, True, False, None, [], {}, [1, "a"],
                          {"a": "x", "b": None}, {"zz": [None, {"q": 1}]}])


def _strict(value: Any) -> str:
    """Equality that tells 1, 1.0 and True apart (and keeps key order)."""
    return repr(value)


def _check_validation(schema: dict, obj: Any) -> bool:
    compiled = compile_schema(schema)
    exact = _openapi.validate(schema, obj, "").valid
    assert compiled.valid(obj) == exact, (schema, obj)
    for path in ("", "spec"):
        assert compiled.schema_causes(obj, path) == schema_causes(schema, obj, path)
        assert compiled.embedded_causes(obj, path) == embedded_causes(schema, obj, path)
        assert compiled.list_causes(obj, path) == list_causes(schema, obj, path)
        assert compiled.validate(obj, path) == validate(schema, obj, path)
    return exact


def _reference_prune(obj: Any, schema: Any, root: bool, nulls: bool) -> list[str]:
    """The three steps one after the other, as kube runs them."""
    paths = prune_unknown(obj, schema, root=root)
    if nulls:
        prune_non_nullable_nulls(obj, schema)
    return paths + coerce_embedded_metadata(obj, schema, root=root)


def _check_pruning(schema: dict, obj: Any) -> None:
    compiled = compile_schema(schema)
    for root in (True, False):
        for nulls in (True, False):
            want_obj = copy.deepcopy(obj)
            want = _reference_prune(want_obj, schema, root, nulls)
            public_obj, compiled_obj = copy.deepcopy(obj), copy.deepcopy(obj)
            assert prune(public_obj, schema, root=root, nulls=nulls) == want
            assert compiled.prune(compiled_obj, root=root, nulls=nulls) == want
            assert _strict(public_obj) == _strict(want_obj)
            assert _strict(compiled_obj) == _strict(want_obj)


def _check_defaulting(schema: dict, obj: Any) -> None:
    compiled = compile_schema(schema)
    want, got = copy.deepcopy(obj), copy.deepcopy(obj)
    apply_defaults(want, schema)
    compiled.apply_defaults(got)
    assert _strict(got) == _strict(want)
    before = _strict(obj)
    out = compiled.defaulted(obj)
    assert _strict(out) == _strict(want)
    assert _strict(obj) == before
    assert (out is obj) == (_strict(want) == before)
    if not compiled.has_defaults:
        assert _strict(want) == before


@pytest.mark.parametrize("seed", range(8))
def test_compiled_schema_answers_as_the_functions_do(seed: int) -> None:
    gen = Gen(seed)
    valid = invalid = 0
    for _ in range(150):
        schema = {"type": "object", "properties": {"spec": gen.schema(1)}}
        if gen.chance(0.3):
            schema["properties"]["status"] = gen.schema(1)
        for _ in range(6):
            obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"},
                   "spec": gen.value(schema["properties"]["spec"])}
            if gen.chance(0.2):
                obj["status"] = gen.value(schema["properties"].get("status"))
            body = {k: v for k, v in obj.items() if k != "metadata"}
            if _check_validation(schema, body):
                valid += 1
            else:
                invalid += 1
            _check_pruning(schema, obj)
            _check_defaulting(schema, obj)
    assert valid > 100 and invalid > 100, (valid, invalid)


def test_the_fast_check_leaves_odd_values_to_the_exact_validator() -> None:
    schema = {"type": "object", "properties": {
        "n": {"type": "integer", "maximum": 10}, "f": {"type": "number"},
        "t": {"type": "array"}, "s": {"type": "string", "maxLength": 2}}}
    compiled = compile_schema(schema)
    for obj in ({"n": 2**70}, {"f": float("nan")}, {"f": float("inf")}, {"t": (1, 2)},
                {"n": 3}, {"s": "abc"}, {"s": "ab"}, ("x",), 2**64):
        assert compiled.validate(obj) == validate(schema, obj)
    assert compiled.valid({"n": 3, "s": "ab"})
    assert not compiled.valid({"t": (1, 2)})  # a tuple: not a decoded JSON value


def test_a_schema_that_does_not_compile_falls_back_to_the_exact_validator() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string",
                                                     "maxLength": float("inf")}}}
    compiled = compile_schema(schema)
    assert compiled.validate({}) == validate(schema, {}) == []
    with pytest.raises(OverflowError):  # as the exact validator has always done
        compiled.validate({"s": "x"})


def test_pattern_properties_beside_a_closed_object() -> None:
    # With additionalProperties false kube-openapi checks patternProperties for the keys
    # properties does not name, only.
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"x1": {"type": "string"}},
              "patternProperties": {"^x": {"type": "integer"}}}
    compiled = compile_schema(schema)
    for obj in ({"x1": "s"}, {"x2": 1}, {"x2": "s"}, {"y": 1}, {"x1": 1}):
        assert compiled.valid(obj) == _openapi.validate(schema, obj, "").valid
        assert compiled.validate(obj) == validate(schema, obj)
    assert compiled.valid({"x1": "s", "x2": 1})


def test_compiled_schemas_are_cached_by_identity() -> None:
    schema = {"type": "object"}
    assert compile_schema(schema) is compile_schema(schema)
    assert compile_schema(copy.deepcopy(schema)) is not compile_schema(schema)


def test_features_the_schema_lacks_are_not_walked() -> None:
    compiled = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert not compiled.has_embedded and not compiled.has_list_types
    compiled = compile_schema({"type": "object", "properties": {"a": {
        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}})
    assert compiled.has_list_types
    assert compiled.validate({"a": ["x", "x"]}) == validate(compiled.schema, {"a": ["x", "x"]})


def test_defaulted_copies_only_when_something_is_defaulted() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "p": {"type": "string", "default": "Retain"}, "q": {"type": "string"}}}}}
    compiled = compile_schema(schema)
    full = {"spec": {"p": "Delete"}}
    assert compiled.defaulted(full) is full
    missing = {"spec": {"q": "x"}}
    out = compiled.defaulted(missing)
    assert out == {"spec": {"q": "x", "p": "Retain"}} and missing == {"spec": {"q": "x"}}
    assert not compile_schema({"type": "object"}).has_defaults


# -- patterns: Python's re where it means what RE2 means ----------------------------------------

_ATOMS = ["a", "b", "-", ".", "\\.", "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "[a-c]", "[^a]",
          "[-a]", "[a-]", "[\\d\\s]", "[^\\n]", "\\$", "\\^", "\\-", "\\\\", "[.]", "\\t", "\\n",
          "\\b", "\\B", "^", "$", "\\A", "\\z", " ", "_", "}", "]", "[ab-]", "[\\]]", "\\{",
          "[\\^a]", "[a^]", "\\v", "\\f", "\\x41", "\\pL", "[[:alpha:]]", "(?i)a", "\\Z", "{",
          "[a-b-c]", "A", "0", "\\_", "\\@", "#", "(?s).", "(?m)$"]
_QUANTIFIERS = ["", "", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,}", "{2,}?",
                "{,2}", "**", "{3,1}", "*+"]
_TEXT = "ab-.\n _A0$^{}"


def _pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.2 and depth < 3:
            inner = "|".join(_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3)))
            opening = rng.choice(["(", "(?:", f"(?P<n{rng.randint(0, 99)}>", "(?<m>"])
            parts.append(opening + inner + ")" + rng.choice(["", "", "?", "??", "*", "+"]))
        else:
            parts.append(rng.choice(_ATOMS) + rng.choice(_QUANTIFIERS))
    text = "".join(parts)
    return ("^" if rng.random() < 0.3 else "") + text + ("$" if rng.random() < 0.3 else "")


@pytest.mark.parametrize("seed", range(4))
def test_patterns_match_as_re2_matches_them(seed: int) -> None:
    rng = random.Random(seed)
    options = re2.Options()
    options.log_errors = False
    in_python = 0
    for _ in range(2500):
        pattern = _pattern(rng)
        try:
            reference = re2.compile(pattern, options)
        except re2.error:
            with pytest.raises(re.error):
                matcher(pattern)
            continue
        python = _python_equivalent(pattern)
        in_python += python is not None
        match = matcher(pattern)
        for _ in range(12):
            text = "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 14)))
            want = reference.search(text) is not None
            assert match(text) == want, (pattern, text)
            if python is not None:
                assert (python[0].search(text) is not None) == want, (pattern, text)
    assert in_python > 500


@pytest.mark.parametrize(("pattern", "text", "found"), [
    ("^\\w+$", "é", False),  # RE2's \w is ASCII
    ("^.$", "é", True),
    ("^\\s$", "\v", False),  # RE2's \s has no \v; Python's has
    ("^a$", "a\n", False),  # "$" is the very end
    ("a\\z", "a", True),
    ("^[a-z]+$", "x" * 500, True),  # past the length Python's re is trusted with
    ("\\B", "", True),  # Python's \B never matches an empty text
])
def test_pattern_corners(pattern: str, text: str, found: bool) -> None:
    assert search(pattern, text) is found


@pytest.mark.parametrize("pattern", [
    "(a+)+$", "(a|aa)*b", "a{,3}", "[[:alpha:]]", "(?i)abc", "\\pL", "\\x41", "[]a]", "\\B",
])
def test_patterns_outside_the_subset_stay_with_re2(pattern: str) -> None:
    assert _python_equivalent(pattern) is None


def test_backtracking_is_bounded_by_the_text_length() -> None:
    overlapping = _python_equivalent("\\d*\\d*\\d*x")
    assert overlapping is not None and overlapping[1] < 20
    disjoint = _python_equivalent("^[^@\\s]+@[^@\\s]+$")
    assert disjoint is not None and disjoint[1] == 128
