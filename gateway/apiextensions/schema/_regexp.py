"""Schema patterns matched as Go's regexp (RE2 syntax) matches them.

kube-openapi runs regexp.MatchString: RE2 semantics, unanchored, "$" only at the very end, \\d
and \\s ASCII-only, \\pL classes. google-re2 (which cel-python already brings) is RE2 itself;
without it Python's re is used with the few translations that matter most.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

try:
    import re2
except ImportError:  # pragma: no cover - re2 comes with cel-python
    re2 = None


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


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    if re2 is not None:
        options = re2.Options()
        options.log_errors = False
        try:
            return re2.compile(pattern, options)
        except re2.error as err:
            raise re.error(_re2_message(err)) from None
    return re.compile(_python_pattern(pattern), re.ASCII)


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


def search(pattern: str, text: str) -> bool:
    """regexp.MatchString(pattern, text); re.error when the pattern does not compile."""
    return _compiled(pattern).search(text) is not None
