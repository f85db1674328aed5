"""No escalation through RBAC objects: a user may only grant what they hold themselves.

Creating or changing a Role or ClusterRole needs the ``escalate`` verb on it, or every
permission it grants must already be the user's; a RoleBinding or ClusterRoleBinding needs
``bind`` on the role it references, or the role's permissions must already be the user's.
system:masters is exempt. This is kube's rbac policybased storage, as admission hooks.
"""

from __future__ import annotations

from gateway.apimachinery import status
from gateway.apimachinery.user import UserInfo
from gateway.auth.authorizer import Attributes, Authorizer, Decision
from gateway.auth.rbac.authorizer import RBAC
from gateway.auth.rbac.rules import Atom, uncovered
from gateway.registry.store import Admission, WriteOptions
from gateway.storage.interface import Object

GROUP = "rbac.authorization.k8s.io"


def _go_quoted(values: tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _refused(resource: str, name: str, user: UserInfo, missing: list[Atom]) -> \
        status.StatusError:
    described = "\n".join(sorted({atom.describe() for atom in missing}))
    detail = (f'user "{user.name}" (groups={_go_quoted(user.groups)}) is attempting to grant '
              f"RBAC permissions not currently held:\n{described}")
    return status.StatusError(403, "Forbidden",
                              f'{resource}.{GROUP} "{name}" is forbidden: {detail}',
                              name=name, group=GROUP, kind=resource)


class EscalationCheck:
    def __init__(self, rbac: RBAC, authorize: Authorizer) -> None:
        self.rbac = rbac
        self.authorize = authorize

    async def _allowed(self, user: UserInfo, verb: str, resource: str, name: str,
                       namespace: str) -> bool:
        attributes = Attributes(user, verb, True, namespace, GROUP, "v1", resource, "", name)
        decision, _ = await self.authorize(attributes)
        return decision is Decision.ALLOW

    def role_hook(self, resource: str) -> Admission:
        """Admission for roles / clusterroles."""

        async def check(new: Object, old: Object | None, options: WriteOptions) -> None:
            user = options.user
            if user is None or user.is_privileged:
                return
            if old is not None and new.get("rules") == old.get("rules"):
                return
            meta = new["metadata"]
            namespace = meta.get("namespace", "")
            if await self._allowed(user, "escalate", resource, meta["name"], namespace):
                return
            missing = uncovered(self.rbac.rules_for(user, namespace), new.get("rules") or [])
            if missing:
                raise _refused(resource, meta["name"], user, missing)

        return check

    def binding_hook(self, resource: str) -> Admission:
        """Admission for rolebindings / clusterrolebindings."""

        async def check(new: Object, old: Object | None, options: WriteOptions) -> None:
            user = options.user
            if user is None or user.is_privileged:
                return
            meta, ref = new["metadata"], new.get("roleRef") or {}
            namespace = meta.get("namespace", "")
            role_resource = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            if await self._allowed(user, "bind", role_resource, ref.get("name", ""),
                                   namespace):
                return
            rules = self.rbac.role_ref_rules(ref, namespace)
            if rules is None:
                raise status.not_found(role_resource, ref.get("name", ""), GROUP)
            missing = uncovered(self.rbac.rules_for(user, namespace), rules)
            if missing:
                raise _refused(resource, meta["name"], user, missing)

        return check
