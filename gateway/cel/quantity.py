"""kube's quantity library (apiserver pkg/cel/library/quantity.go) over resource.Quantity's
parsing (apimachinery pkg/api/resource).

A Quantity is held as its exact value, a Fraction written ``numerator/denominator`` in lowest
terms, so ``==`` is kube's Equal (``quantity('1') == quantity('1000m')``). Parsing follows
ParseQuantity step by step: the same grammar and errors, values rounded up (away from zero) to
a nano, binary-suffixed ones capped at 2^63-1.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from cel_expr_python import cel

from gateway.cel import opaque

T = cel.Type
QUANTITY = opaque.cel_type(opaque.QUANTITY)

FORMAT_WRONG = ("quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_LETTERS = set("eEinumkKMGTP")
_INT64_MAX = 2**63 - 1
_NANO = Fraction(1, 10**9)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


class QuantityError(ValueError):
    """ParseQuantity's error."""


def _split(text: str) -> tuple[str, str, str]:
    """parseQuantityString: (value with its sign, suffix); QuantityError(FORMAT_WRONG)."""
    pos, end = 0, len(text)
    if text[0] in "+-":
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return "0", "", ""
    start = pos
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    if pos < end and text[pos] == ".":
        pos += 1
        while pos < end and text[pos].isdigit() and text[pos].isascii():
            pos += 1
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_WRONG)
    return value, text[suffix_start:], text[start:suffix_start]


def _interpret(suffix: str) -> tuple[int, int, bool]:
    """(base, exponent, binary) of a suffix; QuantityError(SUFFIX) when it is none."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], False
    if suffix in _BINARY:
        return 2, _BINARY[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?\d+", suffix[1:]):
        exponent = int(suffix[1:])
        if -(2**63) <= exponent < 2**63:
            return 10, int(((exponent + 2**31) % 2**32) - 2**31), False  # Go's int32()
    raise QuantityError(SUFFIX)


def parse(text: str) -> Fraction:
    """ParseQuantity's value of ``text``."""
    if not text:
        raise QuantityError(FORMAT_WRONG)
    if text == "0":
        return Fraction(0)
    value, suffix, _ = _split(text)
    base, exponent, binary = _interpret(suffix)
    if not _NUMBER.fullmatch(value):
        raise QuantityError(NUMERIC)
    try:
        amount = Fraction(Decimal(value))
    except InvalidOperation:
        raise QuantityError(NUMERIC) from None
    amount *= Fraction(base) ** exponent
    negative = amount < 0
    amount = abs(amount)
    if amount and (amount / _NANO).denominator != 1:  # round up to the nano
        amount = Fraction(-(-amount.numerator * 10**9 // amount.denominator), 10**9)
    if binary and amount > _INT64_MAX:
        amount = Fraction(_INT64_MAX)
    return -amount if negative else amount


def _text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _value(arg: Any) -> Fraction:
    numerator, _, denominator = opaque.value_of(arg, opaque.QUANTITY).partition("/")
    return Fraction(int(numerator), int(denominator))


def make(value: Fraction) -> Any:
    return opaque.make(opaque.QUANTITY, _text(value))


# -- the library ---------------------------------------------------------------------------


def _quantity(text: str) -> Any:
    return make(parse(text))


def _is_quantity(text: str) -> bool:
    try:
        parse(text)
    except QuantityError:
        return False
    return True


def _sign(arg: Any) -> int:
    value = _value(arg)
    return (value > 0) - (value < 0)


def _as_integer(arg: Any) -> int:
    value = _value(arg)
    if value.denominator != 1 or not -(2**63) <= value.numerator <= _INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _is_integer(arg: Any) -> bool:
    value = _value(arg)
    return value.denominator == 1 and -(2**63) <= value.numerator <= _INT64_MAX


def _compare(a: Any, b: Any) -> int:
    x, y = _value(a), _value(b)
    return (x > y) - (x < y)


def _other(arg: Any) -> Fraction:
    return Fraction(arg) if isinstance(arg, int) and not isinstance(arg, bool) else _value(arg)


def declarations(runtime: bool) -> list[cel.FunctionDecl]:
    """The checker's typed overloads, or the runtime's (one per argument kind, with its
    function: ``add(Quantity | int)`` is one function dispatching on the argument)."""
    impl = (lambda f: f) if runtime else (lambda f: None)

    def member(name: str, result: cel.Type, params: list[cel.Type], f: Any,
               suffix: str = "") -> cel.Overload:
        return cel.Overload(f"quantity_{name}{suffix}", result, [QUANTITY, *params],
                            is_member=True, impl=impl(f))

    arithmetic = {"add": lambda a, b: make(_value(a) + _other(b)),
                  "sub": lambda a, b: make(_value(a) - _other(b))}
    decls = [
        cel.FunctionDecl("quantity", [cel.Overload("string_to_quantity", QUANTITY, [T.STRING],
                                                   impl=impl(_quantity))]),
        cel.FunctionDecl("isQuantity", [cel.Overload("is_quantity_string", T.BOOL, [T.STRING],
                                                     impl=impl(_is_quantity))]),
        cel.FunctionDecl("sign", [cel.Overload("quantity_sign", T.INT, [QUANTITY],
                                               impl=impl(_sign))]),
        cel.FunctionDecl("isGreaterThan", [member(
            "is_greater_than", T.BOOL, [QUANTITY], lambda a, b: _compare(a, b) == 1)]),
        cel.FunctionDecl("isLessThan", [member(
            "is_less_than", T.BOOL, [QUANTITY], lambda a, b: _compare(a, b) == -1)]),
        cel.FunctionDecl("compareTo", [member("compare_to", T.INT, [QUANTITY], _compare)]),
        cel.FunctionDecl("asApproximateFloat", [member(
            "get_float", T.DOUBLE, [], lambda a: float(_value(a)))]),
        cel.FunctionDecl("asInteger", [member("get_int", T.INT, [], _as_integer)]),
        cel.FunctionDecl("isInteger", [member("is_integer", T.BOOL, [], _is_integer)]),
    ]
    for name, f in arithmetic.items():
        decls.append(cel.FunctionDecl(name, [member(name, QUANTITY, [QUANTITY], f),
                                             member(name, QUANTITY, [T.INT], f, "_int")]))
    return decls
