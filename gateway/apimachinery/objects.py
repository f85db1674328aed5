"""Objects as the JSON dictionaries every layer passes around."""

from __future__ import annotations

import copy
from typing import Any


def drop_nulls(fields: dict[str, Any]) -> None:
    """A field sent as null is a field not sent, as when kube decodes it into its Go type."""
    for key in [k for k, v in fields.items() if v is None]:
        del fields[key]


def copy_object(value: Any) -> Any:
    """A deep copy of a JSON value (dicts and lists copied, everything else shared: strings,
    numbers, booleans and None are immutable). Several times faster than copy.deepcopy, which
    a write pays for on every object it changes."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _SCALARS else copy_object(item)
                for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _SCALARS else copy_object(item) for item in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)  # anything else (a dict subclass, a set): the general copy


_SCALARS = frozenset({str, int, float, bool, type(None)})
