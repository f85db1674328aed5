"""Label selectors, with k8s.io/apimachinery/pkg/labels' syntax and rules.

    app=web, tier!=db, env in (prod,stage), zone notin (a), canary, !legacy, replicas>2

A malformed selector is a SelectorError, which the API answers with 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|>|<|[^\s=!(),<>]+)")
_WORD = re.compile(r"^[^\s=!(),<>]+$")

EXISTS, NOT_EXISTS, IN, NOT_IN, GT, LT = "exists", "!", "in", "notin", "gt", "lt"


class SelectorError(ValueError):
    """A selector that cannot be parsed or names an invalid key or value."""


def qualified_name_errors(key: str) -> list[str]:
    """Why ``key`` is not a valid label key ([prefix/]name), as kube says it."""
    prefix, _, name = key.rpartition("/")
    errors = []
    if "/" in key and not prefix:
        errors.append("prefix part must be non-empty")
    elif prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errors.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                      "alphanumeric characters, '-' or '.', and must start and end with an "
                      "alphanumeric character")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _NAME.match(name):
        errors.append("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                      "must start and end with an alphanumeric character")
    return errors


def label_value_errors(value: str) -> list[str]:
    if not value:
        return []
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if not _NAME.match(value):
        return ["a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character"]
    return []


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == EXISTS:
            return present
        if self.operator == NOT_EXISTS:
            return not present
        if self.operator == IN:
            return present and labels[self.key] in self.values
        if self.operator == NOT_IN:
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have, want = int(labels[self.key]), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.operator == GT else have < want


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = [t for t in _TOKEN.findall(text)]
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise SelectorError("unexpected end of selector")
        self.pos += 1
        return token

    def expect_word(self, what: str) -> str:
        token = self.take()
        if not _WORD.match(token):
            raise SelectorError(f"found '{token}', expected: {what}")
        return token

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            return _checked(Requirement(self.expect_word("identifier"), NOT_EXISTS))
        key = self.expect_word("identifier")
        op = self.peek()
        if op is None or op == ",":
            return _checked(Requirement(key, EXISTS))
        self.take()
        if op in ("=", "=="):
            return _checked(Requirement(key, IN, (self.value(),)))
        if op == "!=":
            return _checked(Requirement(key, NOT_IN, (self.value(),)))
        if op in (">", "<"):
            value = self.expect_word("integer")
            if not value.lstrip("-").isdigit():
                raise SelectorError(f"for 'Gt', 'Lt' operators, the value must be an "
                                    f"integer: {value!r}")
            return _checked(Requirement(key, GT if op == ">" else LT, (value,)))
        if op in ("in", "notin"):
            return _checked(Requirement(key, IN if op == "in" else NOT_IN, self.value_set()))
        raise SelectorError(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")

    def value(self) -> str:
        token = self.peek()
        if token is None or token == ",":
            return ""  # key= selects an empty value
        return self.expect_word("identifier")

    def value_set(self) -> tuple[str, ...]:
        if self.take() != "(":
            raise SelectorError("found no '(', expected: '('")
        values: list[str] = []
        while True:
            token = self.take()
            if token == ")":
                return tuple(values) if values else ("",)
            if token == ",":
                if not values:
                    values.append("")
                continue
            if not _WORD.match(token):
                raise SelectorError(f"found '{token}', expected: ',', ')' or identifier")
            values.append(token)


def _checked(req: Requirement) -> Requirement:
    errors = qualified_name_errors(req.key)
    if errors:
        raise SelectorError(f"unable to parse requirement: key: Invalid value: "
                            f"\"{req.key}\": {'; '.join(errors)}")
    if req.operator not in (GT, LT):
        for value in req.values:
            errors = label_value_errors(value)
            if errors:
                raise SelectorError(f"unable to parse requirement: values[0][{req.key}]: "
                                    f"Invalid value: \"{value}\": {errors[0]}")
    return req


def parse_label_selector(text: str) -> LabelSelector:
    """Parse kube's label selector syntax; an empty string selects everything."""
    parser = _Parser(text)
    requirements: list[Requirement] = []
    while parser.peek() is not None:
        requirements.append(parser.requirement())
        token = parser.peek()
        if token is None:
            break
        if token != ",":
            raise SelectorError(f"found '{token}', expected: ',' or 'end of string'")
        parser.take()
        if parser.peek() is None:
            raise SelectorError("found 'end of string', expected: identifier")
    return LabelSelector(tuple(requirements))


def from_label_selector(selector: Mapping | None) -> LabelSelector | None:
    """A metav1.LabelSelector object as a selector; None (matches nothing) when it is invalid.
    An empty selector matches everything."""
    selector = selector or {}
    labels = selector.get("matchLabels") or {}
    requirements = [Requirement(k, IN, (v,)) for k, v in labels.items()]
    operators = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": NOT_EXISTS}
    for expression in selector.get("matchExpressions") or []:
        operator = operators.get(expression.get("operator", ""))
        if operator is None:
            return None
        requirements.append(Requirement(expression.get("key", ""), operator,
                                        tuple(expression.get("values") or ())))
    return LabelSelector(tuple(requirements))
