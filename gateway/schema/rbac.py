"""Schemas of rbac.authorization.k8s.io/v1."""

from __future__ import annotations

from gateway.schema import meta as _meta  # noqa: F401
from gateway.schema.dsl import array, define, define_kind, meta_ref, obj, ref, string

V1 = "io.k8s.api.rbac.v1"
GROUP = "rbac.authorization.k8s.io"


def rbac(name: str, description: str = "") -> dict:
    return ref(f"{V1}.{name}", description)


define(f"{V1}.PolicyRule", obj(
    "Actions allowed on some resources or non-resource URLs.",
    required=("verbs",),
    apiGroups=array(string(), "API groups of the resources; '' is the core group, '*' any.",
                    list_type="atomic"),
    nonResourceURLs=array(string(), "Paths outside the API (a trailing '*' matches a "
                          "prefix); only in cluster roles.", list_type="atomic"),
    resourceNames=array(string(), "Object names the rule is limited to; empty means any.",
                        list_type="atomic"),
    resources=array(string(), "Resources, 'resource/subresource', '*' or '*/subresource'.",
                    list_type="atomic"),
    verbs=array(string(), "Verbs allowed (get, list, create, ..., or '*').",
                list_type="atomic"),
))
define(f"{V1}.AggregationRule", obj(
    "Which cluster roles' rules a cluster role is made of.",
    clusterRoleSelectors=array(meta_ref("LabelSelector"), "Label selectors of the cluster "
                               "roles to gather rules from.", list_type="atomic"),
))
define(f"{V1}.Subject", obj(
    "Someone a binding grants a role to: a user, a group or a service account.",
    required=("kind", "name"),
    apiGroup=string("rbac.authorization.k8s.io for users and groups, '' for service "
                    "accounts."),
    kind=string("User, Group or ServiceAccount."),
    name=string("Name of the subject."),
    namespace=string("Namespace of a service account."),
    map_type="atomic",
))
define(f"{V1}.RoleRef", obj(
    "The role a binding grants; it cannot change once set.",
    required=("apiGroup", "kind", "name"),
    apiGroup=string("Always rbac.authorization.k8s.io."),
    kind=string("Role or ClusterRole."),
    name=string("Name of the role."),
    map_type="atomic",
))
define_kind(f"{V1}.Role", GROUP, "v1", "Role", "Permissions within one namespace.",
            rules=array(rbac("PolicyRule"), "What the role allows.", list_type="atomic"))
define_kind(f"{V1}.ClusterRole", GROUP, "v1", "ClusterRole",
            "Permissions across the cluster, or reusable in any namespace.",
            aggregationRule=rbac("AggregationRule",
                                 "Which cluster roles this one gathers rules from."),
            rules=array(rbac("PolicyRule"), "What the role allows; kept up to date by the "
                        "server when aggregationRule is set.", list_type="atomic"))
define_kind(f"{V1}.RoleBinding", GROUP, "v1", "RoleBinding",
            "Grants a role's permissions to subjects within one namespace.",
            required=("roleRef",),
            roleRef=rbac("RoleRef", "The role granted; it cannot change."),
            subjects=array(rbac("Subject"), "Who the role is granted to.", list_type="atomic"))
define_kind(f"{V1}.ClusterRoleBinding", GROUP, "v1", "ClusterRoleBinding",
            "Grants a cluster role's permissions to subjects across the cluster.",
            required=("roleRef",),
            roleRef=rbac("RoleRef", "The role granted; it cannot change."),
            subjects=array(rbac("Subject"), "Who the role is granted to.", list_type="atomic"))
