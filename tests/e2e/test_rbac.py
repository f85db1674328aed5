"""RBAC as kube-apiserver enforces it: a matrix of allowed and denied requests per verb,
resource, subresource, resourceName, namespace and non-resource URL; aggregated ClusterRoles;
escalation prevention; the bootstrap policy present and restored."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import API, configmap, expect_status
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.identity import https
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = ("alice-token,alice,uid-alice,devs\nbob-token,bob,uid-bob\n"
          "erin-token,erin,uid-erin\nfrank-token,frank,uid-frank\n")

POLICY = """
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: Namespace
metadata: {name: sandbox}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader, namespace: team}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [secrets], resourceNames: [allowed], verbs: [get]}
- {apiGroups: [""], resources: [serviceaccounts/token], verbs: [create]}
- {apiGroups: [coordination.k8s.io], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-cm-reader, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: devs}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: everything}
rules:
- {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-sandbox, namespace: sandbox}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: everything}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-reader}
rules:
- {nonResourceURLs: [/metrics], verbs: [get]}
- {apiGroups: [""], resources: [namespaces/status], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: v1
kind: Secret
metadata: {name: allowed, namespace: team}
stringData: {k: v}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: team}
stringData: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: present, namespace: team}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: team}
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with token_gateway(tmp_path_factory.mktemp("rbac"), TOKENS) as proc:
        proc.kubectl("apply", "-f", "-", input=POLICY)
        yield proc


def _forbidden(answer: tuple[int, Any, dict[str, str]], message: str) -> None:
    """``answer`` (from ``https``) is kube's 403 Status with exactly ``message``."""
    expect_status(answer[:2], 403, "Forbidden", message=message)


LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}
CM = configmap("made")
TOKEN_REQUEST = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}



def _alice_cannot(what: str, where: str = "at the cluster scope") -> str:
    return f'User "alice" cannot {what} {where}'


TEAM, DEFAULT = 'in the namespace "team"', 'in the namespace "default"'

# (method, path, body, expected status, and for a refusal kube's message) for alice: group
# devs holds cm-reader in "team", alice holds "everything" in "sandbox" and the
# metrics-reader ClusterRole.
MATRIX = [
    ("GET", "/api/v1/namespaces/team/configmaps", None, 200, None),
    ("GET", "/api/v1/namespaces/team/configmaps/present", None, 200, None),
    ("GET", "/api/v1/namespaces/team/configmaps/absent", None, 404,
     'configmaps "absent" not found'),
    ("POST", "/api/v1/namespaces/team/configmaps", CM, 403, "configmaps is forbidden: "
     + _alice_cannot('create resource "configmaps" in API group ""', TEAM)),
    ("DELETE", "/api/v1/namespaces/team/configmaps/present", None, 403,
     'configmaps "present" is forbidden: '
     + _alice_cannot('delete resource "configmaps" in API group ""', TEAM)),
    ("GET", "/api/v1/namespaces/default/configmaps", None, 403, "configmaps is forbidden: "
     + _alice_cannot('list resource "configmaps" in API group ""', DEFAULT)),
    ("GET", "/api/v1/configmaps", None, 403, "configmaps is forbidden: "
     + _alice_cannot('list resource "configmaps" in API group ""')),
    ("GET", "/api/v1/namespaces/team/secrets/allowed", None, 200, None),
    ("GET", "/api/v1/namespaces/team/secrets/other", None, 403, 'secrets "other" is forbidden: '
     + _alice_cannot('get resource "secrets" in API group ""', TEAM)),
    ("GET", "/api/v1/namespaces/team/secrets", None, 403, "secrets is forbidden: "
     + _alice_cannot('list resource "secrets" in API group ""', TEAM)),
    ("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token", TOKEN_REQUEST, 201, None),
    ("GET", "/api/v1/namespaces/team/serviceaccounts/robot", None, 403,
     'serviceaccounts "robot" is forbidden: '
     + _alice_cannot('get resource "serviceaccounts" in API group ""', TEAM)),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/team/leases", LEASE, 201, None),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases", None, 403,
     "leases.coordination.k8s.io is forbidden: "
     + _alice_cannot('list resource "leases" in API group "coordination.k8s.io"', DEFAULT)),
    ("POST", "/api/v1/namespaces/sandbox/configmaps", CM, 201, None),
    ("DELETE", "/api/v1/namespaces/sandbox/configmaps/made", None, 200, None),
    ("GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/sandbox/roles", None, 200, None),
    ("GET", "/api/v1/namespaces", None, 403, "namespaces is forbidden: "
     + _alice_cannot('list resource "namespaces" in API group ""')),
    ("GET", "/api/v1/namespaces/team", None, 403, 'namespaces "team" is forbidden: '
     + _alice_cannot('get resource "namespaces" in API group ""', TEAM)),
    ("GET", "/api/v1/namespaces/team/status", None, 200, None),
    ("GET", "/metrics", None, 200, None),
    ("GET", "/api", None, 200, None),
    ("GET", "/apis/coordination.k8s.io/v1", None, 200, None),
    ("GET", "/openapi/v2", None, 200, None),
    ("GET", "/debug/pprof/", None, 403,
     "forbidden: " + _alice_cannot('get path "/debug/pprof/"', "").rstrip()),
]
REASONS = {403: "Forbidden", 404: "NotFound"}


@pytest.mark.parametrize(("method", "path", "body", "expected", "message"), MATRIX,
                         ids=[f"{m} {p}" for m, p, *_ in MATRIX])
def test_matrix_for_alice(gw: GatewayProcess, method: str, path: str, body: Any,
                          expected: int, message: str | None) -> None:
    if (method, expected) == ("DELETE", 200):  # its own object: xdist may split the matrix
        made, _ = gw.request("POST", path.rsplit("/", 1)[0], CM)
        assert made in (201, 409), made
    code, answer, _ = https(gw, method, path, token="alice-token", body=body)
    if message is None:
        assert code == expected, answer
    else:
        expect_status((code, answer), expected, REASONS[expected], message=message)


def test_someone_without_bindings_gets_only_discovery(gw: GatewayProcess) -> None:
    _forbidden(https(gw, "GET", "/metrics", token="bob-token"),
               'forbidden: User "bob" cannot get path "/metrics"')
    _forbidden(https(gw, "GET", "/api/v1/namespaces/team/configmaps", token="bob-token"),
               'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API '
               'group "" in the namespace "team"')
    code, body, _ = https(gw, "GET", "/apis", token="bob-token")
    assert (code, body["kind"]) == (200, "APIGroupList"), body


@pytest.mark.parametrize(("path", "message"), [
    ("/api/v1/namespaces/team/configmaps/x?dummy=1",
     'configmaps "x" is forbidden: User "bob" cannot get resource "configmaps" in API group ""'
     ' in the namespace "team"'),
    ("/apis/coordination.k8s.io/v1/leases",
     'leases.coordination.k8s.io is forbidden: User "bob" cannot list resource "leases" in API'
     ' group "coordination.k8s.io" at the cluster scope'),
    ("/api/v1/namespaces/team/status",
     'namespaces "team" is forbidden: User "bob" cannot get resource "namespaces/status" in API'
     ' group "" in the namespace "team"'),
    ("/metrics", 'forbidden: User "bob" cannot get path "/metrics"'),
])
def test_denials_carry_kubes_message(gw: GatewayProcess, path: str, message: str) -> None:
    _forbidden(https(gw, "GET", path, token="bob-token"), message)


def test_watch_needs_the_watch_verb(gw: GatewayProcess) -> None:
    gw.kubectl("create", "role", "list-only", "-n", "team", "--verb", "list",
               "--resource", "endpoints")
    gw.kubectl("create", "rolebinding", "bob-list-only", "-n", "team", "--role", "list-only",
               "--user", "bob")
    assert https(gw, "GET", "/api/v1/namespaces/team/endpoints", token="bob-token")[0] == 200
    _forbidden(https(gw, "GET", "/api/v1/namespaces/team/endpoints?watch=1", token="bob-token"),
               'endpoints is forbidden: User "bob" cannot watch resource "endpoints" in API '
               'group "" in the namespace "team"')


# -- aggregation ---------------------------------------------------------------------------


def _rules(gw: GatewayProcess, name: str) -> list[dict[str, Any]]:
    role = json.loads(gw.kubectl("get", "clusterrole", name, "-o", "json").stdout)
    return role.get("rules") or []


def test_aggregated_cluster_role_follows_its_selector(gw: GatewayProcess) -> None:
    gw.kubectl("apply", "-f", "-", input="""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: monitoring}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {example.com/aggregate-to-monitoring: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: erin-monitoring}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: monitoring}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
""")
    path = "/apis/coordination.k8s.io/v1/leases"
    refusal = ('leases.coordination.k8s.io is forbidden: User "erin" cannot list resource '
               '"leases" in API group "coordination.k8s.io" at the cluster scope')
    _forbidden(https(gw, "GET", path, token="erin-token"), refusal)
    gw.kubectl("create", "clusterrole", "lease-lister", "--verb", "list",
               "--resource", "leases.coordination.k8s.io")
    gw.kubectl("label", "clusterrole", "lease-lister", "example.com/aggregate-to-monitoring=true")
    eventually(lambda: https(gw, "GET", path, token="erin-token")[0] == 200,
               what="erin may list leases")
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["list"]} in _rules(gw, "monitoring")
    gw.kubectl("label", "clusterrole", "lease-lister", "example.com/aggregate-to-monitoring-")
    eventually(lambda: https(gw, "GET", path, token="erin-token")[0] != 200,
               what="erin may no longer list leases")
    _forbidden(https(gw, "GET", path, token="erin-token"), refusal)


def test_labelled_role_aggregates_into_view(gw: GatewayProcess) -> None:
    rule = {"apiGroups": ["widgets.example.com"], "resources": ["widgets"],
            "verbs": ["get", "list", "watch"]}
    gw.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {
            "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [rule]}))
    for aggregate in ("view", "edit", "admin"):
        eventually(lambda a=aggregate: rule in _rules(gw, a), what=f"the rule in {aggregate}")


# -- escalation ----------------------------------------------------------------------------


def _role(name: str, resource: str, verbs: list[str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name}, "rules": [
                {"apiGroups": [""], "resources": [resource], "verbs": verbs}]}


def _binding(name: str, kind: str, role: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "frank"}]}


ROLES = "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles"
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings"


FRANK_EDITS_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: rbac-editor, namespace: team}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles, rolebindings],
   verbs: [create, update, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-getter, namespace: team}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: frank-rbac-editor, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: rbac-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: frank-cm-getter, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-getter}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}]
"""


def _frank_edits_rbac(gw: GatewayProcess) -> None:
    """frank may write roles and bindings in "team", and get its configmaps (idempotent: each
    test that needs it applies it)."""
    gw.kubectl("apply", "-f", "-", input=FRANK_EDITS_RBAC)


def test_escalation_is_refused_unless_held_or_escalate(gw: GatewayProcess) -> None:
    _frank_edits_rbac(gw)
    code, body, _ = https(gw, "POST", ROLES, token="frank-token",
                          body=_role("held", "configmaps", ["get"]))
    assert code == 201, body
    code, body, _ = https(gw, "POST", ROLES, token="frank-token",
                          body=_role("more", "secrets", ["get"]))
    expect_status((code, body), 403, "Forbidden", message=(
        'roles.rbac.authorization.k8s.io "more" is forbidden: user "frank" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        'currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}'))
    expect_status(API(gw).get(f"{ROLES}/more"), 404, "NotFound",
                  message='roles.rbac.authorization.k8s.io "more" not found')
    gw.kubectl("create", "role", "escalator", "-n", "team", "--verb", "escalate",
               "--resource", "roles.rbac.authorization.k8s.io")
    gw.kubectl("create", "rolebinding", "frank-escalator", "-n", "team", "--role", "escalator",
               "--user", "frank")
    code, body, _ = https(gw, "POST", ROLES, token="frank-token",
                          body=_role("more", "secrets", ["get"]))
    assert code == 201, body


def _missing_rules(answer: tuple[int, Any], binding: str) -> list[str]:
    """The rules kube's escalation refusal lists, one (group, resource, verb) a line, sorted."""
    body = expect_status(answer, 403, "Forbidden")
    head, *missing = body["message"].split("\n")
    assert head == (f'rolebindings.rbac.authorization.k8s.io "{binding}" is forbidden: user '
                    '"frank" (groups=["system:authenticated"]) is attempting to grant RBAC '
                    'permissions not currently held:'), head
    assert missing == sorted(missing), missing
    line = re.compile(r'\{APIGroups:\["[^"]*"\], Resources:\["[^"]+"\], Verbs:\["[a-z]+"\]\}')
    assert all(line.fullmatch(rule) for rule in missing), missing
    return missing


def test_binding_to_a_role_not_held_needs_bind(gw: GatewayProcess) -> None:
    _frank_edits_rbac(gw)
    code, body, _ = https(gw, "POST", BINDINGS, token="frank-token",
                          body=_binding("frank-view", "ClusterRole", "view"))
    missing = _missing_rules((code, body), "frank-view")
    assert '{APIGroups:[""], Resources:["configmaps"], Verbs:["list"]}' in missing
    assert '{APIGroups:[""], Resources:["configmaps"], Verbs:["get"]}' not in missing, \
        "frank holds that one"
    gw.kubectl("create", "role", "view-binder", "-n", "team", "--verb", "bind",
               "--resource", "clusterroles.rbac.authorization.k8s.io", "--resource-name", "view")
    gw.kubectl("create", "rolebinding", "frank-view-binder", "-n", "team", "--role",
               "view-binder", "--user", "frank")
    code, body, _ = https(gw, "POST", BINDINGS, token="frank-token",
                          body=_binding("frank-view", "ClusterRole", "view"))
    assert code == 201, body
    code, body, _ = https(gw, "POST", BINDINGS, token="frank-token",
                          body=_binding("frank-edit", "ClusterRole", "edit"))
    # bind on view is not bind on edit; what view grants is held now, through the binding
    missing = _missing_rules((code, body), "frank-edit")
    assert '{APIGroups:[""], Resources:["configmaps"], Verbs:["create"]}' in missing
    assert '{APIGroups:[""], Resources:["configmaps"], Verbs:["list"]}' not in missing


# -- bootstrap policy ------------------------------------------------------------------------


BOOTSTRAP_CLUSTER_ROLES = ("cluster-admin", "admin", "edit", "view", "system:discovery",
                           "system:basic-user", "system:public-info-viewer",
                           "system:auth-delegator")
BOOTSTRAP_BINDINGS = ("cluster-admin", "system:discovery", "system:basic-user",
                      "system:public-info-viewer")


def test_bootstrap_policy_is_present(gw: GatewayProcess) -> None:
    roles = gw.kubectl("get", "clusterroles", "-o", "name").stdout.split()
    for name in BOOTSTRAP_CLUSTER_ROLES:
        assert f"clusterrole.rbac.authorization.k8s.io/{name}" in roles
    bindings = gw.kubectl("get", "clusterrolebindings", "-o", "name").stdout.split()
    for name in BOOTSTRAP_BINDINGS:
        assert f"clusterrolebinding.rbac.authorization.k8s.io/{name}" in bindings
    reader = json.loads(gw.kubectl("get", "role", "extension-apiserver-authentication-reader",
                                   "-n", "kube-system", "-o", "json").stdout)
    assert reader["rules"][0]["resourceNames"] == ["extension-apiserver-authentication"]
    view = json.loads(gw.kubectl("get", "clusterrole", "view", "-o", "json").stdout)
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert view["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] \
        == "true"


def test_deleted_bootstrap_objects_come_back(gw: GatewayProcess) -> None:
    gw.kubectl("delete", "clusterrole", "system:basic-user")
    gw.kubectl("delete", "clusterrolebinding", "system:public-info-viewer")
    gw.kubectl("delete", "role", "extension-apiserver-authentication-reader", "-n",
               "kube-system")

    def restored() -> bool:
        return all(gw.kubectl("get", *what, check=False).returncode == 0 for what in (
            ("clusterrole", "system:basic-user"),
            ("clusterrolebinding", "system:public-info-viewer"),
            ("role", "extension-apiserver-authentication-reader", "-n", "kube-system")))

    eventually(restored, what="the bootstrap objects restored")
    code, _, _ = https(gw, "GET", "/version")
    assert code == 200, "anonymous may read /version again"


def test_user_objects_and_user_changes_are_kept(gw: GatewayProcess) -> None:
    gw.kubectl("label", "clusterrole", "edit", "team.example.com/owner=platform")
    gw.kubectl("create", "clusterrole", "mine", "--verb", "get", "--resource", "endpoints")
    gw.kubectl("delete", "clusterrole", "system:basic-user")
    eventually(lambda: gw.kubectl("get", "clusterrole", "system:basic-user",
                                  check=False).returncode == 0,
               what="system:basic-user restored")
    edit = json.loads(gw.kubectl("get", "clusterrole", "edit", "-o", "json").stdout)
    assert edit["metadata"]["labels"]["team.example.com/owner"] == "platform"
    assert gw.kubectl("get", "clusterrole", "mine", check=False).returncode == 0
