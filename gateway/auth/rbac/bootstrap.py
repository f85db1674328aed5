"""The bootstrap RBAC policy: the roles and bindings kube-apiserver creates at start.

They carry the label kubernetes.io/bootstrapping=rbac-defaults and the annotation
rbac.authorization.kubernetes.io/autoupdate=true; the policy controller recreates them when
missing and adds back rules or subjects they lost, unless that annotation is set to "false".
"""

from __future__ import annotations

from typing import Any

GROUP = "rbac.authorization.k8s.io"
API_VERSION = f"{GROUP}/v1"
LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

Object = dict[str, Any]


def rule(verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None,
         names: list[str] | None = None, urls: list[str] | None = None) -> Object:
    out: Object = {"verbs": verbs}
    if groups is not None:
        out["apiGroups"] = groups
    if resources is not None:
        out["resources"] = resources
    if names:
        out["resourceNames"] = names
    if urls is not None:
        out["nonResourceURLs"] = urls
    return out


def _meta(name: str, namespace: str = "", labels: dict[str, str] | None = None) -> Object:
    meta: Object = {"name": name, "labels": {**LABELS, **(labels or {})},
                    "annotations": {AUTOUPDATE: "true"}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def cluster_role(name: str, rules: list[Object] | None = None, *,
                 aggregate_from: str = "", labels: dict[str, str] | None = None) -> Object:
    role: Object = {"apiVersion": API_VERSION, "kind": "ClusterRole",
                    "metadata": _meta(name, labels=labels)}
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"{AGGREGATE_TO}{aggregate_from}": "true"}}]}
    role["rules"] = rules or []
    return role


def binding(kind: str, name: str, role_kind: str, role: str, subjects: list[Object],
            namespace: str = "") -> Object:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role},
            "subjects": subjects}


def group(name: str) -> Object:
    return {"apiGroup": GROUP, "kind": "Group", "name": name}


def user(name: str) -> Object:
    return {"apiGroup": GROUP, "kind": "User", "name": name}


def service_account(namespace: str, name: str) -> Object:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


_AGGREGATE_TO_EDIT = [
    rule(READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
                      "services/proxy"]),
    rule(["impersonate"], [""], ["serviceaccounts"]),
    rule(WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    rule(["create"], [""], ["pods/eviction"]),
    rule(WRITE, [""], ["configmaps", "events", "persistentvolumeclaims",
                       "replicationcontrollers", "replicationcontrollers/scale", "secrets",
                       "serviceaccounts", "services", "services/proxy"]),
    rule(["create"], [""], ["serviceaccounts/token"]),
    rule(WRITE, ["apps"], ["daemonsets", "deployments", "deployments/rollback",
                           "deployments/scale", "replicasets", "replicasets/scale",
                           "statefulsets", "statefulsets/scale"]),
    rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    rule(WRITE, ["batch"], ["cronjobs", "jobs"]),
    rule(WRITE, ["extensions"], ["daemonsets", "deployments", "deployments/rollback",
                                 "deployments/scale", "ingresses", "networkpolicies",
                                 "replicasets", "replicasets/scale",
                                 "replicationcontrollers/scale"]),
    rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
    rule(WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
    rule(READ_WRITE, ["coordination.k8s.io"], ["leases"]),
]
_AGGREGATE_TO_VIEW = [
    rule(READ, [""], ["configmaps", "endpoints", "persistentvolumeclaims",
                      "persistentvolumeclaims/status", "pods", "replicationcontrollers",
                      "replicationcontrollers/scale", "serviceaccounts", "services",
                      "services/status"]),
    rule(READ, [""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log",
                      "pods/status", "replicationcontrollers/status", "resourcequotas",
                      "resourcequotas/status"]),
    rule(READ, [""], ["namespaces"]),
    rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
    rule(READ, ["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status",
                          "deployments", "deployments/scale", "deployments/status",
                          "replicasets", "replicasets/scale", "replicasets/status",
                          "statefulsets", "statefulsets/scale", "statefulsets/status"]),
    rule(READ, ["autoscaling"], ["horizontalpodautoscalers",
                                 "horizontalpodautoscalers/status"]),
    rule(READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    rule(READ, ["extensions"], ["daemonsets", "daemonsets/status", "deployments",
                                "deployments/scale", "deployments/status", "ingresses",
                                "ingresses/status", "networkpolicies", "replicasets",
                                "replicasets/scale", "replicasets/status",
                                "replicationcontrollers/scale"]),
    rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    rule(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
]

CLUSTER_ROLES: list[Object] = [
    cluster_role("cluster-admin", [rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])]),
    cluster_role("admin", aggregate_from="admin"),
    cluster_role("edit", aggregate_from="edit", labels={f"{AGGREGATE_TO}admin": "true"}),
    cluster_role("view", aggregate_from="view", labels={f"{AGGREGATE_TO}edit": "true"}),
    cluster_role("system:aggregate-to-admin", [
        rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
        rule(READ_WRITE, [GROUP], ["rolebindings", "roles"]),
    ], labels={f"{AGGREGATE_TO}admin": "true"}),
    cluster_role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT,
                 labels={f"{AGGREGATE_TO}edit": "true"}),
    cluster_role("system:aggregate-to-view", _AGGREGATE_TO_VIEW,
                 labels={f"{AGGREGATE_TO}view": "true"}),
    cluster_role("system:discovery", [rule(["get"], urls=[
        "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
        "/readyz", "/version", "/version/"])]),
    cluster_role("system:basic-user", [
        rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews",
                                                    "selfsubjectrulesreviews"]),
        rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
    ]),
    cluster_role("system:public-info-viewer", [rule(["get"], urls=[
        "/healthz", "/livez", "/readyz", "/version", "/version/"])]),
    cluster_role("system:auth-delegator", [
        rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
        rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    ]),
    cluster_role("system:monitoring", [rule(["get"], urls=[
        "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
        "/readyz", "/readyz/*"])]),
    # kube-controller-manager's namespace controller: what the gateway's own controller acts
    # as, and what a backend that authorizes with SubjectAccessReviews asks about
    cluster_role("system:controller:namespace-controller", [
        rule(["delete", "get", "list", "watch"], [""], ["namespaces"]),
        rule(["update"], [""], ["namespaces/finalize", "namespaces/status"]),
        rule(["delete", "deletecollection", "get", "list"], ["*"], ["*"]),
    ]),
]

CLUSTER_ROLE_BINDINGS: list[Object] = [
    binding("ClusterRoleBinding", "cluster-admin", "ClusterRole", "cluster-admin",
            [group("system:masters")]),
    binding("ClusterRoleBinding", "system:basic-user", "ClusterRole", "system:basic-user",
            [group("system:authenticated")]),
    binding("ClusterRoleBinding", "system:discovery", "ClusterRole", "system:discovery",
            [group("system:authenticated")]),
    binding("ClusterRoleBinding", "system:public-info-viewer", "ClusterRole",
            "system:public-info-viewer",
            [group("system:authenticated"), group("system:unauthenticated")]),
    binding("ClusterRoleBinding", "system:monitoring", "ClusterRole", "system:monitoring",
            [group("system:monitoring")]),
    binding("ClusterRoleBinding", "system:controller:namespace-controller", "ClusterRole",
            "system:controller:namespace-controller",
            [service_account("kube-system", "namespace-controller")]),
]

AUTH_CONFIGMAP = "extension-apiserver-authentication"
ROLES: list[Object] = [{
    "apiVersion": API_VERSION, "kind": "Role",
    "metadata": _meta("extension-apiserver-authentication-reader", "kube-system"),
    "rules": [rule(READ, [""], ["configmaps"], [AUTH_CONFIGMAP])],
}]
ROLE_BINDINGS: list[Object] = [
    binding("RoleBinding", "system::extension-apiserver-authentication-reader", "Role",
            "extension-apiserver-authentication-reader",
            [user("system:kube-controller-manager"), user("system:kube-scheduler")],
            namespace="kube-system"),
]
