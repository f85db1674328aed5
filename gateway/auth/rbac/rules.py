"""RBAC rules: whether a rule allows a request, and whether some rules cover others (the
escalation check). The matching is kube's rbac/v1 semantics, wildcards included."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gateway.auth.authorizer import Attributes

ALL = "*"
Rule = dict


def _has(values: Iterable[str] | None, wanted: str) -> bool:
    values = values or []
    return ALL in values or wanted in values


def resource_matches(rule: Rule, resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for candidate in rule.get("resources") or []:
        if candidate in (ALL, combined):
            return True
        if subresource and candidate == f"*/{subresource}":
            return True
    return False


def url_matches(rule: Rule, path: str) -> bool:
    for candidate in rule.get("nonResourceURLs") or []:
        if candidate in (ALL, path):
            return True
        if candidate.endswith("*") and path.startswith(candidate[:-1]):
            return True
    return False


def allows(rule: Rule, attributes: Attributes) -> bool:
    if not _has(rule.get("verbs"), attributes.verb):
        return False
    if not attributes.resource_request:
        return url_matches(rule, attributes.path)
    if not rule.get("resources"):
        return False
    names = rule.get("resourceNames") or []
    if names and attributes.name not in names:
        return False
    return _has(rule.get("apiGroups"), attributes.api_group) and resource_matches(
        rule, attributes.resource, attributes.subresource)


@dataclass(frozen=True)
class Atom:
    """One verb on one thing: the unit the escalation check compares."""

    verb: str
    group: str = ""
    resource: str = ""
    name: str = ""
    url: str = ""

    def describe(self) -> str:
        if self.url:
            return f'{{NonResourceURLs:["{self.url}"], Verbs:["{self.verb}"]}}'
        names = f', ResourceNames:["{self.name}"]' if self.name else ""
        return (f'{{APIGroups:["{self.group}"], Resources:["{self.resource}"]{names}, '
                f'Verbs:["{self.verb}"]}}')


def atoms(rule: Rule) -> list[Atom]:
    out = []
    for verb in rule.get("verbs") or []:
        for url in rule.get("nonResourceURLs") or []:
            out.append(Atom(verb, url=url))
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for name in rule.get("resourceNames") or [""]:
                    out.append(Atom(verb, group, resource, name))
    return out


def _covers_resource(owner: Rule, atom: Atom) -> bool:
    resources = owner.get("resources") or []
    if ALL in resources or atom.resource in resources:
        return True
    base, _, sub = atom.resource.partition("/")
    return bool(sub) and (f"*/{sub}" in resources or f"{base}/*" in resources)


def _covers(owner: Rule, atom: Atom) -> bool:
    if not _has(owner.get("verbs"), atom.verb):
        return False
    if atom.url:
        return url_matches(owner, atom.url) or (
            atom.url.endswith("*") and any(u == ALL or (u.endswith("*") and atom.url.startswith(
                u[:-1])) for u in owner.get("nonResourceURLs") or []))
    if not _has(owner.get("apiGroups"), atom.group) or not _covers_resource(owner, atom):
        return False
    names = owner.get("resourceNames") or []
    return not names or atom.name in names


def uncovered(owner_rules: list[Rule], wanted_rules: list[Rule]) -> list[Atom]:
    """What ``wanted_rules`` grant that none of ``owner_rules`` does."""
    missing = []
    for rule in wanted_rules:
        for atom in atoms(rule):
            if not any(_covers(owner, atom) for owner in owner_rules):
                missing.append(atom)
    return missing
