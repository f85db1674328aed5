"""Which FlowSchema a request belongs to, and which flow within it (kube's
k8s.io/apiserver pkg/util/flowcontrol rule.go and the flow distinguisher of apf_controller.go).

A FlowSchema matches when one of its rules does: a rule matches when one of its subjects is the
request's user (by name, group, or service account) and, for a resource request, one of its
resource rules (verb, API group, resource with subresource, namespace or cluster scope), for any
other request one of its non-resource rules (verb, path, ``/prefix/*``). Schemas are tried in
order of ``matchingPrecedence``, then name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import SERVICE_ACCOUNT_PREFIX, UserInfo

ALL = "*"


def _contains(value: str, listed: tuple[str, ...]) -> bool:
    """kube's containsString: the wildcard stands alone (validation says so)."""
    if len(listed) == 1 and listed[0] == ALL:
        return True
    return value in listed


@dataclass(frozen=True, slots=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""

    def matches(self, user: UserInfo) -> bool:
        if self.kind == "User":
            return self.name == ALL or self.name == user.name
        if self.kind == "Group":
            return self.name == ALL or self.name in user.groups
        if self.kind == "ServiceAccount":
            prefix = f"{SERVICE_ACCOUNT_PREFIX}{self.namespace}:"
            if not user.name.startswith(prefix):
                return False
            return self.name == ALL or user.name[len(prefix):] == self.name
        return False


@dataclass(frozen=True, slots=True)
class ResourceRule:
    verbs: tuple[str, ...]
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    cluster_scope: bool
    namespaces: tuple[str, ...]

    def matches(self, info: RequestInfo) -> bool:
        if not _contains(info.verb, self.verbs):
            return False
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        if not _contains(resource, self.resources):
            return False
        if not _contains(info.api_group, self.groups):
            return False
        if not info.namespace:
            return self.cluster_scope
        return _contains(info.namespace, self.namespaces)


@dataclass(frozen=True, slots=True)
class NonResourceRule:
    verbs: tuple[str, ...]
    urls: tuple[str, ...]

    def matches(self, info: RequestInfo) -> bool:
        if not _contains(info.verb, self.verbs):
            return False
        path = info.path
        for url in self.urls:
            if url in (ALL, path):
                return True
            # kube's rule: "/x" and "/x/*" both cover everything below "/x/"
            prefix = url.removesuffix("*")
            if not prefix.endswith("/"):
                prefix += "/"
            if path.startswith(prefix):
                return True
        return False


@dataclass(frozen=True, slots=True)
class PolicyRule:
    subjects: tuple[Subject, ...]
    resource_rules: tuple[ResourceRule, ...]
    non_resource_rules: tuple[NonResourceRule, ...]

    def matches(self, info: RequestInfo, user: UserInfo) -> bool:
        if not any(subject.matches(user) for subject in self.subjects):
            return False
        if info.is_resource_request:
            return any(rule.matches(info) for rule in self.resource_rules)
        return any(rule.matches(info) for rule in self.non_resource_rules)


def _subject(raw: dict) -> Subject:
    kind = raw.get("kind") or ""
    if kind == "ServiceAccount":
        account = raw.get("serviceAccount") or {}
        return Subject(kind, account.get("name") or "", account.get("namespace") or "")
    member = (raw.get("user") if kind == "User" else raw.get("group")) or {}
    return Subject(kind, member.get("name") or "")


def _strings(values: object) -> tuple[str, ...]:
    return tuple(str(v) for v in values) if isinstance(values, list) else ()


def policy_rule(raw: dict) -> PolicyRule:
    """A PolicyRulesWithSubjects of a FlowSchema's spec, ready to match."""
    return PolicyRule(
        tuple(_subject(s or {}) for s in raw.get("subjects") or []),
        tuple(ResourceRule(_strings(r.get("verbs")), _strings(r.get("apiGroups")),
                           _strings(r.get("resources")), bool(r.get("clusterScope")),
                           _strings(r.get("namespaces")))
              for r in raw.get("resourceRules") or [] if isinstance(r, dict)),
        tuple(NonResourceRule(_strings(r.get("verbs")), _strings(r.get("nonResourceURLs")))
              for r in raw.get("nonResourceRules") or [] if isinstance(r, dict)),
    )


@dataclass(frozen=True, slots=True)
class FlowSchema:
    """A FlowSchema as classification reads it."""

    name: str
    uid: str
    precedence: int
    level: str
    #: "ByUser", "ByNamespace" or "" (every request of the schema is one flow).
    distinguisher: str
    rules: tuple[PolicyRule, ...]

    @classmethod
    def from_object(cls, obj: dict) -> FlowSchema:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        method = spec.get("distinguisherMethod")
        return cls(meta.get("name") or "", meta.get("uid") or "",
                   int(spec.get("matchingPrecedence") or 1000),
                   (spec.get("priorityLevelConfiguration") or {}).get("name") or "",
                   (method or {}).get("type") or "" if isinstance(method, dict) else "",
                   tuple(policy_rule(r) for r in spec.get("rules") or [] if isinstance(r, dict)))

    @property
    def order(self) -> tuple[int, str]:
        """kube's FlowSchemaSequence: by matchingPrecedence, then by name."""
        return self.precedence, self.name

    def matches(self, info: RequestInfo, user: UserInfo) -> bool:
        return any(rule.matches(info, user) for rule in self.rules)

    def flow_distinguisher(self, info: RequestInfo, user: UserInfo) -> str:
        if self.distinguisher == "ByUser":
            return user.name
        if self.distinguisher == "ByNamespace":
            return info.namespace
        return ""


def flow_hash(schema: str, distinguisher: str) -> int:
    """kube's hashFlowID: the first 8 bytes (little-endian) of SHA-256 over the schema's name,
    a zero byte and the distinguisher; the entropy shuffle sharding deals queues from."""
    digest = hashlib.sha256(schema.encode() + b"\x00" + distinguisher.encode()).digest()
    return int.from_bytes(digest[:8], "little")
