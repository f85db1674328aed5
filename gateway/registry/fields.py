"""Field selectors, with k8s.io/apimachinery/pkg/fields' syntax: ``a=b,c!=d`` (``\\,``, ``\\=``
and ``\\\\`` escape). Each resource says which fields it can be selected by; anything else is
"field label not supported" (400)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.registry.labels import SelectorError

#: Field label -> value of one object, for matching.
FieldSet = Mapping[str, str]
FieldsFunc = Callable[[dict[str, Any]], FieldSet]


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    negated: bool

    def matches(self, fields: FieldSet) -> bool:
        equal = fields.get(self.field, "") == self.value
        return not equal if self.negated else equal


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...]

    def matches(self, fields: FieldSet) -> bool:
        return all(term.matches(fields) for term in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms

    def exact_value(self, field: str) -> str | None:
        """The value ``field`` must equal, if the selector pins it (e.g. metadata.name)."""
        for term in self.terms:
            if term.field == field and not term.negated:
                return term.value
        return None


def _split(text: str, sep: str) -> list[str]:
    """Split on unescaped ``sep``."""
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out, escaped = [], False
    for char in text:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    if escaped:
        raise SelectorError("invalid field selector: unterminated escape sequence")
    return "".join(out)


def _term(text: str) -> FieldTerm:
    for op, negated in (("!=", True), ("==", False), ("=", False)):
        index = _find_unescaped(text, op)
        if index >= 0:
            field, value = text[:index], text[index + len(op):]
            return FieldTerm(_unescape(field.strip()), _unescape(value.strip()), negated)
    raise SelectorError(f"invalid selector: '{text}'; can't understand '{text}'")


def _find_unescaped(text: str, op: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


def parse_field_selector(text: str, supported: frozenset[str]) -> FieldSelector:
    """Parse a field selector, refusing fields outside ``supported``."""
    if not text.strip():
        return FieldSelector(())
    terms = []
    for part in _split(text, ","):
        if not part.strip():
            continue
        term = _term(part)
        if term.field not in supported:
            raise SelectorError(f'field label not supported: {term.field}')
        terms.append(term)
    return FieldSelector(tuple(terms))


def object_meta_fields(obj: dict[str, Any], namespaced: bool) -> dict[str, str]:
    """The fields every object can be selected by."""
    meta = obj.get("metadata") or {}
    fields = {"metadata.name": meta.get("name", "")}
    if namespaced:
        fields["metadata.namespace"] = meta.get("namespace", "")
    return fields
