"""Go's view of decoded JSON values, so that messages and comparisons come out as kube's.

kube decodes a custom resource into Go values (k8s.io/apimachinery/pkg/util/json): a number
that fits an int64 is an int64, any other number a float64. Its messages then print those
values with fmt (%v, %q, %#v) and compare them with reflect.DeepEqual, where 1 and 1.0 are
different values. The functions here do the same with Python's JSON values.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from gateway.apimachinery.gowords import go_quote

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_int(value: Any) -> bool:
    """An int64 as kube decodes it (bools are not numbers; a bigger integer is a float64)."""
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_float(value: Any) -> float:
    """float64(value); an integer too big for a float is +-Inf, as Go's conversion gives."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def normalized(value: Any) -> Any:
    """The value with integers out of int64's range turned into floats, as kube holds them."""
    if type(value) is int and not is_int(value):
        return as_float(value)
    return value


def go_kind(value: Any) -> str:
    """The Go kind of the decoded value: bool, string, int64, float64, slice, map or nil."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if is_int(value):
        return "int64"
    if is_number(value):
        return "float64"
    if isinstance(value, list | tuple):
        return "slice"
    if isinstance(value, dict):
        return "map"
    return "other"


def trunc_int64(value: float) -> int:
    """int64(f): truncation toward zero; amd64 gives the minimum int64 out of range."""
    if value != value or not -(2.0**63) <= value < 2.0**63:
        return INT64_MIN
    return int(value)


def is_json_integer(value: float) -> bool:
    """swag.IsFloat64AJSONInteger (v0.23): within 2^53, equal to its truncation, or above it by
    a relative error under 1e-9 (negative numbers need exact equality, as amd64 converts)."""
    limit = float(2**53 - 1)
    if value != value or not -limit <= value <= limit:
        return False
    if value == int(value):
        return True
    if value < 0:
        return False
    truncated = float(int(value))
    diff = abs(value - truncated)
    if truncated == 0:
        return False
    return diff / (abs(value) + truncated) < 1e-9


# -- fmt ---------------------------------------------------------------------------------------


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest round-tripping decimal digits of abs(value) and the decimal point's place."""
    _sign, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)  # finite: the callers answer NaN and the infinities
    text = "".join(map(str, digits)).lstrip("0")
    stripped = text.rstrip("0")
    exponent += len(text) - len(stripped)
    return stripped or "0", len(stripped) + exponent


def go_float(value: float) -> str:
    """%v (and %g) of a float64: shortest digits, exponent form below 1e-4 and from 1e+06."""
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    digits, point = _shortest_digits(value)
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_sharp(value: Any) -> str:
    """%#v of a value held in an interface{} (maps with sorted keys, as fmt prints them)."""
    kind = go_kind(normalized(value))
    if kind == "nil":
        return "interface {}(nil)"
    if kind == "map":
        items = ", ".join(f"{go_quote(str(k))}:{go_sharp(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + items + "}"
    if kind == "slice":
        return "[]interface {}{" + ", ".join(go_sharp(v) for v in value) + "}"
    return go_v(value)


def go_v(value: Any) -> str:
    """A bad value as field.Error's ErrorBody prints it: null, %q for strings, %v for numbers
    and booleans, %#v for anything else."""
    value = normalized(value)
    kind = go_kind(value)
    if kind == "nil":
        return "null"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "string":
        return go_quote(value)
    if kind == "int64":
        return str(value)
    if kind == "float64":
        return go_float(value)
    if kind in ("map", "slice"):
        return go_sharp(value)
    return str(value)


# -- encoding/json -----------------------------------------------------------------------------


def go_json_float(value: float) -> str:
    """A float64 as encoding/json writes it: %f-style, exponent form below 1e-6 and from 1e21."""
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        digits, point = _shortest_digits(value)
        sign = "-" if value < 0 else ""
        if value == 0:
            return "0" if math.copysign(1.0, value) > 0 else "-0"
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits))
        return f"{sign}{digits[:point]}.{digits[point:]}"
    text = go_float(value)
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0') or '0'}"


_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_json_string(text: str) -> str:
    out = json.dumps(text, ensure_ascii=False)
    return "".join(_HTML_ESCAPES.get(char, char) for char in out)


def go_json(value: Any) -> str:
    """json.Marshal of a decoded value: sorted keys, no spaces, HTML characters escaped."""
    value = normalized(value)
    kind = go_kind(value)
    if kind == "nil":
        return "null"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int64":
        return str(value)
    if kind == "float64":
        return go_json_float(value)
    if kind == "string":
        return _go_json_string(value)
    if kind == "map":
        return "{" + ",".join(f"{_go_json_string(str(k))}:{go_json(value[k])}"
                              for k in sorted(value)) + "}"
    if kind == "slice":
        return "[" + ",".join(go_json(v) for v in value) + "]"
    return _go_json_string(str(value))


# -- reflect -----------------------------------------------------------------------------------


def deep_equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual of two decoded values: an int64 never equals a float64."""
    a, b = normalized(a), normalized(b)
    kind = go_kind(a)
    if kind != go_kind(b):
        return False
    if kind == "map":
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if kind == "slice":
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _go_rune_string(code: int) -> str:
    """string(rune(i)): the character, or U+FFFD for what is no Unicode code point."""
    if 0 <= code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
        return chr(code)
    return "\ufffd"


def converted_equal(data: Any, target: Any) -> bool:
    """reflect's Convert to the target's type, then DeepEqual (kube-openapi's enum check): an
    int64 converts to a float64 and to a string (as a rune), a float64 to an int64."""
    data, target = normalized(data), normalized(target)
    if data is None or target is None:
        return False
    if deep_equal(data, target):
        return True
    source, goal = go_kind(data), go_kind(target)
    if source == "int64" and goal == "float64":
        return as_float(data) == target
    if source == "int64" and goal == "string":
        return _go_rune_string(data) == target
    if source == "float64" and goal == "int64":
        return trunc_int64(data) == target
    return False
