"""The chart documents every value: a comment above each in values.yaml, a row for each in the
README's values table with the same default, and every documented combination listed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

from tests.deploy import helm

VALUES_FILE = helm.CHART / "values.yaml"
README = helm.CHART / "README.md"
KEY_LINE = re.compile(r"^(\s*)([A-Za-z][\w.-]*):(.*)$")


def leaves(values: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every value's dotted path down to a scalar, a list or an empty map."""
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def readme_rows() -> dict[str, str]:
    """The values table: key -> the default column's text."""
    rows = {}
    for line in README.read_text().splitlines():
        match = re.match(r"^\| `([^`]+)` \| `(.*)` \| .+ \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_every_value_has_a_row_with_its_default_in_the_readme() -> None:
    rows = readme_rows()
    values = yaml.safe_load(VALUES_FILE.read_text())
    for path, default in leaves(values):
        assert path in rows, f"{path} is missing from README.md's values table"
        shown = default if isinstance(default, str) else json.dumps(default)
        assert rows[path] in (shown, f'"{shown}"'), f"{path}: README says {rows[path]}"
    assert set(rows) == {path for path, _ in leaves(values)}, "README documents a stale value"


def test_every_value_is_commented_in_values_yaml() -> None:
    lines = VALUES_FILE.read_text().splitlines()
    # lines that are neither blank nor comments
    content = [(i, line) for i, line in enumerate(lines)
               if line.strip() and not line.lstrip().startswith("#")]
    uncommented = []
    for at, (i, line) in enumerate(content):
        match = KEY_LINE.match(line)
        if not match:
            continue
        following = content[at + 1][1] if at + 1 < len(content) else ""
        indent = len(match.group(1))
        is_map = not match.group(3).strip() and KEY_LINE.match(following) is not None \
            and len(following) - len(following.lstrip()) > indent
        if is_map:
            continue  # its values carry the comments
        if not lines[i - 1].strip().startswith("#"):
            uncommented.append(line.strip())
    assert uncommented == []


def test_every_documented_combination_is_in_the_readme() -> None:
    text = README.read_text()
    for name in helm.combinations():
        if name != "default":
            assert f"`ci/{name}-values.yaml`" in text
