"""Structural schemas, as apiextensions-apiserver v1.32 defines them
(pkg/apiserver/schema: convert.go, validation.go, complete.go; cel's ValidFieldPath).

A structural schema says, outside of any allOf/anyOf/oneOf/not, the type of every value it
specifies; those logical junctors may only add value validations. Every v1 CRD needs one (it
is what pruning, defaulting and server-side apply follow). The checks here work on the v1 JSON
form of a schema (plain dicts) and report kube's causes under kube's paths, in kube's order
(sorted by their text, as ValidateStructural sorts them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from gateway.apimachinery.status import Cause
from gateway.registry.validation import forbidden, invalid, required

Schema = dict[str, Any]
ROOT, ITEM, FIELD = "root", "item", "field"

_UNSUPPORTED = (("id", "id"), ("$schema", "schema"), ("$ref", "$ref"),
                ("patternProperties", "patternProperties"), ("dependencies", "dependencies"),
                ("additionalItems", "additionalItems"), ("definitions", "definitions"))
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


# -- reading a schema ---------------------------------------------------------------------------


def props(schema: Schema) -> dict[str, Schema]:
    value = schema.get("properties")
    return value if isinstance(value, dict) else {}


def item_schema(schema: Schema) -> Schema | None:
    """items as one schema; None when absent or given as a list."""
    value = schema.get("items")
    return value if isinstance(value, dict) else None


def _zero(value: Any) -> bool:
    """null, false and "" (but not 0, which Go keeps behind a pointer)."""
    return value is None or value is False or (isinstance(value, str) and not value)


def has_value(schema: Schema, key: str) -> bool:
    """Whether ``key`` holds a value: JSON null, false and "" count as absent."""
    return not _zero(schema.get(key))


def sub_schemas(schema: Schema) -> Iterator[Schema]:
    """Every schema directly below ``schema`` (SchemaHas' traversal)."""
    items = schema.get("items")
    if isinstance(items, dict):
        yield items
    elif isinstance(items, list):
        yield from (s for s in items if isinstance(s, dict))
    for key in ("allOf", "anyOf", "oneOf"):
        yield from (s for s in schema.get(key) or [] if isinstance(s, dict))
    for key in ("not", "additionalProperties", "additionalItems"):
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for key in ("properties", "patternProperties", "definitions", "dependencies"):
        value = schema.get(key)
        if isinstance(value, dict):
            yield from (s for s in value.values() if isinstance(s, dict))


def schema_has(schema: Schema | None, pred: Callable[[Schema], bool]) -> bool:
    """SchemaHas: ``pred`` holds somewhere in the schema."""
    if not isinstance(schema, dict):
        return False
    return pred(schema) or any(schema_has(s, pred) for s in sub_schemas(schema))


# -- NewStructural ------------------------------------------------------------------------------


def structural_error(schema: Schema | None) -> str | None:
    """The error NewStructural gives for a schema it cannot convert (fields a structural schema
    has no place for), in the order it meets them; None when it converts."""
    if not isinstance(schema, dict):
        return None
    for key, word in _UNSUPPORTED:
        value = schema.get(key)
        if value or (key == "additionalItems" and value is not None):
            return f"OpenAPIV3Schema '{word}' is not supported"
    for junctor in [schema.get("not"), *(schema.get("allOf") or []),
                    *(schema.get("anyOf") or []), *(schema.get("oneOf") or [])]:
        if error := structural_error(junctor):
            return error
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    if isinstance(schema.get("items"), list) and schema["items"]:
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    below = [item_schema(schema), *props(schema).values()]
    if isinstance(schema.get("additionalProperties"), dict):
        below.append(schema["additionalProperties"])
    return next((e for e in map(structural_error, below) if e), None)


# -- ValidateStructural -------------------------------------------------------------------------


def validate_structural(schema: Schema, path: str) -> list[Cause]:
    """ValidateStructural: the invariants of every node and the completeness of the root's
    value validations, sorted by their text as kube sorts them."""
    out: list[Cause] = []
    _invariants(schema, ROOT, path, out)
    _completeness_of(schema, schema, path, path, out)
    return sorted(out, key=lambda c: f"{c.field}: {c.message}")


def is_non_structural(schema: Any) -> bool:
    """schemaIsNonStructural: NewStructural fails or ValidateStructural finds something."""
    if not isinstance(schema, dict):
        return False
    return bool(structural_error(schema)) or bool(validate_structural(schema, ""))


def _invariants(s: Schema, lvl: str, path: str, out: list[Cause]) -> None:
    kind = s.get("type") or ""
    items = item_schema(s)
    if kind == "array" and items is None:
        out.append(required(f"{path}.items", "must be specified"))
    if items is not None:
        _invariants(items, ITEM, f"{path}.items", out)
    for key, sub in props(s).items():
        _invariants(sub, FIELD, f"{path}.properties[{key}]", out)
    extra = s.get("additionalProperties")
    if extra is not None:
        if lvl == ROOT:
            out.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(extra, dict):
            _invariants(extra, FIELD, f"{path}.additionalProperties", out)
    _extensions(s, path, out)
    _value_validation(s, _int_or_string_any_of(s), _int_or_string_all_of(s), lvl, path, out)
    _type_invariants(s, kind, lvl, path, out)


def _extensions(s: Schema, path: str, out: list[Cause]) -> None:
    if s.get("x-kubernetes-int-or-string") is True:
        if s.get("x-kubernetes-preserve-unknown-fields") is True:
            out.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                               "must be false if x-kubernetes-int-or-string is true"))
        if s.get("x-kubernetes-embedded-resource") is True:
            out.append(invalid(f"{path}.x-kubernetes-embedded-resource", True,
                               "must be false if x-kubernetes-int-or-string is true"))


def _type_invariants(s: Schema, kind: str, lvl: str, path: str, out: list[Cause]) -> None:
    embedded = s.get("x-kubernetes-embedded-resource") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    if embedded and kind != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        out.append(required(f"{path}.type", detail) if not kind
                   else invalid(f"{path}.type", kind, detail))
    elif not kind and s.get("x-kubernetes-int-or-string") is not True and not preserve:
        where = {ROOT: "at the root", ITEM: "for specified array items",
                 FIELD: "for specified object fields"}[lvl]
        out.append(required(f"{path}.type", f"must not be empty {where}"))
    if embedded and s.get("additionalProperties") is not None:
        out.append(forbidden(f"{path}.additionalProperties",
                             "must not be used if x-kubernetes-embedded-resource is set"))
    if lvl == ROOT and kind and kind != "object":
        out.append(invalid(f"{path}.type", kind, "must be object at the root"))
    check_meta = lvl == ROOT or embedded
    for name in ("kind", "apiVersion"):
        sub = props(s).get(name)
        if sub is not None and check_meta and (sub.get("type") or "") != "string":
            out.append(invalid(f"{path}.properties[{name}].type", sub.get("type") or "",
                               "must be string"))
    if "metadata" in props(s):
        _metadata(props(s)["metadata"], check_meta, lvl, f"{path}.properties[metadata]", out)
    if embedded and not preserve and not props(s):
        out.append(required(f"{path}.properties", "must not be empty if "
                            "x-kubernetes-embedded-resource is true without "
                            "x-kubernetes-preserve-unknown-fields"))


#: What may be set in the root's metadata schema besides type, default and the name and
#: generateName properties: nothing. Keys whose empty list still counts as set (Go copies the
#: slice as it is) are listed apart.
_META_SET_IF_PRESENT = ("required", "x-kubernetes-list-map-keys", "x-kubernetes-validations",
                        "maximum", "minimum", "maxLength", "minLength", "maxItems", "minItems",
                        "multipleOf", "maxProperties", "minProperties",
                        "x-kubernetes-list-type", "x-kubernetes-map-type", "additionalProperties",
                        "items")
_META_SET_IF_TRUTHY = ("description", "title", "nullable", "format", "pattern", "enum",
                       "exclusiveMaximum", "exclusiveMinimum", "uniqueItems", "allOf", "anyOf",
                       "oneOf", "not", "x-kubernetes-preserve-unknown-fields",
                       "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string")


def _metadata(s: Schema, check_meta: bool, lvl: str, path: str, out: list[Cause]) -> None:
    if check_meta and (s.get("type") or "") != "object":
        out.append(invalid(f"{path}.type", s.get("type") or "", "must be object"))
    if lvl != ROOT:
        return
    names = set(props(s))
    extra_props = bool(names) and not (names <= {"name", "generateName"})
    if (extra_props or any(s.get(k) is not None for k in _META_SET_IF_PRESENT)
            or any(s.get(k) for k in _META_SET_IF_TRUTHY)):
        out.append(forbidden(path, "must not specify anything other than name and "
                             "generateName, but metadata is implicitly specified"))


def _plain(schema: Any) -> Any:
    """A junctor clause without its zero-valued fields, to compare as Go compares structs."""
    if isinstance(schema, dict):
        return {k: v for k, v in schema.items() if not _zero(v)}
    return schema


def _int_or_string_any_of(s: Schema) -> bool:
    """anyOf is exactly [integer, string]: the int-or-string pattern, not held against it."""
    return [_plain(c) for c in s.get("anyOf") or []] == _INT_OR_STRING


def _int_or_string_all_of(s: Schema) -> bool:
    all_of = s.get("allOf") or []
    return bool(all_of) and isinstance(all_of[0], dict) and _int_or_string_any_of(all_of[0])


def _value_validation(v: Schema, skip_any_of: bool, skip_first_all_of_any_of: bool, lvl: str,
                      path: str, out: list[Cause]) -> None:
    """The logical junctors of a node (and their own, recursively) and its pattern."""
    if not skip_any_of:
        for i, clause in enumerate(v.get("anyOf") or []):
            _nested(clause, False, lvl, f"{path}.anyOf[{i}]", out)
    for i, clause in enumerate(v.get("allOf") or []):
        _nested(clause, skip_first_all_of_any_of and i == 0, lvl, f"{path}.allOf[{i}]", out)
    for i, clause in enumerate(v.get("oneOf") or []):
        _nested(clause, False, lvl, f"{path}.oneOf[{i}]", out)
    if isinstance(v.get("not"), dict):
        _nested(v["not"], False, lvl, f"{path}.not", out)
    pattern = v.get("pattern")
    if isinstance(pattern, str) and pattern:
        error = go_regexp_error(pattern)
        if error:
            out.append(invalid(f"{path}.pattern", pattern,
                               f"must be a valid regular expression, but isn't: {error}"))


_NESTED_FORBIDDEN = (
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
)


def _nested(v: Any, skip_any_of: bool, lvl: str, path: str, out: list[Cause]) -> None:
    """A clause under allOf/anyOf/oneOf/not: value validations only, nothing that says what
    a value is (types, defaults, extensions), and no metadata."""
    if not isinstance(v, dict):
        return
    _value_validation(v, skip_any_of, False, lvl, path, out)
    if (items := item_schema(v)) is not None:
        _nested(items, False, lvl, f"{path}.items", out)
    for key, sub in props(v).items():
        _nested(sub, False, FIELD, f"{path}.properties[{key}]", out)
    if v.get("type"):
        out.append(forbidden(f"{path}.type", "must be empty to be structural"))
    extra = v.get("additionalProperties")
    if isinstance(extra, dict) or extra is True:
        out.append(forbidden(f"{path}.additionalProperties", "must be undefined to be structural"))
    for key, detail in _NESTED_FORBIDDEN:
        present = v.get(key) is not None if key == "default" else has_value(v, key)
        if present:
            out.append(forbidden(f"{path}.{key}", detail))
    if v.get("x-kubernetes-list-map-keys"):
        out.append(forbidden(f"{path}.x-kubernetes-list-map-keys",
                             "must be empty to be structural"))
    for key in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
        if v.get(key) is not None:
            out.append(forbidden(f"{path}.{key}", "must be undefined to be structural"))
    if v.get("x-kubernetes-validations"):
        out.append(forbidden(f"{path}.x-kubernetes-validations",
                             "must be empty to be structural"))
    if "metadata" in props(v):
        out.append(forbidden(f"{path}.properties[metadata]",
                             "must not be specified in a nested context"))


def _completeness_of(v: Schema, s: Schema | None, s_path: str, v_path: str,
                     out: list[Cause]) -> None:
    """Whatever a junctor clause of the root says about items or properties must also be
    said structurally (validateStructuralCompleteness)."""
    clauses = [("not", v.get("not"))]
    for key in ("allOf", "anyOf", "oneOf"):
        clauses += [(f"{key}[{i}]", c) for i, c in enumerate(v.get(key) or [])]
    for suffix, clause in clauses:
        if isinstance(clause, dict):
            _complete_nested(clause, s, s_path, f"{v_path}.{suffix}", out)


def _complete_nested(v: Schema, s: Schema | None, s_path: str, v_path: str,
                     out: list[Cause]) -> None:
    if s is None:
        out.append(required(s_path, f"because it is defined in {v_path}"))
        return
    _completeness_of(v, s, s_path, v_path, out)
    if (items := item_schema(v)) is not None:
        _complete_nested(items, item_schema(s), f"{s_path}.items", f"{v_path}.items", out)
    for key, sub in props(v).items():
        if key not in props(s):
            out.append(required(f"{s_path}.properties[{key}]",
                                f"because it is defined in {v_path}.properties[{key}]"))
        else:
            _complete_nested(sub, props(s)[key], f"{s_path}.properties[{key}]",
                             f"{v_path}.properties[{key}]", out)


# -- Go's regexp (RE2) --------------------------------------------------------------------------

_PERL_GROUP = re.compile(r"\(\?(?:<[=!]|[=!>])")
_BACKREF = re.compile(r"\\[1-9]")
_GO_ONLY = ((re.compile(r"\\[pP](\{[^}]*\}|[A-Za-z])"), "x"), (re.compile(r"\\z"), r"\\Z"),
            (re.compile(r"\[:\^?[a-z]+:\]"), "a"))


def go_regexp_error(pattern: str) -> str | None:
    """regexp.Compile's error for ``pattern`` (an approximation for the common mistakes)."""
    if match := _PERL_GROUP.search(pattern):
        if match.group().startswith("(?<"):
            # Go reads (?< as a named group: the name runs to the next '>'
            rest = pattern[match.start():]
            end = rest.find(">")
            capture = rest[:end + 1] if end >= 0 else rest
            return f"error parsing regexp: invalid named capture: `{capture}`"
        return f"error parsing regexp: invalid or unsupported Perl syntax: `{match.group()[:3]}`"
    if match := _BACKREF.search(pattern):
        return f"error parsing regexp: invalid escape sequence: `{match.group()}`"
    python = pattern
    for go_only, stand_in in _GO_ONLY:
        python = go_only.sub(stand_in, python)
    try:
        re.compile(python)
    except re.error as err:
        return "error parsing regexp: " + _go_regexp_words(err, pattern)
    return None


def _go_regexp_words(err: re.error, pattern: str) -> str:
    message, pos = err.msg, err.pos or 0
    if message.startswith("missing ), unterminated subpattern"):
        return f"missing closing ): `{pattern}`"
    if message.startswith("unbalanced parenthesis"):
        return f"unexpected ): `{pattern}`"
    if message.startswith("unterminated character set"):
        return f"missing closing ]: `{pattern[pos:]}`"
    if message.startswith("nothing to repeat"):
        return f"missing argument to repetition operator: `{pattern[pos:pos + 1]}`"
    if message.startswith("multiple repeat"):
        return f"invalid nested repetition operator: `{pattern[max(pos - 1, 0):pos + 1]}`"
    if message.startswith("bad escape"):
        return f"invalid escape sequence: `{pattern[pos:pos + 2]}`"
    if message.startswith("bad character range"):
        return f"invalid character class range: `{pattern[pos:pos + 3]}`"
    return f"invalid syntax: `{pattern}`"


# -- field paths (cel.ValidFieldPath) -----------------------------------------------------------


class FieldPathError(ValueError):
    """A JSON path that does not lead to a field of the schema."""


def _tokens(text: str) -> Iterator[str]:
    """The scanner ValidFieldPath splits a path with: '.', '[' and ']' alone, quoted strings
    whole, and the text between."""
    i = 0
    while i < len(text):
        if text[i] == "'":
            end = i + 1
            while end < len(text) and not (text[end] == "'" and text[end - 1] != "\\"):
                end += 1
            yield text[i:end + 1]
            i = end + 1
        elif text[i] in ".[]":
            yield text[i]
            i += 1
        else:
            end = i
            while end < len(text) and text[end] not in ".[]":
                end += 1
            yield text[i:end]
            i = end


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "'": "'", "\\": "\\"}


def _unquote(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group()[1] not in _ESCAPES:
            raise FieldPathError(f"invalid string literal: invalid escape char {match.group()}")
        return _ESCAPES[match.group()[1]]
    return re.sub(r"\\.", one, text, flags=re.S)


def valid_field_path(text: str, schema: Schema | None, *,
                     allow_array_notation: bool = True) -> tuple[list[str], Schema | None]:
    """ValidFieldPath: the path's parts and the schema it leads to, or FieldPathError with
    kube's words. Parts that are map keys keep their brackets ("[key]")."""
    parts: list[str] = []
    tokens = _tokens(text)
    for token in tokens:
        if token == "[":
            if not allow_array_notation:
                raise FieldPathError("array notation is not allowed")
            name = next(tokens, None)
            if name is None:
                raise FieldPathError("unexpected end of JSON path")
            if len(name) < 2 or name[0] != "'" or name[-1] != "'":
                raise FieldPathError(f"expected single quoted string but got {name}")
            schema = _step(parts, schema, _unquote(name[1:-1]))
            close = next(tokens, None)
            if close is None:
                raise FieldPathError("unexpected end of JSON path")
            if close != "]":
                raise FieldPathError(f"expected ] but got {close}")
        elif token == ".":
            name = next(tokens, None)
            if name is None:
                raise FieldPathError("unexpected end of JSON path")
            schema = _step(parts, schema, name)
        else:
            raise FieldPathError(f"expected [ or . but got: {token}")
    return parts, schema


def _step(parts: list[str], schema: Schema | None, name: str) -> Schema | None:
    """One step down: a property of an object, or a key of a map."""
    if schema is None:
        raise FieldPathError("does not refer to a valid field")
    if props(schema):
        if name not in props(schema):
            raise FieldPathError("does not refer to a valid field")
        parts.append(name)
        return props(schema)[name]
    extra = schema.get("additionalProperties")
    if extra is None:
        raise FieldPathError("does not refer to a valid field")
    parts.append(f"[{name}]")
    return extra if isinstance(extra, dict) else None


def path_string(parts: list[str]) -> str:
    """field.Path's String() of the parts valid_field_path gives."""
    out = ""
    for part in parts:
        out += part if part.startswith("[") or not out else f".{part}"
    return out
