"""Table columns: what ``kubectl get`` shows for each resource (kube's printers).

A resource lists its columns; each computes its cell from the object. Cells that are times are
rendered as kube does it, as a human duration since then ("5m10s", "3d").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Object = dict[str, Any]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    cell: Callable[[Object], Any]
    format: str = ""
    priority: int = 0  # 1: only with -o wide

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def since(value: str | None) -> str:
    """A timestamp as kubectl shows it: how long ago, or <unknown>."""
    moment = parse_time(value)
    if moment is None:
        return "<unknown>"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return human_duration((datetime.now(UTC) - moment).total_seconds())


def _name(obj: Object) -> str:
    return obj.get("metadata", {}).get("name", "")


def _age(obj: Object) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"))


NAME = Column("Name", "string", "Name must be unique within a namespace; it identifies the "
              "object.", _name, format="name")
AGE = Column("Age", "string", "How long ago the object was created (from "
             "metadata.creationTimestamp).", _age)
DEFAULT_COLUMNS = (NAME, AGE)
#: kube's default table convertor (a resource with no printer of its own, e.g. CRDs): the
#: creation time as it is stored, which kubectl prints under CREATED AT.
CREATED_AT = Column("Created At", "date", "CreationTimestamp is a timestamp representing the "
                    "server time when this object was created.",
                    lambda obj: obj.get("metadata", {}).get("creationTimestamp"))
DEFAULT_TABLE_COLUMNS = (NAME, CREATED_AT)


def count(field: str) -> Callable[[Object], int]:
    """A cell that counts the entries of a map or list field."""
    return lambda obj: len(obj.get(field) or {})
