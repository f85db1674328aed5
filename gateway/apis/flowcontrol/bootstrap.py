"""The API Priority and Fairness configuration every server starts with, as kube 1.32 ships it
(k8s.io/apiserver pkg/apis/flowcontrol/bootstrap):

- mandatory: the ``exempt`` and ``catch-all`` FlowSchemas and PriorityLevelConfigurations,
  without which classification could not work; their specs are fixed (validation refuses other
  values, the config producer puts them back);
- suggested: the objects that give system components, leader election, controllers, service
  accounts and everyone else levels of their own; an operator may change one after setting its
  ``apf.kubernetes.io/autoupdate-spec`` annotation to ``"false"``.

Each object carries the annotation ``apf.kubernetes.io/autoupdate-spec: "true"``.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]

GROUP = "flowcontrol.apiserver.k8s.io"
AUTOUPDATE = "apf.kubernetes.io/autoupdate-spec"
EXEMPT = "exempt"
CATCH_ALL = "catch-all"

_ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
                  "namespaces": ["*"]}
_ALL_NON_RESOURCES = {"verbs": ["*"], "nonResourceURLs": ["*"]}


def _groups(*names: str) -> list[dict]:
    return [{"kind": "Group", "group": {"name": name}} for name in names]


def _users(*names: str) -> list[dict]:
    return [{"kind": "User", "user": {"name": name}} for name in names]


def _kube_system_accounts(*names: str) -> list[dict]:
    return [{"kind": "ServiceAccount", "serviceAccount": {"name": name,
                                                          "namespace": "kube-system"}}
            for name in names]


def _everything(subjects: list[dict]) -> list[dict]:
    return [{"subjects": subjects, "resourceRules": [dict(_ALL_RESOURCES)],
             "nonResourceRules": [dict(_ALL_NON_RESOURCES)]}]


def _resource_rule(verbs: list[str], groups: list[str], resources: list[str],
                   cluster_scope: bool = False) -> dict:
    rule: dict = {"verbs": verbs, "apiGroups": groups, "resources": resources,
                  "namespaces": ["*"]}
    if cluster_scope:
        rule["clusterScope"] = True
    return rule


def _object(kind: str, name: str, spec: dict) -> Object:
    return {"apiVersion": f"{GROUP}/v1", "kind": kind,
            "metadata": {"name": name, "annotations": {AUTOUPDATE: "true"}}, "spec": spec}


def _limited(shares: int, lendable: int, queuing: tuple[int, int, int] | None) -> dict:
    """A Limited level: ``queuing`` is (queues, handSize, queueLengthLimit), None for Reject."""
    response: dict = {"type": "Reject"}
    if queuing is not None:
        queues, hand, length = queuing
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand,
                                                  "queueLengthLimit": length}}
    return {"type": "Limited", "limited": {"nominalConcurrencyShares": shares,
                                           "lendablePercent": lendable,
                                           "limitResponse": response}}


def _level(name: str, spec: dict) -> Object:
    return _object("PriorityLevelConfiguration", name, spec)


def _schema(name: str, level: str, precedence: int, distinguisher: str | None,
            rules: list[dict]) -> Object:
    spec: dict = {"priorityLevelConfiguration": {"name": level},
                  "matchingPrecedence": precedence}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = rules
    return _object("FlowSchema", name, spec)


MANDATORY_PRIORITY_LEVELS: tuple[Object, ...] = (
    _level(CATCH_ALL, _limited(5, 0, None)),
    _level(EXEMPT, {"type": "Exempt",
                    "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
)
MANDATORY_FLOW_SCHEMAS: tuple[Object, ...] = (
    _schema(EXEMPT, EXEMPT, 1, None, _everything(_groups("system:masters"))),
    _schema(CATCH_ALL, CATCH_ALL, 10000, "ByUser",
            _everything(_groups("system:unauthenticated", "system:authenticated"))),
)

SUGGESTED_PRIORITY_LEVELS: tuple[Object, ...] = (
    _level("system", _limited(30, 33, (64, 6, 50))),
    _level("node-high", _limited(40, 25, (64, 6, 50))),
    _level("leader-election", _limited(10, 0, (16, 4, 50))),
    _level("workload-high", _limited(40, 50, (128, 6, 50))),
    _level("workload-low", _limited(100, 90, (128, 6, 50))),
    _level("global-default", _limited(20, 50, (128, 6, 50))),
)
_GET_CREATE_UPDATE = ["get", "create", "update"]
SUGGESTED_FLOW_SCHEMAS: tuple[Object, ...] = (
    _schema("system-nodes", "system", 500, "ByUser", _everything(_groups("system:nodes"))),
    _schema("system-node-high", "node-high", 400, "ByUser", [{
        "subjects": _groups("system:nodes"),
        "resourceRules": [
            _resource_rule(["*"], [""], ["nodes", "nodes/status"], cluster_scope=True),
            _resource_rule(["*"], ["coordination.k8s.io"], ["leases"]),
        ]}]),
    _schema("probes", EXEMPT, 2, None, [{
        "subjects": _groups("system:unauthenticated", "system:authenticated"),
        "nonResourceRules": [{"verbs": ["get"],
                              "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}]),
    _schema("system-leader-election", "leader-election", 100, "ByUser", [{
        "subjects": [*_users("system:kube-controller-manager", "system:kube-scheduler"),
                     *_kube_system_accounts("*")],
        "resourceRules": [
            _resource_rule(_GET_CREATE_UPDATE, ["coordination.k8s.io"], ["leases"])]}]),
    _schema("workload-leader-election", "leader-election", 200, "ByUser", [{
        "subjects": _kube_system_accounts("*"),
        "resourceRules": [
            _resource_rule(_GET_CREATE_UPDATE, [""], ["endpoints", "configmaps"]),
            _resource_rule(_GET_CREATE_UPDATE, ["coordination.k8s.io"], ["leases"])]}]),
    _schema("endpoint-controller", "workload-high", 150, "ByUser", [{
        "subjects": [*_users("system:kube-controller-manager"),
                     *_kube_system_accounts("endpoint-controller",
                                            "endpointslicemirroring-controller")],
        "resourceRules": [_resource_rule(_GET_CREATE_UPDATE, [""], ["endpoints"])]}]),
    _schema("kube-controller-manager", "workload-high", 800, "ByNamespace",
            _everything(_users("system:kube-controller-manager"))),
    _schema("kube-scheduler", "workload-high", 800, "ByNamespace",
            _everything(_users("system:kube-scheduler"))),
    _schema("kube-system-service-accounts", "workload-high", 900, "ByNamespace",
            _everything(_kube_system_accounts("*"))),
    _schema("service-accounts", "workload-low", 9000, "ByUser",
            _everything(_groups("system:serviceaccounts"))),
    _schema("global-default", "global-default", 9900, "ByUser",
            _everything(_groups("system:unauthenticated", "system:authenticated"))),
)

#: Every bootstrap object by (kind, name).
BOOTSTRAP: dict[tuple[str, str], Object] = {
    (o["kind"], o["metadata"]["name"]): o
    for o in (*MANDATORY_PRIORITY_LEVELS, *MANDATORY_FLOW_SCHEMAS,
              *SUGGESTED_PRIORITY_LEVELS, *SUGGESTED_FLOW_SCHEMAS)
}


def mandatory(kind: str, name: str) -> Object | None:
    """The mandatory object of that kind and name, if it is one."""
    objects = MANDATORY_FLOW_SCHEMAS if kind == "FlowSchema" else MANDATORY_PRIORITY_LEVELS
    return next((o for o in objects if o["metadata"]["name"] == name), None)
