"""Printer columns of custom resources: the JSONPaths CRDs use and kube's cells by type."""

from __future__ import annotations

import re

import pytest

from gateway.apiextensions.printing import cell, columns_for, find, parse_path

OBJ = {
    "metadata": {"name": "web", "creationTimestamp": "2024-01-01T00:00:00Z",
                 "labels": {"app.kubernetes.io/name": "web"}},
    "spec": {"replicas": 3, "ratio": 0.5, "paused": False, "image": "nginx",
             "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"},
                              {"type": "Synced", "status": "False"}]},
}


@pytest.mark.parametrize(("path", "found"), [
    (".spec.replicas", [3]),
    ("{.spec.image}", ["nginx"]),
    (".spec.ports[0].port", [80]),
    (".spec.ports[-1].name", ["https"]),
    (".spec.ports[*].port", [80, 443]),
    (".status.conditions[?(@.type==\"Ready\")].status", ["True"]),
    (".status.conditions[?(@.type!='Ready')].type", ["Synced"]),
    (".metadata.labels['app.kubernetes.io/name']", ["web"]),
    (".spec.missing", []),
    (".spec.ports[5]", []),
])
def test_paths(path: str, found: list) -> None:
    steps = parse_path(path)
    assert steps is not None
    assert find(OBJ, steps) == found


@pytest.mark.parametrize("path", ["spec.replicas", ".spec..replicas", ".spec[", "$.spec"])
def test_paths_not_read(path: str) -> None:
    assert parse_path(path) is None


@pytest.mark.parametrize(("value", "type_", "expected"), [
    (3, "integer", 3), (3.0, "integer", 3), (3.5, "integer", None), (True, "integer", None),
    ("3", "integer", None), (0.5, "number", 0.5), (False, "boolean", False),
    ("x", "boolean", None), (3, "string", "3"), ([1, "a"], "string", '[1,"a"]'),
    ({"b": 1, "a": True}, "string", '{"a":true,"b":1}'), ("not a time", "date", "<unknown>"),
    (3, "date", None),
])
def test_cells(value, type_: str, expected) -> None:
    assert cell(value, type_) == expected


def test_columns() -> None:
    default = columns_for(())
    assert [c.name for c in default] == ["Name", "Age"]
    assert default[1].type == "date"
    assert re.fullmatch(r"\d+y(\d+d)?", default[1].cell(OBJ))  # years ago
    columns = columns_for(({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                           {"name": "Ready", "type": "string", "priority": 1,
                            "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}))
    assert [c.name for c in columns] == ["Name", "Replicas", "Ready"]
    assert [c.cell(OBJ) for c in columns] == ["web", 3, "True"]
    assert columns[2].priority == 1
    assert columns[1].description == \
        "Custom resource definition column (in JSONPath format): .spec.replicas"
