"""The server's notion of now, as kube writes timestamps (RFC 3339, second precision)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

_stamp: tuple[int, str] = (0, "")


def now_rfc3339() -> str:
    """Now, formatted once per second (every write stamps it, so it is worth caching)."""
    global _stamp
    second = int(time.time())
    if _stamp[0] != second:
        _stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _stamp[1]
