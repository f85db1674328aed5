"""A terminating namespace's conditions as tests read them: kube's five condition types with
what each says while nothing is wrong, and waiting for a namespace to report an exact set."""

from __future__ import annotations

import json
from typing import Any

from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

#: (status, reason, message) of each condition type kube's namespace controller writes, in its
#: order, while nothing holds the namespace up.
OK = {
    "NamespaceDeletionDiscoveryFailure": (
        "False", "ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": (
        "False", "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("False", "ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": (
        "False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


def namespace(gw: GatewayProcess, name: str) -> dict[str, Any] | None:
    """The namespace as kubectl shows it, None once it is gone."""
    result = gw.kubectl("get", "ns", name, "-o", "json", check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    return json.loads(result.stdout)


def conditions(ns: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"])
            for c in (ns.get("status") or {}).get("conditions") or []}


def wait_for_conditions(gw: GatewayProcess, name: str,
                        expected: dict[str, tuple[str, str, str]],
                        timeout: float = 30) -> dict[str, Any]:
    """The namespace once its conditions are exactly ``expected`` (it must not go first)."""

    def reported() -> dict[str, Any]:
        ns = namespace(gw, name)
        assert ns is not None, "the namespace went"
        assert conditions(ns) == expected, conditions(ns)
        return ns

    return eventually(reported, timeout=timeout, what=f"namespace {name}'s conditions")
