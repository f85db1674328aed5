"""Ready means ready: at the first 200 from /readyz, every start-up task is done.

kube-apiserver holds readiness on its post-start hooks; so does the gateway. The test reads
what each hook promises (aggregated roles complete, bootstrap policy, system namespaces, the
authentication ConfigMap) at the very first moment /readyz answers 200, on a fresh store,
where a hook still running would show.
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import pytest

from gateway.controllers.rbac import SLOW_AGGREGATION_ENV
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

HOOKS = (
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/start-system-namespaces-controller",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/rbac/aggregate-cluster-roles",
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-status-local-available-controller",
    "poststarthook/apiservice-status-remote-available-controller",
    "poststarthook/apiservice-discovery-controller",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/kube-apiserver-autoregistration",
    "poststarthook/start-cluster-authentication-info-controller",
    "poststarthook/start-kube-controllers",
)
CLUSTER_ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"


def _first_ready(gw: GatewayProcess) -> None:
    """Poll /readyz as fast as it answers, and return at its first 200."""

    def ready() -> bool:
        assert gw.proc is not None and gw.proc.poll() is None, gw.log()
        try:
            return gw.request("GET", "/readyz")[0] == 200
        except (OSError, ssl.SSLError):
            return False  # not listening yet

    eventually(ready, interval=0.005, timeout=60, what="/readyz turning 200")


def _get(gw: GatewayProcess, path: str, **headers: str) -> tuple[int, Any]:
    code, body = gw.request("GET", path, headers=headers or None)
    return code, json.loads(body) if body.startswith(b"{") else body.decode()


def _canonical(rules: list[dict[str, Any]]) -> set[str]:
    return {json.dumps(rule, sort_keys=True) for rule in rules}


def _aggregated(role: dict[str, Any], roles: list[dict[str, Any]]) -> set[str]:
    """The rules every role the aggregation rule selects holds (matchLabels only, as the
    bootstrap roles use)."""
    selectors = [s["matchLabels"] for s in role["aggregationRule"]["clusterRoleSelectors"]]
    wanted: set[str] = set()
    for other in roles:
        labels = other["metadata"].get("labels") or {}
        if other["metadata"]["name"] != role["metadata"]["name"] and any(
                all(labels.get(k) == v for k, v in s.items()) for s in selectors):
            wanted |= _canonical(other.get("rules") or [])
    return wanted


@pytest.mark.parametrize("start", range(3))
def test_at_the_first_ready_every_start_up_task_is_done(workdir, start, monkeypatch) -> None:
    # aggregation slowed down: ready must wait for it, not for the hooks after it to give
    # it time (a hook moved to the background would pass otherwise)
    monkeypatch.setenv(SLOW_AGGREGATION_ENV, "2")
    gw = GatewayProcess(workdir).start(wait=None)
    try:
        _first_ready(gw)
        code, roles = _get(gw, CLUSTER_ROLES)
        assert code == 200, roles
        items = roles["items"]
        by_name = {r["metadata"]["name"]: r for r in items}
        for name in ("admin", "edit", "view"):
            rules = _canonical(by_name[name].get("rules") or [])
            assert rules, f"{name} has no rules at the first ready"
            assert rules == _aggregated(by_name[name], items), name
        # nested aggregation is complete: admin holds edit's rules, edit holds view's
        assert _canonical(by_name["edit"]["rules"]) <= _canonical(by_name["admin"]["rules"])
        assert _canonical(by_name["view"]["rules"]) <= _canonical(by_name["edit"]["rules"])
        for name in ("cluster-admin", "system:discovery", "system:basic-user"):
            assert name in by_name, name
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            assert _get(gw, f"/api/v1/namespaces/{ns}")[0] == 200, ns
        code, cm = _get(gw, "/api/v1/namespaces/kube-system/configmaps/"
                            "extension-apiserver-authentication")
        assert code == 200 and "client-ca-file" in cm["data"], cm

        # a user bound to edit is served at once
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "alice-edit"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "edit"},
                   "subjects": [{"kind": "User", "name": "alice",
                                 "apiGroup": "rbac.authorization.k8s.io"}]}
        code, made = gw.request("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"
                                "default/rolebindings", binding)
        assert code == 201, made
        code, listed = _get(gw, "/api/v1/namespaces/default/configmaps",
                            **{"Impersonate-User": "alice"})
        assert code == 200 and listed["kind"] == "ConfigMapList", listed
    finally:
        gw.stop()


def test_each_hook_is_a_named_check(gateway) -> None:
    code, listing = _get(gateway, "/readyz?verbose")
    assert code == 200
    lines = listing.splitlines()
    for hook in (*HOOKS, "autoregister-completion"):
        assert f"[+]{hook} ok" in lines, listing
        assert _get(gateway, f"/readyz/{hook}") == (200, "ok"), hook
        for endpoint in ("healthz", "livez"):
            assert _get(gateway, f"/{endpoint}/{hook}") == (200, "ok"), (endpoint, hook)
    assert lines[-1] == "readyz check passed"
