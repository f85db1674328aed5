"""Every namespace carries ``kubernetes.io/metadata.name`` = its name (kube since 1.22), so a
webhook's ``namespaceSelector`` on it matches: set on create (a generated name too), kept
through updates that drop or change it, present on the system namespaces."""

from __future__ import annotations

import json
import uuid

import pytest

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
