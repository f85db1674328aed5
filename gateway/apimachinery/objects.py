"""Objects as the JSON dictionaries every layer passes around."""

from __future__ import annotations

from typing import Any


def drop_nulls(fields: dict[str, Any]) -> None:
    """A field sent as null is a field not sent, as when kube decodes it into its Go type."""
    for key in [k for k, v in fields.items() if v is None]:
        del fields[key]
