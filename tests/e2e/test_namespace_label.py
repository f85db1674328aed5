"""Every namespace carries ``kubernetes.io/metadata.name`` = its name (kube since 1.22), so a
webhook's ``namespaceSelector`` on it matches: set on create (a generated name too), kept
through updates that drop or change it, present on the system namespaces."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.apis.core.namespaces import NAMESPACES
from gateway.storage.sqlite import SQLiteStorage
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow
LABEL = "kubernetes.io/metadata.name"


def labels(gateway: GatewayProcess, name: str) -> dict[str, str]:
    code, body = gateway.request("GET", f"/api/v1/namespaces/{name}")
    assert code == 200, body
    return json.loads(body)["metadata"].get("labels", {})


def test_system_namespaces_carry_their_name(gateway: GatewayProcess) -> None:
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert labels(gateway, name).get(LABEL) == name


def test_the_label_is_set_and_cannot_be_removed_or_changed(gateway: GatewayProcess) -> None:
    name = f"lbl-{uuid.uuid4().hex[:8]}"
    code, body = gateway.request("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {LABEL: "someone-else", "team": "a"}}})
    assert code == 201, body
    assert json.loads(body)["metadata"]["labels"] == {LABEL: name, "team": "a"}
    gateway.kubectl("label", "namespace", name, f"{LABEL}-")
    assert labels(gateway, name) == {LABEL: name, "team": "a"}
    result = gateway.kubectl("label", "--overwrite", "namespace", name, f"{LABEL}=other")
    assert result.returncode == 0
    assert labels(gateway, name)[LABEL] == name
    selected = json.loads(gateway.kubectl("get", "namespaces", "-l", f"{LABEL} in ({name})",
                                          "-o", "json").stdout)
    assert [n["metadata"]["name"] for n in selected["items"]] == [name]


def test_a_generated_name_is_labelled_with_itself(gateway: GatewayProcess) -> None:
    code, body = gateway.request("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": "gen-"}})
    made = json.loads(body)
    assert code == 201, body
    assert made["metadata"]["labels"] == {LABEL: made["metadata"]["name"]}


def _drop_the_label(state_db: Path, name: str) -> None:
    """Write the namespace back without the label, as a store written before kube 1.22 (or
    by another tool) holds it: through the gateway's own storage layer, the gateway
    stopped."""

    async def drop() -> None:
        storage = SQLiteStorage(state_db)
        await storage.start()
        try:
            async def without(obj: dict[str, Any] | None) -> dict[str, Any]:
                assert obj is not None
                obj["metadata"]["labels"] = {k: v for k, v in obj["metadata"]["labels"].items()
                                             if k != LABEL}
                return obj

            stored = await storage.guaranteed_update(NAMESPACES.key("", name), without)
            assert LABEL not in stored["metadata"]["labels"]
        finally:
            await storage.close()

    asyncio.run(drop())


def test_a_namespace_stored_without_the_label_gets_it_on_read(workdir: Path) -> None:
    """kube defaults the label on every decode, so a namespace stored without it (an older
    store) carries it on GET, list (a label selector on it included) and watch."""
    with GatewayProcess(workdir) as gw:
        code, body = gw.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "legacy", "labels": {"team": "a"}}})
        assert code == 201, body
    _drop_the_label(workdir / "data" / "state.db", "legacy")
    with GatewayProcess(workdir) as gw:
        assert labels(gw, "legacy") == {LABEL: "legacy", "team": "a"}
        code, body = gw.request("GET", "/api/v1/namespaces")
        listed = {n["metadata"]["name"]: n["metadata"]["labels"]
                  for n in json.loads(body)["items"]}
        assert listed["legacy"] == {LABEL: "legacy", "team": "a"}
        selected = json.loads(gw.kubectl("get", "namespaces", "-l", f"{LABEL}=legacy",
                                         "-o", "json").stdout)
        assert [n["metadata"]["name"] for n in selected["items"]] == ["legacy"]
        stream = gw.open("GET", "/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3Dlegacy"
                                "&timeoutSeconds=5", timeout=10)
        try:
            event = json.loads(stream.readline())
        finally:
            stream.close()
        assert event["type"] == "ADDED"
        assert event["object"]["metadata"]["labels"] == {LABEL: "legacy", "team": "a"}
