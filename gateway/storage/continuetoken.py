"""The opaque ``continue`` token of paged lists.

Its shape is kube-apiserver's: base64url of ``{"v":"meta.k8s.io/v1","rv":N,"start":"<key>"}``
where ``rv`` pins the revision every page is read at (a consistent snapshot) and ``start`` is
the next key, relative to the listed prefix. Both storage backends share this encoding.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from gateway.storage.errors import InvalidContinueError

_VERSION = "meta.k8s.io/v1"


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


def decode(token: str) -> ContinueToken:
    """Parse a token; any malformed token is an InvalidContinueError."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeError) as err:
        raise InvalidContinueError("continue key is not valid") from err
    if not isinstance(data, dict) or data.get("v") != _VERSION:
        raise InvalidContinueError("continue key is not valid")
    revision, start = data.get("rv"), data.get("start")
    if not isinstance(revision, int) or revision <= 0 or not isinstance(start, str):
        raise InvalidContinueError("continue key is not valid")
    # kube refuses a start key that could climb out of the listed prefix
    if start.startswith("/") or "/../" in f"/{start}/" or start.startswith(".."):
        raise InvalidContinueError("continue key is not valid")
    return ContinueToken(revision=revision, start_key=start)
