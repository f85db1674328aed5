"""The simple JSON paths CRDs name fields by (``.spec.replicas``): read and write."""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]


def _steps(path: str) -> list[str]:
    """A simple JSON path (``.spec.replicas``) as its keys."""
    return [step for step in path.split(".") if step]


def read_path(obj: Any, path: str) -> Any:
    for key in _steps(path):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def write_path(obj: Object, path: str, value: Any) -> None:
    keys = _steps(path)
    for key in keys[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            child = obj[key] = {}
        obj = child
    obj[keys[-1]] = value
