"""metav1.Time and metav1.MicroTime as kube-apiserver reads and writes them.

kube decodes a Time with Go's RFC 3339 parser (any UTC offset, any fraction of a second) and
writes it back in UTC to the second: ``2024-05-06T07:08:09Z``. A MicroTime must carry exactly
six fractional digits and is written back in UTC with six: ``2024-05-06T07:08:09.123456Z``.
A string that is not such a time cannot be decoded: the request is a 400.
"""

from __future__ import annotations

import enum
import re
from datetime import UTC, datetime, timedelta, timezone

from gateway.schema.dsl import META


class Precision(enum.Enum):
    SECONDS = "2006-01-02T15:04:05Z07:00"
    MICROSECONDS = "2006-01-02T15:04:05.000000Z07:00"


KINDS = {f"{META}.Time": Precision.SECONDS, f"{META}.MicroTime": Precision.MICROSECONDS}

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})\Z")


def _offset(zone: str) -> timezone:
    if zone == "Z":
        return UTC
    sign = -1 if zone[0] == "-" else 1
    return timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))


def parse(text: str, precision: Precision) -> datetime:
    """The moment ``text`` names; ValueError worded as Go's time.Parse words it."""
    match = _RFC3339.match(text)
    fraction = match.group(7) if match else None
    if match is None or (precision is Precision.MICROSECONDS and
                         (fraction is None or len(fraction) != 6)):
        raise ValueError(f'parsing time "{text}" as "{precision.value}": cannot parse '
                         f'"{text}" as "{precision.value}"')
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        return datetime(year, month, day, hour, minute, second, micros,
                        tzinfo=_offset(match.group(8)))
    except ValueError as err:
        raise ValueError(f'parsing time "{text}": {err}') from None


def normalized(text: str, precision: Precision) -> str:
    moment = parse(text, precision).astimezone(UTC)
    if precision is Precision.SECONDS:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
