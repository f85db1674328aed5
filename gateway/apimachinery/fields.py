"""Field selectors, with k8s.io/apimachinery/pkg/fields' syntax: ``a=b,c!=d`` (``\\,``, ``\\=``
and ``\\\\`` escape; a bare ``=`` or ``,`` in a value is an error, and nothing is trimmed). Which
fields a resource can be selected by, and the words for any other, depend on whether kube gives
its kind a field label conversion of its own (400 either way)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.labels import SelectorError

#: Field label -> value of one object, for matching.
FieldSet = Mapping[str, str]
FieldsFunc = Callable[[dict[str, Any]], FieldSet]


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    negated: bool

    def __str__(self) -> str:
        """hasTerm / notHasTerm's String(): the value escaped (fields.EscapeValue)."""
        escaped = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.field}{'!=' if self.negated else '='}{escaped}"

    def matches(self, fields: FieldSet) -> bool:
        equal = fields.get(self.field, "") == self.value
        return not equal if self.negated else equal


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...]

    def __str__(self) -> str:
        """andTerm's String(): the terms joined by commas."""
        return ",".join(str(term) for term in self.terms)

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


def _split_terms(text: str) -> list[str]:
    """fields.splitTerms: split on each ``,`` that no backslash escapes; the parts keep their
    escapes for UnescapeValue."""
    if not text:
        return []
    parts, start, escaped = [], 0, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


#: "==" before "=", so that "a==b" does not leave "=b" as the value
_OPERATORS = ("!=", "==", "=")


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: the first operator anywhere splits the term, escaped or not (the field
    has no escapes), into field, operator and the still-escaped value."""
    for i in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape(value: str) -> str:
    """fields.UnescapeValue: ``\\\\``, ``\\,`` and ``\\=`` are the only escapes, and a bare ``,``
    or ``=`` is an error (Go prints the rune as its code point)."""
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: "
                                f"{ord(char)}")
        else:
            out.append(char)
    if escaped:  # a single backslash at the end
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _term(selector: str, part: str) -> FieldTerm:
    split = _split_term(part)
    if split is None:
        raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part}'")
    field, op, value = split
    return FieldTerm(field, _unescape(value), op == "!=")


def parse_field_selector(text: str, supported: frozenset[str] | None = None, *,
                         own_conversion: bool = True) -> FieldSelector:
    """Parse a field selector as fields.ParseSelector does; with ``supported``, refuse other
    fields too (check_field_labels). Nothing is trimmed (so a lone space is a term kube cannot
    understand), and the terms are sorted first, which decides which of several bad terms is
    reported."""
    selector = FieldSelector(tuple(_term(text, part) for part in sorted(_split_terms(text))
                                   if part))
    if supported is not None:
        check_field_labels(selector, supported, own_conversion=own_conversion)
    return selector


#: The only labels kube's default conversion (DefaultMetaV1FieldSelectorConversion) takes,
#: whatever the resource's scope.
DEFAULT_FIELD_LABELS = frozenset({"metadata.name", "metadata.namespace"})

#: (group, kind) of the kinds the gateway serves that register a field label conversion of
#: their own in kube v1.32 (AddFieldLabelConversionFunc, pkg/apis/core/v1); every other kind
#: goes through the default conversion.
OWN_FIELD_LABEL_CONVERSION = frozenset({
    ("", "Pod"), ("", "Node"), ("", "ReplicationController"), ("", "Event"),
    ("", "Namespace"), ("", "Secret"), ("", "Service"),
})


def has_own_field_label_conversion(group: str, kind: str) -> bool:
    return (group, kind) in OWN_FIELD_LABEL_CONVERSION


def check_field_labels(selector: FieldSelector, supported: frozenset[str], *,
                       own_conversion: bool) -> None:
    """Refuse the first field (in sorted order) the resource's field label conversion does not
    know: a conversion of its own says "field label not supported: <label>" and takes
    ``supported``; the default one takes metadata.name and metadata.namespace and says it
    otherwise."""
    for term in selector.terms:
        if own_conversion and term.field not in supported:
            raise SelectorError(f"field label not supported: {term.field}")
        if not own_conversion and term.field not in DEFAULT_FIELD_LABELS:
            raise SelectorError(f"{go_quote(term.field)} is not a known field selector: only "
                                '"metadata.name", "metadata.namespace"')


def object_meta_fields(obj: dict[str, Any], namespaced: bool) -> dict[str, str]:
    """The fields every object can be selected by."""
    meta = obj.get("metadata") or {}
    fields = {"metadata.name": meta.get("name", "")}
    if namespaced:
        fields["metadata.namespace"] = meta.get("namespace", "")
    return fields
