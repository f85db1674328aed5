"""The options of a list or watch, as every layer sees them once the request is read (kube's
metainternalversion.ListOptions); reading them from a request is the endpoints' job."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.apimachinery.fields import FieldSelector
from gateway.apimachinery.gowords import go_quote, parse_uint
from gateway.apimachinery.labels import LabelSelector

EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"


@dataclass
class ListOptions:
    label_selector: LabelSelector = field(default_factory=lambda: LabelSelector(()))
    field_selector: FieldSelector = field(default_factory=lambda: FieldSelector(()))
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None

    @property
    def revision(self) -> int:
        """resourceVersion as a revision; "" and "0" are 0."""
        return int(self.resource_version) if self.resource_version not in ("", "0") else 0



def resource_version_error(rv: str) -> str:
    """What kube's storage says of a resourceVersion that is no revision (its
    APIObjectVersioner, as a field error), or "" for a good one ("" and "0" included)."""
    if rv in ("", "0"):
        return ""
    _, error = parse_uint(rv)
    return f"resourceVersion: Invalid value: {go_quote(rv)}: {error}" if error else ""
