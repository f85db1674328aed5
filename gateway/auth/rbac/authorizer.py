"""The RBAC authorizer: rules of a user gathered from the cached roles and bindings.

ClusterRoleBindings grant their ClusterRole everywhere (and for non-resource paths);
RoleBindings grant their Role or ClusterRole in their own namespace only. The rules of a user
in a namespace are worked out once per state of the four caches and then remembered.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.apimachinery.user import UserInfo
from gateway.auth.authorizer import Attributes, Decision
from gateway.auth.rbac.rules import Rule, allows
from gateway.storage.watchcache import Cacher

GROUP = "rbac.authorization.k8s.io"


@dataclass
class RBACCaches:
    roles: Cacher
    cluster_roles: Cacher
    role_bindings: Cacher
    cluster_role_bindings: Cacher

    def all(self) -> tuple[Cacher, ...]:
        return (self.roles, self.cluster_roles, self.role_bindings, self.cluster_role_bindings)

    def stamp(self) -> tuple[int, ...]:
        return (self.roles.revision, self.cluster_roles.revision, self.role_bindings.revision,
                self.cluster_role_bindings.revision)


def subject_applies(subject: dict, user: UserInfo, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


class RBAC:
    def __init__(self, caches: RBACCaches) -> None:
        self.caches = caches
        self._memo: dict[tuple, list[tuple[str, Rule]]] = {}
        self._memo_stamp: tuple[int, ...] = ()

    # -- lookups ----------------------------------------------------------------------------

    def _cluster_role(self, name: str) -> dict | None:
        return _by_name(self.caches.cluster_roles.objects(), name)

    def _role(self, namespace: str, name: str) -> dict | None:
        prefix = f"{self.caches.roles.prefix}{namespace}/"
        return _by_name(self.caches.roles.objects(prefix), name)

    def role_ref_rules(self, role_ref: dict, namespace: str) -> list[Rule] | None:
        """The rules a roleRef points at; None when the role does not exist."""
        kind, name = role_ref.get("kind"), role_ref.get("name", "")
        role = self._cluster_role(name) if kind == "ClusterRole" else \
            self._role(namespace, name) if kind == "Role" else None
        return None if role is None else list(role.get("rules") or [])

    # -- rules of a user ------------------------------------------------------------------------

    def rules_for(self, user: UserInfo, namespace: str = "") -> list[Rule]:
        return [rule for _, rule in self._sourced_rules(user, namespace)]

    def _sourced_rules(self, user: UserInfo, namespace: str) -> list[tuple[str, Rule]]:
        """The user's rules, each with the binding that grants it (memoized per cache state)."""
        stamp = self.caches.stamp()
        if stamp != self._memo_stamp:
            self._memo, self._memo_stamp = {}, stamp
        key = (user.name, user.groups, namespace)
        rules = self._memo.get(key)
        if rules is None:
            rules = self._memo[key] = self._gather(user, namespace)
        return rules

    def _gather(self, user: UserInfo, namespace: str) -> list[tuple[str, Rule]]:
        rules: list[tuple[str, Rule]] = []
        bindings = [("", b) for b in self.caches.cluster_role_bindings.objects()]
        if namespace:
            prefix = f"{self.caches.role_bindings.prefix}{namespace}/"
            bindings += [(namespace, b) for b in self.caches.role_bindings.objects(prefix)]
        for binding_namespace, binding in bindings:
            subject = next((s for s in binding.get("subjects") or []
                            if subject_applies(s, user, binding_namespace)), None)
            if subject is None:
                continue
            role_ref = binding.get("roleRef") or {}
            source = _describe(binding, binding_namespace, subject)
            rules += [(source, rule) for rule in
                      self.role_ref_rules(role_ref, binding_namespace) or []]
        return rules

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        namespace = attributes.namespace if attributes.resource_request else ""
        for source, rule in self._sourced_rules(attributes.user, namespace):
            if allows(rule, attributes):
                return Decision.ALLOW, f"RBAC: allowed by {source}"
        return Decision.NO_OPINION, ""


def _describe(binding: dict, namespace: str, subject: dict) -> str:
    """kube's wording for the binding that allowed a request, e.g.
    ``RoleBinding "view/team" of ClusterRole "view" to Group "qa"``."""
    name = binding.get("metadata", {}).get("name", "")
    role_ref = binding.get("roleRef") or {}
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    if namespace:
        name = f"{name}/{namespace}"
    who = subject.get("name", "")
    if subject.get("kind") == "ServiceAccount":
        who = f"{subject.get('namespace') or namespace}/{who}"
    return (f'{kind} "{name}" of {role_ref.get("kind")} "{role_ref.get("name")}" to '
            f'{subject.get("kind")} "{who}"')


def _by_name(objects: list[dict], name: str) -> dict | None:
    for obj in objects:
        if obj.get("metadata", {}).get("name") == name:
            return obj
    return None
