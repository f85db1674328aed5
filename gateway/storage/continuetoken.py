"""The opaque ``continue`` token of paged lists.

Its shape is kube-apiserver's: base64url of ``{"v":"meta.k8s.io/v1","rv":N,"start":"<key>"}``
where ``rv`` pins the revision every page is read at (a consistent snapshot) and ``start`` is
the next key, relative to the listed prefix. Both storage backends share this encoding.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from gateway.apimachinery.gowords import json_kind, json_syntax_error, parse_int, raw_url_b64decode
from gateway.storage.errors import InvalidContinueError

_VERSION = "meta.k8s.io/v1"
_INVALID = "continue key is not valid"


@dataclass(frozen=True, slots=True)
class ContinueToken:
    revision: int
    start_key: str  # relative to the listed prefix


def encode(revision: int, next_key_relative: str) -> str:
    """Build a token that resumes a list at ``next_key_relative`` and ``revision``."""
    raw = json.dumps(
        {"v": _VERSION, "rv": revision, "start": next_key_relative},
        separators=(",", ":"),
    ).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _go_clean(path: str) -> str:
    """Go's path.Clean for a rooted path: no empty, "." or ".." elements, no trailing slash."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


class _Number(str):
    """A JSON number as its literal text, so that Go's int64 decoding can be judged."""


class _Object(list):
    """A JSON object as its (key, value) pairs, in order, duplicates kept (as Go reads it)."""


_FIELDS = {"v": "string", "rv": "int64", "start": "string"}


def _invalid(detail: str) -> InvalidContinueError:
    return InvalidContinueError(_INVALID, detail=detail)


def _json_type(value: object) -> str:
    if isinstance(value, _Number):
        return "number"
    return "object" if isinstance(value, _Object) else json_kind(value)


def _unmarshal(data: bytes) -> dict[str, object]:
    """json.Unmarshal into kube's continueToken struct, refusing what Go refuses, in its
    words (the first type error, once the whole token is read)."""
    syntax = json_syntax_error(data)
    if syntax:
        raise _invalid(syntax)
    document = json.loads(data.decode("utf-8", "replace"), parse_int=_Number,
                          parse_float=_Number, object_pairs_hook=_Object)
    if document is None:
        return {}
    if not isinstance(document, _Object):
        raise _invalid(f"json: cannot unmarshal {_json_type(document)} into Go value of type "
                       "storage.continueToken")
    fields: dict[str, object] = {}
    first_error = ""
    for key, value in document:
        name = key if key in _FIELDS else next(
            (f for f in _FIELDS if f.lower() == key.lower()), None)
        if name is None or value is None:
            continue
        wanted = _FIELDS[name]
        found = _json_type(value)
        if wanted == "int64" and found == "number":
            number, _ = parse_int(value)
            if number is not None:
                fields[name] = number
                continue
            found = f"number {value}"
        elif wanted == "string" and found == "string":
            fields[name] = value
            continue
        first_error = first_error or (f"json: cannot unmarshal {found} into Go struct field "
                                      f"continueToken.{name} of type {wanted}")
    if first_error:
        raise _invalid(first_error)
    return fields


def decode(token: str) -> ContinueToken:
    """Parse a token as kube's storage.DecodeContinue does; a malformed one is an
    InvalidContinueError whose detail is kube's."""
    try:
        data = raw_url_b64decode(token)
    except ValueError as err:
        raise _invalid(str(err)) from None
    fields = _unmarshal(data)
    version = fields.get("v", "")
    if version != _VERSION:
        raise _invalid(f"server does not recognize this encoded version {version}")
    revision, start = fields.get("rv", 0), str(fields.get("start", ""))
    if revision == 0:
        raise _invalid(f"incorrect encoded start resourceVersion (version {_VERSION})")
    if not start:
        raise _invalid(f"encoded start key empty (version {_VERSION})")
    # a start key that could climb out of the listed prefix is refused
    key = start if start.startswith("/") else "/" + start
    if _go_clean(key) != key:
        raise _invalid(start)
    if not isinstance(revision, int) or revision < 0:  # kube's "latest" (-1) is not served
        raise InvalidContinueError(_INVALID)
    return ContinueToken(revision=revision, start_key=key[1:])
