"""Whether a policy's matchConstraints, or a binding's matchResources, select a write (kube's
admission/plugin/policy/matching): the namespace and object selectors, then the excluded
rules, then the rules (with their resourceNames), where ``matchPolicy: Equivalent`` also
matches rules naming another served version of the resource.
"""

from __future__ import annotations

from gateway.admission.matching import (
    namespace_selector_matches,
    object_selector_matches,
    rule_matches,
)
from gateway.registry.admission import Attributes, Object


def matched_version(match: Object, attrs: Attributes,
                    namespace_labels: dict[str, str] | None) -> str | None:
    """The version the write is seen at when ``match`` selects it (the request's, or an
    equivalent one a rule names); None when it does not."""
    if not namespace_selector_matches(match, attrs, namespace_labels):
        return None
    if not object_selector_matches(match, attrs):
        return None
    policy = match.get("matchPolicy") or "Equivalent"
    if _rules_match(match.get("excludeResourceRules") or [], policy, attrs) is not None:
        return None
    rules = match.get("resourceRules") or []
    if not rules:
        return attrs.resource.version
    return _rules_match(rules, policy, attrs)


def _rules_match(rules: list[Object], policy: str, attrs: Attributes) -> str | None:
    """matchesResourceRules: the version a rule (and its names) matches at, the request's
    first, then (Equivalent) the other served versions, rule by rule."""
    version = attrs.resource.version
    for rule in rules:
        if rule_matches(rule, attrs, version) and _named(rule, attrs):
            return version
    if policy == "Exact":
        return None
    for rule in rules:
        for other in attrs.equivalent_versions:
            if rule_matches(rule, attrs, other) and _named(rule, attrs):
                return other
    return None


def _named(rule: Object, attrs: Attributes) -> bool:
    """An empty resourceNames matches every name."""
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names
