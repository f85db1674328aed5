"""Table columns of a custom resource (kube's CRD table convertor): NAME, then the version's
additionalPrinterColumns (or AGE when it has none), each cell found by its JSONPath.

kube evaluates a column's ``jsonPath`` with its JSONPath package (the path wrapped in ``{}``)
and takes the first result. The paths CRDs use are a small part of that language, which is
what this module reads: ``.a.b``, ``['a.b']``, ``[0]``, ``[-1]``, ``[*]``, ``..name`` is not
supported (kube's CRD validation refuses it too), and filters ``[?(@.type=="Ready")]`` with
``==`` and ``!=`` on a field. A path this module cannot read gives empty cells.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.registry.tables import NAME, Column, since

#: One step of a path: .name, ['quoted'], [index], [*], [?(@.field op "value")].
_STEP = re.compile(
    r"""\.(?P<name>[A-Za-z0-9_$-]+)"""
    r"""|\[['"](?P<quoted>[^'"]*)['"]\]"""
    r"""|\[(?P<index>-?\d+)\]"""
    r"""|\[(?P<all>\*)\]"""
    r"""|\[\?\(@\.(?P<field>[A-Za-z0-9_.-]+)\s*(?P<op>==|!=)\s*(?P<value>"[^"]*"|'[^']*'|[^)\s]+)"""
    r"""\)\]""")


def parse_path(path: str) -> list[tuple[str, Any]] | None:
    """The steps of a column's JSONPath, or None when it is not one this module reads."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    steps: list[tuple[str, Any]] = []
    at = 0
    while at < len(path):
        match = _STEP.match(path, at)
        if match is None:
            return None
        if match["name"] is not None or match["quoted"] is not None:
            steps.append(("key", match["name"] if match["name"] is not None else match["quoted"]))
        elif match["index"] is not None:
            steps.append(("index", int(match["index"])))
        elif match["all"]:
            steps.append(("all", None))
        else:
            value = match["value"]
            if value[:1] in "\"'":
                value = value[1:-1]
            steps.append(("filter", (match["field"].split("."), match["op"], value)))
        at = match.end()
    return steps


def find(obj: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    """Every value the steps reach, in order."""
    current = [obj]
    for kind, arg in steps:
        found: list[Any] = []
        for value in current:
            found += _step(value, kind, arg)
        current = found
    return current


def _step(value: Any, kind: str, arg: Any) -> list[Any]:
    if kind == "key":
        return [value[arg]] if isinstance(value, dict) and arg in value else []
    if not isinstance(value, list):
        return list(value.values()) if kind == "all" and isinstance(value, dict) else []
    if kind == "index":
        return [value[arg]] if -len(value) <= arg < len(value) else []
    if kind == "all":
        return list(value)
    keys, op, wanted = arg
    return [item for item in value if (_text(_dig(item, keys)) == wanted) == (op == "==")]


def _dig(value: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _text(value: Any) -> str | None:
    """A value as the filter compares it and a string column prints it (kube's JSONPath
    printing: strings as they are, lists and maps as compact JSON with sorted keys)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return str(value)


def cell(value: Any, type_: str) -> Any:
    """kube's cell for a JSON value of a column of ``type_``."""
    if type_ == "string":
        return _text(value)
    if type_ == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
        return None
    if type_ == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) \
            else None
    if type_ == "boolean":
        return value if isinstance(value, bool) else None
    if type_ == "date":  # kube turns a timestamp into how long ago it was
        return since(value) if isinstance(value, str) else None
    return value


def _column(definition: dict[str, Any]) -> Column:
    steps = parse_path(definition.get("jsonPath", ""))
    type_ = definition.get("type", "string")

    def value(obj: dict[str, Any]) -> Any:
        if steps is None:
            return None
        found = find(obj, steps)
        return cell(found[0], type_) if found else None

    description = definition.get("description") or \
        f"Custom resource definition column (in JSONPath format): {definition.get('jsonPath')}"
    return Column(definition.get("name", ""), type_, description, value,
                  definition.get("format", ""), int(definition.get("priority", 0) or 0))


#: kube's default when a version defines no printer columns: the creation time, as a date
#: (kubectl shows how long ago).
DEFAULT_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
               "description": "CreationTimestamp is a timestamp representing the server time "
                              "when this object was created."}


def columns_for(printer_columns: tuple[dict[str, Any], ...]) -> tuple[Column, ...]:
    """NAME, then the version's printer columns, or AGE when it defines none."""
    return (NAME, *(_column(c) for c in (printer_columns or (DEFAULT_AGE,))))
