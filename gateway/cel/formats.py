"""kube's format library (apiserver pkg/cel/library/format.go): ``format.<name>()`` and
``format.named(name)`` give a format, ``<format>.validate(value)`` its complaints.

In kube ``validate`` answers ``optional(list(string))`` (none when the value is fine) and
``format.named`` ``optional(Format)`` (none for an unknown name). cel-expr-python cannot hand
an optional back from Python, so here they answer the list (empty when fine) and the format
(nameless when unknown), and those two types also take the optional methods kube's callers use
on them most: ``hasValue()`` and ``value()``. ``!format.dns1123Label().validate(x)
.hasValue()`` and ``format.named(n).value().validate(x)`` read as in kube; what only an optional
can do (``orValue``, ``or``, ``== optional.none()``, ``.?``) does not type-check (cel-cpp runs
``orValue`` and ``or`` itself, for optionals only).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from cel_expr_python import cel

from gateway.apimachinery.labels import label_value_errors, qualified_name_errors
from gateway.cel import opaque, urls
from gateway.cel.types import parse_timestamp
from gateway.registry.validation import (
    dns1035_label_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
)

T = cel.Type
FORMAT = opaque.cel_type(opaque.FORMAT)
_ERRORS = T.List(T.STRING)
_UUID = re.compile(r"(?i)(^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)|"
                   r"(^[0-9a-f]{32}$)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """NameIs...(name, prefix=true): a trailing dash is allowed (maskTrailingDash)."""
    def masked(value: str) -> list[str]:
        if len(value) > 1 and value.endswith("-"):
            value = value[:-2] + "a"
        return check(value)
    return masked


def _uri(value: str) -> list[str]:
    try:
        urls.parse_request_uri(value)
    except ValueError as err:
        return [str(err)]
    return []


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    if _DATE.fullmatch(value):
        try:
            parse_timestamp(value)
            return []
        except ValueError:
            pass
    return ["invalid date"]


def _datetime(value: str) -> list[str]:
    try:
        parse_timestamp(value)
    except (ValueError, OverflowError):
        return ["invalid datetime"]
    return [] if "T" in value.upper() or " " in value else ["invalid datetime"]


#: ConstantFormats: the name after ``format.``, and the validation.
FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label_errors,
    "dns1123Subdomain": dns1123_subdomain_errors,
    "dns1035Label": dns1035_label_errors,
    "qualifiedName": qualified_name_errors,
    "dns1123LabelPrefix": _prefix(dns1123_label_errors),
    "dns1123SubdomainPrefix": _prefix(dns1123_subdomain_errors),
    "dns1035LabelPrefix": _prefix(dns1035_label_errors),
    "labelValue": label_value_errors,
    "uri": _uri,
    "uuid": lambda v: [] if _UUID.search(v) else ["does not match the UUID format"],
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


def _format(arg: Any) -> str:
    return opaque.value_of(arg, opaque.FORMAT)


def _validate(fmt: Any, value: str) -> list[str]:
    return FORMATS[_format(fmt)](value)


def _value(arg: Any) -> Any:
    """``value()`` of what stands for an optional: an error when it is "none"."""
    if (opaque.type_name(arg) == opaque.FORMAT and not _format(arg)) or arg == []:
        raise ValueError("optional.none() dereference")
    return arg


def _has_value(arg: Any) -> bool:
    return bool(_format(arg)) if opaque.type_name(arg) == opaque.FORMAT else bool(arg)


def declarations(runtime: bool) -> list[cel.FunctionDecl]:
    impl = (lambda f: f) if runtime else (lambda f: None)
    decls = [
        cel.FunctionDecl("validate", [cel.Overload(
            "format-validate", _ERRORS, [FORMAT, T.STRING], is_member=True,
            impl=impl(_validate))]),
        cel.FunctionDecl("format.named", [cel.Overload(
            "format-named", FORMAT, [T.STRING],
            impl=impl(lambda name: opaque.make(opaque.FORMAT, name if name in FORMATS
                                               else "")))]),
    ]
    for name in FORMATS:
        decls.append(cel.FunctionDecl(f"format.{name}", [cel.Overload(
            f"format.{name}", FORMAT, [], impl=impl(lambda n=name: opaque.make(
                opaque.FORMAT, n)))]))
    return decls


def merged_overloads(runtime: bool) -> dict[str, list[cel.Overload]]:
    """The optional methods on the two stand-ins, merged into the optional library's."""
    impl = (lambda f: f) if runtime else (lambda f: None)
    return {
        "hasValue": [
            cel.Overload("errors_has_value", T.BOOL, [_ERRORS], is_member=True,
                         impl=impl(_has_value)),
            cel.Overload("format_has_value", T.BOOL, [FORMAT], is_member=True,
                         impl=impl(_has_value))],
        "value": [
            cel.Overload("errors_value", _ERRORS, [_ERRORS], is_member=True, impl=impl(_value)),
            cel.Overload("format_value", FORMAT, [FORMAT], is_member=True, impl=impl(_value))],
    }
