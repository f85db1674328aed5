"""The audit policy (--audit-policy-file): which requests are recorded, and how much.

The first rule that matches a request decides its level: None (not recorded), Metadata
(who, what, when, outcome), Request (and the request body) or RequestResponse (and the
response body). Without a policy file, every request is recorded at Metadata.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo

STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class Level(enum.IntEnum):
    NONE = 0
    METADATA = 1
    REQUEST = 2
    REQUEST_RESPONSE = 3


_LEVELS = {"None": Level.NONE, "Metadata": Level.METADATA, "Request": Level.REQUEST,
           "RequestResponse": Level.REQUEST_RESPONSE}


class PolicyError(ValueError):
    pass


@dataclass(frozen=True)
class GroupResources:
    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def matches(self, info: RequestInfo) -> bool:
        if info.api_group != self.group:
            return False
        if self.resources:
            wanted = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            if not any(r in (wanted, "*") or r == f"{info.resource}/*" or (
                    r == f"*/{info.subresource}" and info.subresource) for r in self.resources):
                return False
        return not self.resource_names or info.name in self.resource_names


@dataclass(frozen=True)
class Rule:
    level: Level
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    omit_stages: tuple[str, ...] = ()

    def matches(self, user: UserInfo, info: RequestInfo) -> bool:
        if self.users and user.name not in self.users:
            return False
        if self.groups and not set(self.groups) & set(user.groups):
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if info.is_resource_request:
            if self.urls:
                return False
            if self.resources and not any(g.matches(info) for g in self.resources):
                return False
            return not self.namespaces or info.namespace in self.namespaces
        if self.resources or self.namespaces:
            return False
        return not self.urls or any(u == info.path or (u.endswith("*") and info.path.startswith(
            u[:-1])) for u in self.urls)


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    omit_stages: tuple[str, ...] = ()
    default: Level = Level.METADATA
    omit_managed_fields: bool = False

    def decide(self, user: UserInfo, info: RequestInfo) -> tuple[Level, frozenset[str]]:
        for rule in self.rules:
            if rule.matches(user, info):
                return rule.level, frozenset(self.omit_stages) | frozenset(rule.omit_stages)
        level = Level.NONE if self.rules else self.default
        return level, frozenset(self.omit_stages)


def _level(value: object, where: str) -> Level:
    if value not in _LEVELS:
        raise PolicyError(f"{where}: unknown level {value!r} (None, Metadata, Request, "
                          "RequestResponse)")
    return _LEVELS[value]


def _stages(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):  # kube's strict decoding refuses it too
        raise PolicyError(f"{where}: omitStages: not a list of stages: {value!r}")
    for stage in value:
        if stage not in STAGES:
            raise PolicyError(f"{where}: unknown stage {stage!r}")
    return tuple(value)


def load_policy(path: Path) -> Policy:
    """Read an audit.k8s.io/v1 Policy; PolicyError with one line when it is not one."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise PolicyError(f"{path}: {err}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "Policy":
        raise PolicyError(f"{path}: not an audit.k8s.io Policy")
    rules = []
    for index, raw in enumerate(doc.get("rules") or []):
        where = f"{path}: rules[{index}]"
        rules.append(Rule(
            level=_level(raw.get("level"), where),
            users=tuple(raw.get("users") or ()), groups=tuple(raw.get("userGroups") or ()),
            verbs=tuple(raw.get("verbs") or ()),
            resources=tuple(GroupResources(g.get("group", ""), tuple(g.get("resources") or ()),
                                           tuple(g.get("resourceNames") or ()))
                            for g in raw.get("resources") or []),
            namespaces=tuple(raw.get("namespaces") or ()),
            urls=tuple(raw.get("nonResourceURLs") or ()),
            omit_stages=_stages(raw.get("omitStages"), where),
        ))
    return Policy(tuple(rules), _stages(doc.get("omitStages"), str(path)),
                  omit_managed_fields=bool(doc.get("omitManagedFields")))


@dataclass
class Decision:
    level: Level
    omit: frozenset[str] = field(default_factory=frozenset)
