"""The RBAC authorizer: rules of a user gathered from the cached roles and bindings.

ClusterRoleBindings grant their ClusterRole everywhere (and for non-resource paths);
RoleBindings grant their Role or ClusterRole in their own namespace only. The rules of a user
in a namespace are worked out once per state of the four caches and then remembered.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.auth.authorizer import Attributes, Decision
from gateway.auth.rbac.rules import Rule, allows
from gateway.auth.user import UserInfo
from gateway.storage.watchcache import Cacher

GROUP = "rbac.authorization.k8s.io"


@dataclass
class RBACCaches:
    roles: Cacher
    cluster_roles: Cacher
    role_bindings: Cacher
    cluster_role_bindings: Cacher

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
        self._memo: dict[tuple, list[Rule]] = {}
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
        stamp = self.caches.stamp()
        if stamp != self._memo_stamp:
            self._memo, self._memo_stamp = {}, stamp
        key = (user.name, user.groups, namespace)
        rules = self._memo.get(key)
        if rules is None:
            rules = self._memo[key] = self._gather(user, namespace)
        return rules

    def _gather(self, user: UserInfo, namespace: str) -> list[Rule]:
        rules: list[Rule] = []
        for binding in self.caches.cluster_role_bindings.objects():
            if any(subject_applies(s, user, "") for s in binding.get("subjects") or []):
                rules += self.role_ref_rules(binding.get("roleRef") or {}, "") or []
        if namespace:
            prefix = f"{self.caches.role_bindings.prefix}{namespace}/"
            for binding in self.caches.role_bindings.objects(prefix):
                if any(subject_applies(s, user, namespace) for s in binding.get("subjects") or []):
                    rules += self.role_ref_rules(binding.get("roleRef") or {}, namespace) or []
        return rules

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        namespace = attributes.namespace if attributes.resource_request else ""
        for rule in self.rules_for(attributes.user, namespace):
            if allows(rule, attributes):
                return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""


def _by_name(objects: list[dict], name: str) -> dict | None:
    for obj in objects:
        if obj.get("metadata", {}).get("name") == name:
            return obj
    return None
