"""docs/api.md's table of served groups names every group version and resource the gateway
serves (read from its discovery), so the page cannot fall behind the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow
API_DOC = Path(__file__).parents[2] / "docs" / "api.md"


def documented() -> dict[str, str]:
    """group/version -> the text of its row in the "Served groups" table."""
    section = API_DOC.read_text().split("## Served groups", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)`(?: \(core\))? \| (.*) \|$", line)
        if match:
            rows[match[1]] = match[2]
    return rows


def served(gateway: GatewayProcess) -> dict[str, list[str]]:
    """group/version -> its resources (subresources as resource/sub), from discovery."""
    code, body = gateway.request("GET", "/apis")
    assert code == 200
    versions = ["v1"] + [v["groupVersion"] for g in json.loads(body)["groups"]
                         for v in g["versions"]]
    out = {}
    for gv in versions:
        code, body = gateway.request("GET", "/api/v1" if gv == "v1" else f"/apis/{gv}")
        assert code == 200, gv
        out[gv] = [r["name"] for r in json.loads(body)["resources"]]
    return out


def test_every_served_group_version_and_resource_is_documented(gateway: GatewayProcess) -> None:
    rows = documented()
    for gv, resources in served(gateway).items():
        assert gv in rows, f"{gv} is served but not in docs/api.md's table"
        for name in resources:
            resource, _, sub = name.partition("/")
            assert re.search(rf"\b{re.escape(resource)}\b", rows[gv]), (gv, resource)
            if sub:
                assert f"`{sub}`" in rows[gv], (gv, name)
