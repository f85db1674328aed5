"""Schema patterns matched as Go's regexp (RE2 syntax) matches them.

kube-openapi runs regexp.MatchString: RE2 semantics, unanchored, "$" only at the very end, \\d
and \\s ASCII-only, \\pL classes. google-re2 (a dependency) is RE2 itself;
without it Python's re is used with the few translations that matter most.

RE2 through google-re2's Python wrapper costs microseconds a search (it builds match objects
and maps byte offsets back to characters); the answer here is only whether there is a match,
so the compiled RE2 program is asked directly. Cheaper still is Python's re, used where it is
provably the same answer in bounded time (``_python_equivalent``): the pattern (which RE2
compiled first, so errors stay RE2's) lies in a small subset whose meaning is spelled out
below and written out again for Python from that meaning, the text is ASCII (so no question
of Unicode classes, case folding or encodings arises), and the text is short enough that the
backtracking the pattern allows stays within a fixed budget of steps. Everything else is
RE2's, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

try:
    import re2
except ImportError:  # pragma: no cover - re2 is a dependency
    re2 = None

Matcher = Callable[[str], bool]


def _python_pattern(pattern: str) -> str:
    """\\z is \\Z in Python; an unescaped "$" outside a class must not match before a final
    newline unless the pattern asks for multi-line mode."""
    out, escaped, in_class = [], False, False
    multiline = bool(re.search(r"\(\?[a-zA-Z]*m", pattern))
    for char in pattern:
        if escaped:
            out.append("Z" if char == "z" else char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif in_class:
            in_class = char != "]"
            out.append(char)
        else:
            in_class = char == "["
            out.append(r"(?!\n)$" if char == "$" and not multiline else char)
    return "".join(out)


#: RE2's error codes in Go's regexp/syntax words.
_GO_CODES = {"missing ]": "missing closing ]", "missing )": "missing closing )",
             "trailing \\": "trailing backslash at end of expression",
             "no argument for repetition operator": "missing argument to repetition operator",
             "invalid repetition size": "invalid repeat count",
             "bad repetition operator": "invalid nested repetition operator",
             "invalid perl operator": "invalid or unsupported Perl syntax",
             "invalid named capture group": "invalid named capture"}


def _re2_message(err: Exception) -> str:
    """RE2's "no argument for repetition operator: +" as Go's regexp says it."""
    text = err.args[0] if err.args else str(err)
    text = text.decode() if isinstance(text, bytes) else str(text)
    code, sep, expr = text.partition(": ")
    if not sep:
        return f"error parsing regexp: {_GO_CODES.get(text, text)}"
    return f"error parsing regexp: {_GO_CODES.get(code, code)}: `{expr}`"


# -- a subset of RE2 that Python's re matches alike ---------------------------------------------
#
# The subset, as RE2 (non-POSIX syntax, default flags) reads it, over ASCII text:
#   literals     printable ASCII characters that are not operators; "\" before punctuation;
#                \t \n \r \f \v \a
#   classes      [...] and [^...] of literals, ranges between two literals (a "-" first or
#                last is itself) and \d \D \w \W \s \S (ASCII: \s is [\t\n\f\r ], no \v);
#                "." (anything but "\n"); \d \D \w \W \s \S
#   assertions   ^ and \A (start of text), $ and \z (end of text: no multi-line flag can be
#                set), \b (ASCII word boundary; not \B, which Python never finds in "")
#   groups       (...), (?:...), (?P<name>...), (?<name>...); alternation with "|"
#   repetition   * + ? {n} {n,} {n,m}, greedy or lazy ("?" after), on a single-character item;
#                on a group only "?"
# Anything else (flags, \p classes, \x, \Q, POSIX [:classes:], a "{" that is no repetition,
# repetition of a group, non-ASCII or control characters in the pattern) is left to RE2. A
# pattern of the subset is written out for Python from what it means (every character set as
# an explicit set of ASCII code points, groups non-capturing, "$" as \Z), so Python's own
# reading of the original text never matters. Greedy or lazy changes which match is found,
# never whether one is.
#
# Python backtracks: every choice a repetition, "?" or alternative offers may be tried. With
# repetition only of single characters and "?" on groups, each item is entered at most once
# per path, so the paths are at most the product of the choices: a repetition of a set that
# the next character to match can never belong to (nor the end of text, after a "$") gives
# way only as far as where that next character stands, so it counts as one choice;
# otherwise as len(text) + 1. A pattern not anchored at the start is tried at every position.
# Each path costs at most len(text) + len(pattern) steps. A text whose bound exceeds
# _BUDGET, or longer than _LONGEST, goes to RE2.

_BUDGET = 1 << 12
#: Past this length RE2's fixed cost is repaid and its linear scan is the cheaper one.
_LONGEST = 128
_ASCII = (1 << 128) - 1
_END = 1 << 128  # the end of the text, for what may follow a repetition
_WORD = sum(1 << c for c in b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGIT = sum(1 << c for c in b"0123456789")
_SPACE = sum(1 << c for c in b"\t\n\f\r ")
_PERL = {"d": _DIGIT, "D": _ASCII & ~_DIGIT, "w": _WORD, "W": _ASCII & ~_WORD,
         "s": _SPACE, "S": _ASCII & ~_SPACE}
_CONTROL = {"t": 9, "n": 10, "r": 13, "f": 12, "v": 11, "a": 7}
_ZERO = {"^": r"\A", "$": r"\Z"}
_ZERO_ESCAPES = {"A": r"\A", "z": r"\Z", "b": r"\b"}
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


class _Unsafe(Exception):
    """The pattern is outside the subset."""


# Parsed forms: ("char", mask) one character of the set (an int of 128 bits, one per ASCII
# code point); ("zero", python, blocks) an assertion (``blocks``: it holds only at the end of
# the text); ("seq", items); ("alt", branches); ("group", inner); ("rep", char, min, max or
# None); ("opt", group).


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise _Unsafe
        self.at += 1
        return char

    def alternation(self) -> tuple:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self) -> tuple:
        items: list[tuple] = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.repeated(self.item()))
        return ("seq", items)

    def item(self) -> tuple:
        char = self.take()
        if char == "(":
            if self.peek() == "?":
                self.at += 1
                self.group_name()
            inner = self.alternation()
            if self.take() != ")":
                raise _Unsafe
            return ("group", inner)
        if char == "[":
            return ("char", self.char_class())
        if char == ".":
            return ("char", _ASCII & ~(1 << 10))
        if char in "^$":
            return ("zero", _ZERO[char], char == "$")
        if char == "\\":
            escaped = self.take()
            if escaped in _ZERO_ESCAPES:
                return ("zero", _ZERO_ESCAPES[escaped], escaped == "z")
            if escaped in _PERL:
                return ("char", _PERL[escaped])
            return ("char", 1 << self.escaped_literal(escaped))
        if char in "*+?{" or not " " <= char <= "~":
            raise _Unsafe
        return ("char", 1 << ord(char))

    def group_name(self) -> None:
        """After "(?": ":" or a capture's name (RE2 has checked it)."""
        char = self.take()
        if char == ":":
            return
        if char == "P" and self.peek() == "<":
            self.at += 1
        elif char != "<":
            raise _Unsafe
        while self.take() != ">":
            pass

    @staticmethod
    def escaped_literal(char: str) -> int:
        if char in _CONTROL:
            return _CONTROL[char]
        if char in _PUNCT:
            return ord(char)
        raise _Unsafe

    def char_class(self) -> int:
        negated = self.peek() == "^"
        if negated:
            self.at += 1
        if self.peek() == "]":
            raise _Unsafe
        mask, first = 0, True
        while (char := self.take()) != "]":
            if char == "[" or not " " <= char <= "~":
                raise _Unsafe
            if char == "\\":
                escaped = self.take()
                if escaped in _PERL:
                    mask |= _PERL[escaped]
                    if self.peek() == "-" and self.text[self.at + 1:self.at + 2] != "]":
                        raise _Unsafe
                    first = False
                    continue
                low = self.escaped_literal(escaped)
                if self.peek() == "-" and self.text[self.at + 1:self.at + 2] != "]":
                    raise _Unsafe
            elif char == "-" and not first and self.peek() != "]":
                raise _Unsafe  # a range after a range, or from a class: not in the subset
            else:
                low = ord(char)
            high = low
            if self.peek() == "-" and self.text[self.at + 1:self.at + 2] not in ("]", ""):
                self.at += 1
                end = self.take()
                if end in "\\[-" or not " " <= end <= "~" or ord(end) < low:
                    raise _Unsafe
                high = ord(end)
            mask |= ((1 << (high + 1)) - 1) & ~((1 << low) - 1)
            first = False
        return _ASCII & ~mask if negated else mask

    def repeated(self, item: tuple) -> tuple:
        char = self.peek()
        if char in ("*", "+", "?"):
            self.at += 1
            low, high = (0, None) if char == "*" else (1, None) if char == "+" else (0, 1)
        elif char == "{":
            found = _REPEAT.match(self.text, self.at)
            if not found:
                raise _Unsafe
            self.at = found.end()
            low = int(found[1])
            high = low if found[2] is None else (int(found[3]) if found[3] else None)
        else:
            return item
        if self.peek() == "?":
            self.at += 1
        if self.peek() in ("*", "+", "?", "{"):
            raise _Unsafe
        if item[0] == "group":
            if (low, high) != (0, 1):
                raise _Unsafe
            return ("opt", item)
        if item[0] != "char":
            raise _Unsafe
        return ("rep", item, low, high)


def _first(node: tuple) -> tuple[int, bool]:
    """The characters (and _END) a match of ``node`` may start with, and whether it may be
    empty. Assertions other than the end are taken as empty (which only widens the set)."""
    kind = node[0]
    if kind == "char":
        return node[1], False
    if kind == "zero":
        return (_END, False) if node[2] else (0, True)
    if kind == "group":
        return _first(node[1])
    if kind == "opt":
        return _first(node[1])[0], True
    if kind == "rep":
        return node[1][1], node[2] == 0
    if kind == "alt":
        firsts = [_first(b) for b in node[1]]
        mask = 0
        for m, _ in firsts:
            mask |= m
        return mask, any(e for _, e in firsts)
    mask = 0
    for item in node[1]:
        m, empty = _first(item)
        mask |= m
        if not empty:
            return mask, False
    return mask, True


def _choices(node: tuple, follow: int) -> tuple[int, int]:
    """(constant factor, number of repetitions counting len(text) + 1) of the paths."""
    kind = node[0]
    if kind in ("char", "zero"):
        return 1, 0
    if kind == "group":
        return _choices(node[1], follow)
    if kind == "opt":
        factor, free = _choices(node[1], follow)
        return 2 * factor, free
    if kind == "rep":
        _, item, low, high = node
        if high == low or not item[1] & follow:
            return 1, 0
        return (2, 0) if (low, high) == (0, 1) else (1, 1)
    if kind == "alt":
        factor, free = len(node[1]), 0
        for branch in node[1]:
            f, n = _choices(branch, follow)
            factor, free = factor * f, free + n
        return factor, free
    factor, free = 1, 0
    items = node[1]
    for i, item in enumerate(items):
        after = follow
        for later in reversed(items[i + 1:]):
            m, empty = _first(later)
            after = m | (after if empty else 0)
        f, n = _choices(item, after)
        factor, free = factor * f, free + n
    return factor, free


def _python_text(node: tuple) -> str:
    kind = node[0]
    if kind == "char":
        return _set_text(node[1])
    if kind == "zero":
        return node[1]
    if kind == "group":
        return f"(?:{_python_text(node[1])})"
    if kind == "opt":
        return f"{_python_text(node[1])}?"
    if kind == "rep":
        _, item, low, high = node
        bound = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((low, high)) or (
            f"{{{low},}}" if high is None else f"{{{low},{high}}}")
        return _set_text(item[1]) + bound
    if kind == "alt":
        return "|".join(_python_text(b) for b in node[1])
    return "".join(_python_text(item) for item in node[1])


def _set_text(mask: int) -> str:
    if mask and not mask & (mask - 1):
        return f"\\x{mask.bit_length() - 1:02x}"
    ranges, code = [], 0
    while code < 128:
        if mask >> code & 1:
            start = code
            while code < 128 and mask >> code & 1:
                code += 1
            ranges.append(f"\\x{start:02x}" if code - 1 == start else
                          f"\\x{start:02x}-\\x{code - 1:02x}")
        else:
            code += 1
    return "[" + "".join(ranges) + "]" if ranges else r"[^\x00-\x7f]"


def _longest(factor: int, free: int, anchored: bool, size: int) -> int:
    """The longest text whose paths times steps stay within _BUDGET."""
    def cost(n: int) -> int:
        return factor * (n + 1) ** free * (1 if anchored else n + 1) * (n + size + 1)
    low, high = -1, 1 << 20
    while low < high:
        middle = (low + high + 1) // 2
        if cost(middle) <= _BUDGET:
            low = middle
        else:
            high = middle - 1
    return low


def _python_equivalent(pattern: str) -> tuple[re.Pattern[str], int] | None:
    """Python's re for a pattern RE2 compiled, and the longest ASCII text to use it on; None
    when the pattern is outside the subset."""
    parser = _Parser(pattern)
    try:
        tree = parser.alternation()
        if parser.at != len(pattern):
            return None
    except (_Unsafe, IndexError, RecursionError):
        return None
    items = tree[1] if tree[0] == "seq" else []
    anchored = bool(items) and items[0][0] == "zero" and items[0][1] == r"\A"
    factor, free = _choices(tree, _ASCII | _END)
    longest = min(_longest(factor, free, anchored, len(pattern)), _LONGEST)
    if longest < 0:
        return None
    try:
        return re.compile(_python_text(tree), re.ASCII), longest
    except (re.error, RecursionError):
        return None


# -- compiled patterns -------------------------------------------------------------------------


def _re2_matcher(compiled: Any) -> Matcher:
    """A search through RE2's own Match (unanchored, whole text) when the wrapper exposes it."""
    program = getattr(compiled, "_regexp", None)
    try:
        anchor = re2._re2.RE2.Anchor.UNANCHORED
    except AttributeError:  # pragma: no cover - another google-re2 layout
        anchor = None
    if anchor is None or program is None or not hasattr(program, "Match"):
        return lambda text: compiled.search(text) is not None
    match = program.Match
    wrapper = compiled.search

    def search(text: str) -> bool:
        if type(text) is not str:
            return wrapper(text) is not None
        encoded = text.encode("utf-8")
        return match(anchor, encoded, 0, len(encoded))[0][0] != -1
    return search


@lru_cache(maxsize=512)
def matcher(pattern: str) -> Matcher:
    """regexp.MatchString(pattern, ·) as a function of the text; re.error (with Go's message)
    when the pattern does not compile."""
    if re2 is None:
        python = re.compile(_python_pattern(pattern), re.ASCII)
        return lambda text: python.search(text) is not None
    options = re2.Options()
    options.log_errors = False
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as err:
        raise re.error(_re2_message(err)) from None
    slow = _re2_matcher(compiled)
    equivalent = _python_equivalent(pattern)
    if equivalent is None:
        return slow
    fast, longest = equivalent[0].search, equivalent[1]

    def search(text: str) -> bool:
        if type(text) is str and len(text) <= longest and text.isascii():
            return fast(text) is not None
        return slow(text)
    return search


def search(pattern: str, text: str) -> bool:
    """regexp.MatchString(pattern, text); re.error when the pattern does not compile."""
    return matcher(pattern)(text)
