"""rbac.authorization.k8s.io/v1: roles, cluster roles and their bindings."""

from __future__ import annotations

from collections.abc import Callable

from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid, path_segment_causes, required

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("User", "Group", "ServiceAccount")


def _created(obj: Object) -> str:
    return obj.get("metadata", {}).get("creationTimestamp") or ""


CREATED_AT = Column("Created At", "date", "When the object was created.", _created)


class RBACStrategy(Strategy):
    """RBAC names may hold ':' (system:discovery): they need only be URL path segments."""

    def validate_name(self, name: str) -> list[Cause]:
        return path_segment_causes(name)


class RoleStrategy(RBACStrategy):
    def __init__(self, namespaced: bool) -> None:
        self.namespaced = namespaced

    def validate(self, obj: Object) -> list[Cause]:
        causes: list[Cause] = []
        for i, rule in enumerate(obj.get("rules") or []):
            path = f"rules[{i}]"
            if not rule.get("verbs"):
                causes.append(required(f"{path}.verbs", "verbs must contain at least one value"))
            urls = rule.get("nonResourceURLs") or []
            if urls and self.namespaced:
                causes.append(invalid(f"{path}.nonResourceURLs", str(urls),
                                      "namespaced rules cannot apply to non-resource URLs"))
            if urls and (rule.get("apiGroups") or rule.get("resources")):
                causes.append(invalid(f"{path}.nonResourceURLs", str(urls), "rules cannot "
                                      "apply to both regular resources and non-resource URLs"))
            if not urls:
                if not rule.get("resources"):
                    causes.append(required(f"{path}.resources", "resource rules must supply "
                                           "at least one resource"))
                if not rule.get("apiGroups"):
                    causes.append(required(f"{path}.apiGroups", "resource rules must supply "
                                           "at least one api group"))
        return causes


class BindingStrategy(RBACStrategy):
    def __init__(self, namespaced: bool) -> None:
        self.namespaced = namespaced

    def validate(self, obj: Object) -> list[Cause]:
        causes: list[Cause] = []
        ref = obj.get("roleRef") or {}
        kinds = ("Role", "ClusterRole") if self.namespaced else ("ClusterRole",)
        if ref.get("apiGroup") != GROUP:
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: '
                                f'"{ref.get("apiGroup", "")}": supported values: "{GROUP}"',
                                "roleRef.apiGroup"))
        if ref.get("kind") not in kinds:
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: '
                                f'"{ref.get("kind", "")}": supported values: '
                                + ", ".join(f'"{k}"' for k in kinds), "roleRef.kind"))
        if not ref.get("name"):
            causes.append(required("roleRef.name"))
        for i, subject in enumerate(obj.get("subjects") or []):
            causes += _subject_causes(f"subjects[{i}]", subject, self.namespaced)
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        if new.get("roleRef") != old.get("roleRef"):
            causes.append(Cause("FieldValueInvalid", "Invalid value: cannot change roleRef",
                                "roleRef"))
        return causes


def _subject_causes(path: str, subject: dict, namespaced: bool) -> list[Cause]:
    kind = subject.get("kind")
    if kind not in SUBJECT_KINDS:
        return [Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": supported '
                      'values: "ServiceAccount", "User", "Group"', f"{path}.kind")]
    causes = [] if subject.get("name") else [required(f"{path}.name")]
    if kind == "ServiceAccount":
        if subject.get("apiGroup"):
            causes.append(Cause("FieldValueNotSupported", "Unsupported value: supported "
                                'values: ""', f"{path}.apiGroup"))
        if not namespaced and not subject.get("namespace"):
            causes.append(required(f"{path}.namespace"))
    elif subject.get("apiGroup", GROUP) != GROUP:
        causes.append(Cause("FieldValueNotSupported", f'Unsupported value: supported values: '
                            f'"{GROUP}"', f"{path}.apiGroup"))
    return causes


def _subjects(kind: str) -> Callable[[Object], str]:
    def cell(obj: Object) -> str:
        names = []
        for subject in obj.get("subjects") or []:
            if subject.get("kind") == kind:
                name = subject.get("name", "")
                if kind == "ServiceAccount":
                    name = f"{subject.get('namespace', '')}/{name}"
                names.append(name)
        return ", ".join(names)

    return cell


def _role_cell(obj: Object) -> str:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


BINDING_COLUMNS = (
    NAME, Column("Role", "string", "The role granted.", _role_cell), AGE,
    Column("Users", "string", "Users granted the role.", _subjects("User"), priority=1),
    Column("Groups", "string", "Groups granted the role.", _subjects("Group"), priority=1),
    Column("ServiceAccounts", "string", "Service accounts granted the role.",
           _subjects("ServiceAccount"), priority=1),
)


def _definition(kind: str, plural: str, namespaced: bool, strategy: Strategy,
                columns: tuple) -> ResourceDef:
    return ResourceDef(group=GROUP, version="v1", kind=kind, plural=plural,
                       singular=kind.lower(), namespaced=namespaced, strategy=strategy,
                       columns=columns, schema=f"io.k8s.api.rbac.v1.{kind}")


ROLES = _definition("Role", "roles", True, RoleStrategy(True), (NAME, CREATED_AT))
CLUSTER_ROLES = _definition("ClusterRole", "clusterroles", False, RoleStrategy(False),
                            (NAME, CREATED_AT))
ROLE_BINDINGS = _definition("RoleBinding", "rolebindings", True, BindingStrategy(True),
                            BINDING_COLUMNS)
CLUSTER_ROLE_BINDINGS = _definition("ClusterRoleBinding", "clusterrolebindings", False,
                                    BindingStrategy(False), BINDING_COLUMNS)
