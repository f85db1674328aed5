"""Go's own error wording, where kube-apiserver passes a Go library error on to clients.

kube's messages often end in what Go's standard library said: strconv ("strconv.ParseInt:
parsing "x": invalid syntax"), time ("time: invalid duration "soon""), encoding/base64
("illegal base64 data at input byte 3") and encoding/json ("invalid character 'x' looking for
beginning of value"). These functions say the same things about the same inputs, so that the
gateway's answers match kube's word for word. Nothing here imports the rest of the gateway.
"""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from typing import Any

_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t",
            "\v": r"\v", '"': r"\"", "\\": r"\\"}


def go_quote(text: str) -> str:
    """strconv.Quote (and %q): printable characters as they are, the rest escaped."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


# -- strconv ---------------------------------------------------------------------------------

_DIGITS = re.compile(r"[0-9]+")


def parse_int(text: str) -> tuple[int | None, str]:
    """strconv.ParseInt(text, 10, 64): the value, or None and Go's error."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not _DIGITS.fullmatch(digits):
        return None, f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax"
    value = int(text)
    if not -(2**63) <= value < 2**63:
        return None, f"strconv.ParseInt: parsing {go_quote(text)}: value out of range"
    return value, ""


def parse_uint(text: str) -> tuple[int | None, str]:
    """strconv.ParseUint(text, 10, 64): the value, or None and Go's error (no sign allowed)."""
    if not _DIGITS.fullmatch(text):
        return None, f"strconv.ParseUint: parsing {go_quote(text)}: invalid syntax"
    value = int(text)
    if value >= 2**64:
        return None, f"strconv.ParseUint: parsing {go_quote(text)}: value out of range"
    return value, ""


# -- time.ParseDuration ----------------------------------------------------------------------

_NANOS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6,
          "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_MAX = 1 << 63


def _time_quote(text: str) -> str:
    """The time package's own quoting: non-ASCII and control bytes as \\x escapes."""
    out: list[str] = []
    for char in text:
        if ord(char) < 0x20 or ord(char) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    return '"' + "".join(out) + '"'


_LEADING_DIGITS = re.compile(r"[0-9]*")  # not _DIGITS: parse_int's needs one digit at least


def _leading_digits(text: str) -> str:
    """The ASCII digits ``text`` begins with (maybe none)."""
    match = _LEADING_DIGITS.match(text)
    assert match is not None  # [0-9]* matches every text, with "" at least
    return match.group()


def _number_char(char: str) -> bool:
    return char == "." or "0" <= char <= "9"


def parse_duration(text: str) -> float:
    """time.ParseDuration in seconds; a ValueError carries Go's message."""
    invalid = ValueError(f"time: invalid duration {_time_quote(text)}")
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not _number_char(rest[0]):
            raise invalid
        whole = _leading_digits(rest)
        rest = rest[len(whole):]
        fraction = ""
        if rest[:1] == ".":
            fraction = _leading_digits(rest[1:])
            rest = rest[1 + len(fraction):]
        if not whole and not fraction:
            raise invalid
        unit_end = 0
        while unit_end < len(rest) and not _number_char(rest[unit_end]):
            unit_end += 1
        if unit_end == 0:
            raise ValueError(f"time: missing unit in duration {_time_quote(text)}")
        unit, rest = rest[:unit_end], rest[unit_end:]
        if unit not in _NANOS:
            raise ValueError(f"time: unknown unit {_time_quote(unit)} in duration "
                             f"{_time_quote(text)}")
        scale = _NANOS[unit]
        value = int(whole or "0")
        if value > _MAX // scale:
            raise invalid
        value *= scale
        if fraction:
            value += int(int(fraction) * (scale / 10 ** len(fraction)))
            if value > _MAX:
                raise invalid
        total += value
        if total > _MAX:
            raise invalid
    if not negative and total > _MAX - 1:
        raise invalid
    return (-total if negative else total) / 1e9


# -- encoding/base64 -------------------------------------------------------------------------

_URL_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def raw_url_b64decode(text: str) -> bytes:
    """base64.RawURLEncoding.DecodeString; a ValueError carries Go's message. CR and LF are
    skipped, as Go's decoder does."""
    data = bytes(b for b in text.encode("utf-8", "surrogatepass") if b not in b"\r\n")
    raw = text.encode("utf-8", "surrogatepass")
    positions = [i for i, b in enumerate(raw) if b not in b"\r\n"]
    for index, byte in enumerate(data):
        if byte not in _URL_ALPHABET:
            raise ValueError(f"illegal base64 data at input byte {positions[index]}")
    if len(data) % 4 == 1:  # a lone final character cannot carry a whole byte
        raise ValueError(f"illegal base64 data at input byte {positions[-1]}")
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


# -- encoding/json ---------------------------------------------------------------------------


def _quote_char(byte: int) -> str:
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(byte))[1:-1] + "'"


_SPACE = b" \t\r\n"
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
_HEX = frozenset(b"0123456789abcdefABCDEF")


class _Syntax(Exception):
    pass


class _Scanner:
    """encoding/json's validity check (checkValid), reporting its first error as Go does."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def fail(self, context: str) -> _Syntax:
        if self.pos >= len(self.data):
            return _Syntax("unexpected end of JSON input")
        return _Syntax(f"invalid character {_quote_char(self.data[self.pos])} {context}")

    def peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def skip_space(self) -> None:
        while self.pos < len(self.data) and self.data[self.pos] in _SPACE:
            self.pos += 1

    def run(self) -> None:
        self.skip_space()
        self.value()
        self.skip_space()
        if self.pos < len(self.data):
            raise self.fail("after top-level value")

    def value(self) -> None:
        char = self.peek()
        if char == ord("{"):
            self.pos += 1
            self.object()
        elif char == ord("["):
            self.pos += 1
            self.array()
        elif char == ord('"'):
            self.pos += 1
            self.string()
        elif char is not None and (char == ord("-") or ord("0") <= char <= ord("9")):
            self.number()
        elif char in _LITERALS:
            self.literal(_LITERALS[char])
        else:
            raise self.fail("looking for beginning of value")

    def object(self) -> None:
        self.skip_space()
        if self.peek() == ord("}"):
            self.pos += 1
            return
        while True:
            if self.peek() != ord('"'):
                raise self.fail("looking for beginning of object key string")
            self.pos += 1
            self.string()
            self.skip_space()
            if self.peek() != ord(":"):
                raise self.fail("after object key")
            self.pos += 1
            self.skip_space()
            self.value()
            self.skip_space()
            if self.peek() == ord(","):
                self.pos += 1
                self.skip_space()
                continue
            if self.peek() == ord("}"):
                self.pos += 1
                return
            raise self.fail("after object key:value pair")

    def array(self) -> None:
        self.skip_space()
        if self.peek() == ord("]"):
            self.pos += 1
            return
        while True:
            self.value()
            self.skip_space()
            if self.peek() == ord(","):
                self.pos += 1
                self.skip_space()
                continue
            if self.peek() == ord("]"):
                self.pos += 1
                return
            raise self.fail("after array element")

    def string(self) -> None:
        while True:
            char = self.peek()
            if char is None:
                raise self.fail("")
            if char == ord('"'):
                self.pos += 1
                return
            if char < 0x20:
                raise self.fail("in string literal")
            self.pos += 1
            if char == ord("\\"):
                escape = self.peek()
                if escape is not None and escape in b'"\\/bfnrt':
                    self.pos += 1
                elif escape == ord("u"):
                    self.pos += 1
                    for _ in range(4):
                        digit = self.peek()
                        if digit is None or digit not in _HEX:
                            raise self.fail("in \\u hexadecimal character escape")
                        self.pos += 1
                else:
                    raise self.fail("in string escape code")

    def digits(self) -> int:
        start = self.pos
        while (char := self.peek()) is not None and ord("0") <= char <= ord("9"):
            self.pos += 1
        return self.pos - start

    def number(self) -> None:
        if self.peek() == ord("-"):
            self.pos += 1
            char = self.peek()
            if char is None or not ord("0") <= char <= ord("9"):
                raise self.fail("in numeric literal")
        if self.peek() == ord("0"):
            self.pos += 1
        else:
            self.digits()
        if self.peek() == ord("."):
            self.pos += 1
            if not self.digits():
                raise self.fail("after decimal point in numeric literal")
        if self.peek() in (ord("e"), ord("E")):
            self.pos += 1
            if self.peek() in (ord("+"), ord("-")):
                self.pos += 1
            if not self.digits():
                raise self.fail("in exponent of numeric literal")

    def literal(self, word: bytes) -> None:
        self.pos += 1
        for expected in word[1:]:
            if self.peek() != expected:
                raise self.fail(f"in literal {word.decode()} (expecting {_quote_char(expected)})")
            self.pos += 1


#: Go's name for the struct kube first decodes a body into, to find its kind and apiVersion
#: (its errors name it: "json: cannot unmarshal array into Go value of type struct { ... }").
TYPE_META_STRUCT = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
                    'Kind string "json:\\"kind,omitempty\\"" }')


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """A decoded value with each lone UTF-16 surrogate (a ``\\ud800`` escape without its pair)
    made U+FFFD, as Go's decoders make it. Python's keep it, and a string holding one cannot be
    written as UTF-8 afterwards (validation, storage and logs all failed on it)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    return value


def json_syntax_error(data: bytes) -> str:
    """What encoding/json says of ``data`` that is not JSON, or "" when it is."""
    try:
        _Scanner(data).run()
    except _Syntax as err:
        return str(err)
    return ""


def json_kind(value: object) -> str:
    """The JSON type of a decoded value, as Go's UnmarshalTypeError names it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# -- fmt ---------------------------------------------------------------------------------------


def go_float(value: float) -> str:
    """fmt's %v of a float64 (strconv's 'g' with the shortest digits): e-notation when the
    exponent is below -4 or 6 and above, with at least two exponent digits."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if str(value).startswith("-") else ""
    if value == 0:
        return sign + "0"
    _, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    shown = "".join(map(str, digits))
    exp = len(shown) + int(exponent) - 1  # the decimal exponent of the first digit
    if exp < -4 or exp >= 6:
        mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{shown}"
    if len(shown) <= exp + 1:
        return sign + shown + "0" * (exp + 1 - len(shown))
    return f"{sign}{shown[:exp + 1]}.{shown[exp + 1:]}"


def go_print(value: object) -> str:
    """fmt's %v (and %+v) of a decoded JSON value: map[k:v ...] with sorted keys, [a b] for
    lists, strings bare, <nil> for null."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_print(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def json_patch_shape_error(document: Any) -> str:
    """What evanphx/json-patch's decoder says of a JSON patch that is no list of operation
    objects ("" when it is one)."""
    if not isinstance(document, list):
        return (f"json: cannot unmarshal {json_kind(document)} into Go value of type "
                "jsonpatch.Patch")
    for operation in document:
        if not isinstance(operation, dict):
            return (f"json: cannot unmarshal {json_kind(operation)} into Go value of type "
                    "jsonpatch.Operation")
    return ""
