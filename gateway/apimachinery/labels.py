"""Label selectors, with k8s.io/apimachinery/pkg/labels' syntax and rules.

    app=web, tier!=db, env in (prod,stage), zone notin (a), canary, !legacy, replicas>2

The lexer and parser follow labels.Parse token for token, so that what kube refuses is refused
here with kube's message. A malformed selector is a SelectorError, which the API answers with 400.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.apimachinery.gowords import go_quote

EXISTS, NOT_EXISTS, IN, NOT_IN, GT, LT = "exists", "!", "in", "notin", "gt", "lt"

# k8s.io/apimachinery/pkg/util/validation: the formats, and the messages that quote them
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_DNS_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_FMT = rf"{_DNS_LABEL_FMT}(\.{_DNS_LABEL_FMT})*"
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_DNS_SUBDOMAIN = re.compile(_DNS_SUBDOMAIN_FMT)
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start "
                       "and end with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character")
_DNS_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                      "characters, '-' or '.', and must start and end with an alphanumeric "
                      "character")

#: strconv.ParseInt(s, 10, 64): an optional sign and ASCII digits, nothing else
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = range(-(2**63), 2**63)


class SelectorError(ValueError):
    """A selector that cannot be parsed or names an invalid key or value."""


# -- validation -----------------------------------------------------------------------------------


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, double spaces included."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _byte_len(text: str) -> int:
    """Go's len(string): kube's length limits count UTF-8 bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


def qualified_name_errors(key: str) -> list[str]:
    """Why ``key`` is not a valid label key ([prefix/]name), as validation.IsQualifiedName says."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                                   "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + e for e in _dns_subdomain_errors(prefix)]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif _byte_len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        errors.append("name part " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                                  "MyName", "my.name", "123-abc"))
    return errors


def _dns_subdomain_errors(value: str) -> list[str]:
    errors = []
    if _byte_len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _DNS_SUBDOMAIN.fullmatch(value):
        errors.append(_regex_error(_DNS_SUBDOMAIN_MSG, _DNS_SUBDOMAIN_FMT, "example.com"))
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value, as validation.IsValidLabelValue says."""
    errors = []
    if _byte_len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT,
                                   "MyValue", "my_value", "12345"))
    return errors


def go_int64(text: str) -> int | None:
    """``text`` as strconv.ParseInt(text, 10, 64) reads it; None where Go fails. Python's int()
    would also take underscores and surrounding whitespace."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if value in _INT64 else None


def _invalid(path: str, value: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error()."""
    return f"{path}: Invalid value: {go_quote(value)}: {detail}"


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(errors).Error(): one error alone, several deduplicated in [...]."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# -- requirements ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __str__(self) -> str:
        """labels.Requirement.String(): what parses back to this requirement (equality is
        written as a set, which is how it is kept)."""
        if self.operator == EXISTS:
            return self.key
        if self.operator == NOT_EXISTS:
            return f"!{self.key}"
        if self.operator in (GT, LT):
            return f"{self.key}{'>' if self.operator == GT else '<'}{self.values[0]}"
        word = "in" if self.operator == IN else "notin"
        return f"{self.key} {word} ({','.join(sorted(self.values))})"

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
        if not present or len(self.values) != 1:
            return False
        have, want = go_int64(labels[self.key]), go_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if self.operator == GT else have < want


def new_requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    """labels.NewRequirement: validates the key and every value (Gt and Lt ones too, which must
    also be int64s). Raises SelectorError with kube's aggregated field errors."""
    values = tuple(values)
    errors = []
    key_errors = qualified_name_errors(key)
    if key_errors:
        errors.append(_invalid("key", key, "; ".join(key_errors)))
    if operator in (GT, LT):
        errors += [_invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an "
                            "integer") for i, v in enumerate(values) if go_int64(v) is None]
    for i, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(_invalid(f"values[{i}][{key}]", value, "; ".join(value_errors)))
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, operator, values)


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    def __str__(self) -> str:
        """labels.Selector.String(): the requirements joined by commas."""
        return ",".join(str(r) for r in self.requirements)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


# -- lexer ----------------------------------------------------------------------------------------

IDENTIFIER, END = "identifier", "end of string"
_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),<>"
_TWO_CHARACTER = ("==", "!=")
_KEYWORDS = ("in", "notin")
_OPERATORS = {"in": IN, "notin": NOT_IN, "=": IN, "==": IN, "!=": NOT_IN, ">": GT, "<": LT}

#: (kind, literal): the kind is IDENTIFIER, END, a keyword or the symbol itself
Token = tuple[str, str]


def _lex(text: str) -> list[Token]:
    """The tokens of ``text``, ending with END. Like kube's lexer, which reads bytes, a NUL ends
    the input where a token would start and is swallowed where it ends one."""
    tokens: list[Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text) or text[pos] == "\0":
            tokens.append((END, ""))
            return tokens
        if text[pos] in _SPECIAL:
            literal = text[pos:pos + 2] if text[pos:pos + 2] in _TWO_CHARACTER else text[pos]
            kind = literal
        else:
            end = pos
            while end < len(text) and text[end] not in _SPECIAL + _WHITESPACE + "\0":
                end += 1
            literal = text[pos:end]
            kind = literal if literal in _KEYWORDS else IDENTIFIER
        tokens.append((kind, literal))
        pos += len(literal)
        if text[pos:pos + 1] == "\0":
            pos += 1


# -- parser ---------------------------------------------------------------------------------------


class _Parser:
    """labels.Parser: 'in' and 'notin' are keywords only where an operator is expected."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def lookahead(self, *, operator: bool = False) -> Token:
        return self._as(self.tokens[self.pos], operator)

    def consume(self, *, operator: bool = False) -> Token:
        token = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return self._as(token, operator)

    @staticmethod
    def _as(token: Token, operator: bool) -> Token:
        kind, literal = token
        return (IDENTIFIER, literal) if kind in _KEYWORDS and not operator else token

    def selector(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self.lookahead()
            if kind == END:
                return requirements
            if kind not in (IDENTIFIER, "!"):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or "
                                    f"'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            kind, literal = self.consume()
            if kind == END:
                return requirements
            if kind != ",":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self.lookahead()
            if kind not in (IDENTIFIER, "!"):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        key, operator = self.key_and_inferred_operator()
        if operator in (EXISTS, NOT_EXISTS):
            return new_requirement(key, operator, ())
        symbol = self.operator()
        values = self.value_set() if symbol in _KEYWORDS else self.exact_value()
        return new_requirement(key, _OPERATORS[symbol], sorted(values))

    def key_and_inferred_operator(self) -> tuple[str, str]:
        """The key, and EXISTS or NOT_EXISTS when no binary operator follows it ("" otherwise).
        ``!key`` stays NOT_EXISTS whatever follows, which the caller then refuses."""
        operator = ""
        kind, literal = self.consume()
        if kind == "!":
            operator = NOT_EXISTS
            kind, literal = self.consume()
        if kind != IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        errors = qualified_name_errors(literal)
        if errors:  # kube's parser passes a nil field path here
            raise SelectorError(_invalid("<nil>", literal, "; ".join(errors)))
        if not operator and self.lookahead()[0] in (END, ","):
            operator = EXISTS
        return literal, operator

    def operator(self) -> str:
        """The operator's token: a keyword takes a set of values, a symbol one value."""
        kind, literal = self.consume(operator=True)
        if kind not in _OPERATORS:
            raise SelectorError(f"found '{literal}', expected: in, notin, =, ==, !=, gt, lt")
        return kind

    def value_set(self) -> set[str]:
        kind, literal = self.consume()
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        kind, literal = self.lookahead()
        if kind == ")":  # "()" is the set of the empty value
            self.consume()
            return {""}
        if kind not in (IDENTIFIER, ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.consume()[0] != ")":
            raise SelectorError(f"found '{literal}', expected: ')'")
        return values

    def identifiers(self) -> set[str]:
        """parseIdentifiersList: a leading ',', a ',,' and a trailing ',)' each add ""."""
        values: set[str] = set()
        while True:
            kind, literal = self.consume()
            if kind == IDENTIFIER:
                values.add(literal)
                kind, literal = self.lookahead()
                if kind == ")":
                    return values
                if kind != ",":
                    raise SelectorError(f"found '{literal}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.add("")
                kind = self.lookahead()[0]
                if kind == ")":
                    values.add("")
                    return values
                if kind == ",":
                    self.consume()
                    values.add("")
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.lookahead()[0] in (END, ","):
            return {""}  # key= selects an empty value
        kind, literal = self.consume()
        if kind != IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return {literal}


def parse_label_selector(text: str) -> LabelSelector:
    """Parse kube's label selector syntax; an empty string selects everything. Requirements are
    sorted by key and values sorted and deduplicated, as labels.Parse leaves them."""
    requirements = _Parser(text).selector()
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


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
