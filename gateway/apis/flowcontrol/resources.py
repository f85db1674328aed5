"""flowcontrol.apiserver.k8s.io/v1 FlowSchemas and PriorityLevelConfigurations: stored,
defaulted, validated and served with their status subresource.

The gateway enforces them (gateway/flowcontrol, the filter in
gateway/server/filters/priority.py), and extension API servers built on k8s.io/apiserver read
them too. The mandatory and suggested objects (gateway/apis/flowcontrol/bootstrap.py) are
created at start by gateway.controllers.flowcontrol, as kube-apiserver's
priority-and-fairness-config-producer does. Checks and messages are kube's
(pkg/apis/flowcontrol/validation, v1 rules).
"""

from __future__ import annotations

import math
from typing import Any

from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.apis.flowcontrol.bootstrap import (
    GROUP,
    MANDATORY_FLOW_SCHEMAS,
    MANDATORY_PRIORITY_LEVELS,
)
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)

MAX_MATCHING_PRECEDENCE = 10000
MAX_QUEUES = 10 * 1000 * 1000
MAX_HASH_BITS = 60
#: sets.NewString(...).List(): sorted.
DISTINGUISHER_METHODS = ("ByNamespace", "ByUser")
SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update",
         "watch")
ENABLEMENTS = ("Exempt", "Limited")
LIMIT_RESPONSES = ("Queue", "Reject")
NS_INTRO = "each member of this list must be '*' or a DNS-1123 label; "


_MANDATORY_FS = {o["metadata"]["name"]: o["spec"] for o in MANDATORY_FLOW_SCHEMAS}
_MANDATORY_PL = {o["metadata"]["name"]: o["spec"] for o in MANDATORY_PRIORITY_LEVELS}


def semantic(value: Any) -> Any:
    """A value as Semantic.DeepEqual compares Go structs: absent, null, empty and zero
    fields are the same."""
    if isinstance(value, dict):
        out = {k: semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", 0, False, [], {})}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def _go_struct(type_name: str, value: Any) -> str:
    """A struct value where kube shows %#v of its internal type (approximated)."""
    if isinstance(value, dict) and set(value) <= {"type"}:
        return f"{type_name}{{Type:{go_quote(str(value.get('type', '')))}}}"
    return f"{type_name}{{...}}"


def _struct_invalid(path: str, type_name: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {_go_struct(type_name, value)}: "
                 f"{detail}", path)


# -- FlowSchema ----------------------------------------------------------------------------


def _subject_causes(path: str, subject: dict) -> list[Cause]:
    kind = subject.get("kind")
    members = {"ServiceAccount": "serviceAccount", "User": "user", "Group": "group"}
    if kind not in members:
        return [not_supported(f"{path}.kind", kind or "", SUBJECT_KINDS)]
    causes: list[Cause] = []
    member = members[kind]
    value = subject.get(member)
    if value is None:
        causes.append(required(f"{path}.{member}",
                               f"{member} is required when subject kind is '{kind}'"))
    elif kind == "ServiceAccount":
        name, namespace = value.get("name") or "", value.get("namespace") or ""
        if not name:
            causes.append(required(f"{path}.serviceAccount.name"))
        elif name != "*":
            causes += [invalid(f"{path}.serviceAccount.name", name, e)
                       for e in dns1123_subdomain_errors(name)]
        if namespace:
            causes += [invalid(f"{path}.serviceAccount.namespace", namespace, e)
                       for e in dns1123_label_errors(namespace)]
        else:
            causes.append(required(f"{path}.serviceAccount.namespace",
                                   "must specify namespace for service account"))
    elif not value.get("name"):
        causes.append(required(f"{path}.{member}.name"))
    for other, other_kind in (("user", "User"), ("group", "Group"),
                              ("serviceAccount", "ServiceAccount")):
        if other != member and subject.get(other) is not None:
            causes.append(forbidden(f"{path}.{other}", f"{other} is forbidden when subject "
                                    f"kind is not '{other_kind}'"))
    return causes


def _verbs_causes(path: str, verbs: list[str]) -> list[Cause]:
    if not verbs:
        return [required(path, "verbs must contain at least one value")]
    if "*" in verbs:
        if len(verbs) > 1:
            return [invalid(path, verbs, "if '*' is present, must not specify other verbs")]
        return []
    if not set(verbs) <= set(VERBS):
        return [not_supported(path, verbs, VERBS)]
    return []


def _url_path_cause(path: str, url: str) -> Cause | None:
    """ValidateNonResourceURLPath."""
    if not url:
        return invalid(path, url, "must not be empty")
    if url == "/":
        return None
    if not url.startswith("/"):
        return invalid(path, url, "must start with slash")
    if " " in url:
        return invalid(path, url, "must not contain white-space")
    if "//" in url:
        return invalid(path, url, "must not contain double slash")
    stars = url.count("*")
    if stars > 1 or (stars == 1 and url[-2:] != "/*"):
        return invalid(path, url, "wildcard can only do suffix matching")
    return None


def _listed_causes(path: str, values: list, missing: str, what: str) -> list[Cause]:
    """A rule's list: required (``missing`` says so), and '*' only on its own."""
    if not values:
        return [required(path, missing)]
    if len(values) > 1 and "*" in values:
        return [invalid(path, values, f"if '*' is present, must not specify other {what}")]
    return []


def _resource_rule_causes(path: str, rule: dict) -> list[Cause]:
    causes = _verbs_causes(f"{path}.verbs", rule.get("verbs") or [])
    causes += _listed_causes(f"{path}.apiGroups", rule.get("apiGroups") or [],
                             "resource rules must supply at least one api group", "api groups")
    causes += _listed_causes(f"{path}.resources", rule.get("resources") or [],
                             "resource rules must supply at least one resource", "resources")
    namespaces = rule.get("namespaces") or []
    if not namespaces and not rule.get("clusterScope"):
        causes.append(required(f"{path}.namespaces", "resource rules that are not cluster "
                               "scoped must supply at least one namespace"))
    elif "*" in namespaces:
        if len(namespaces) > 1:
            causes.append(invalid(f"{path}.namespaces", namespaces,
                                  "if '*' is present, must not specify other namespaces"))
    else:
        for i, namespace in enumerate(namespaces):
            causes += [invalid(f"{path}.namespaces[{i}]", namespace, NS_INTRO + e)
                       for e in dns1123_label_errors(namespace)]
    return causes


def _non_resource_rule_causes(path: str, rule: dict) -> list[Cause]:
    causes = _verbs_causes(f"{path}.verbs", rule.get("verbs") or [])
    urls = rule.get("nonResourceURLs") or []
    causes += _listed_causes(f"{path}.nonResourceURLs", urls,
                             "nonResourceURLs must contain at least one value",
                             "non-resource URLs")
    if urls and "*" not in urls:
        for i, url in enumerate(urls):
            if (cause := _url_path_cause(f"{path}.nonResourceURLs[{i}]", url)) is not None:
                causes.append(cause)
    return causes


def _rules_causes(path: str, rule: dict) -> list[Cause]:
    """ValidateFlowSchemaPolicyRulesWithSubjects."""
    causes: list[Cause] = []
    subjects = rule.get("subjects") or []
    if subjects:
        for i, subject in enumerate(subjects):
            causes += _subject_causes(f"{path}.subjects[{i}]", subject or {})
    else:
        causes.append(required(f"{path}.subjects", "subjects must contain at least one value"))
    resource_rules = rule.get("resourceRules") or []
    non_resource_rules = rule.get("nonResourceRules") or []
    if not resource_rules and not non_resource_rules:
        causes.append(required(path, "at least one of resourceRules and nonResourceRules has "
                               "to be non-empty"))
    for i, item in enumerate(resource_rules):
        causes += _resource_rule_causes(f"{path}.resourceRules[{i}]", item or {})
    for i, item in enumerate(non_resource_rules):
        causes += _non_resource_rule_causes(f"{path}.nonResourceRules[{i}]", item or {})
    return causes


def flow_schema_spec_causes(name: str, spec: dict) -> list[Cause]:
    """ValidateFlowSchemaSpec, then the fixed spec of a mandatory FlowSchema."""
    causes: list[Cause] = []
    precedence = spec.get("matchingPrecedence") or 0
    path = "spec.matchingPrecedence"
    if precedence <= 0:
        causes.append(invalid(path, precedence, "must be a positive value"))
    if precedence > MAX_MATCHING_PRECEDENCE:
        causes.append(invalid(path, precedence,
                              f"must not be greater than {MAX_MATCHING_PRECEDENCE}"))
    if precedence == 1 and name != "exempt":
        causes.append(invalid(path, precedence,
                              "only the schema named 'exempt' may have matchingPrecedence 1"))
    method = spec.get("distinguisherMethod")
    if method is not None and (method or {}).get("type") not in DISTINGUISHER_METHODS:
        listed = ", ".join(go_quote(v) for v in DISTINGUISHER_METHODS)
        causes.append(Cause("FieldValueNotSupported", "Unsupported value: "
                            f"{_go_struct('flowcontrol.FlowDistinguisherMethod', method)}: "
                            f"supported values: {listed}", "spec.distinguisherMethod.type"))
    level = (spec.get("priorityLevelConfiguration") or {}).get("name") or ""
    if level:
        causes += [invalid("spec.priorityLevelConfiguration.name", level, e)
                   for e in dns1123_subdomain_errors(level)]
    else:
        causes.append(required("spec.priorityLevelConfiguration.name",
                               "must reference a priority level"))
    for i, rule in enumerate(spec.get("rules") or []):
        causes += _rules_causes(f"spec.rules[{i}]", rule or {})
    fixed = _MANDATORY_FS.get(name)
    if fixed is not None and semantic(spec) != semantic(fixed):
        causes.append(_struct_invalid("spec", "flowcontrol.FlowSchemaSpec", spec,
                                      f"spec of '{name}' must equal the fixed value"))
    return causes


def _conditions_causes(obj: Object) -> list[Cause]:
    """Validate...Status: condition types present and unique."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, condition in enumerate((obj.get("status") or {}).get("conditions") or []):
        kind = (condition or {}).get("type") or ""
        path = f"status.conditions[{i}].type"
        if kind in seen:
            causes.append(duplicate(path, kind))
        seen.add(kind)
        if not kind:
            causes.append(required(path, "must not be empty"))
    return causes


class FlowSchemaStrategy(Strategy):
    has_status = True
    has_generation = True

    def prepare_for_create(self, obj: Object) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and not spec.get("matchingPrecedence"):
            spec["matchingPrecedence"] = 1000

    def prepare_for_update(self, new: Object, old: Object) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Object) -> list[Cause]:
        name = (obj.get("metadata") or {}).get("name") or ""
        return flow_schema_spec_causes(name, obj.get("spec") or {}) + _conditions_causes(obj)


# -- PriorityLevelConfiguration ---------------------------------------------------------------


def required_entropy_bits(deck: int, hand: int) -> int:
    """shufflesharding.RequiredEntropyBits: ceil(log2(deck) * hand)."""
    return math.ceil(math.log2(deck) * hand)


def _queuing_causes(path: str, queuing: dict) -> list[Cause]:
    causes: list[Cause] = []
    limit = queuing.get("queueLengthLimit") or 0
    queues = queuing.get("queues") or 0
    hand = queuing.get("handSize") or 0
    if limit <= 0:
        causes.append(invalid(f"{path}.queueLengthLimit", limit, "must be positive"))
    if queues <= 0:
        causes.append(invalid(f"{path}.queues", queues, "must be positive"))
    elif queues > MAX_QUEUES:
        causes.append(invalid(f"{path}.queues", queues, f"must not be greater than {MAX_QUEUES}"))
    if hand <= 0:
        causes.append(invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        causes.append(invalid(f"{path}.handSize", hand,
                              f"should not be greater than queues ({queues})"))
    elif required_entropy_bits(queues, hand) > MAX_HASH_BITS:
        causes.append(invalid(f"{path}.handSize", hand, f"required entropy bits of deckSize "
                              f"{queues} and handSize {hand} should not be greater than "
                              f"{MAX_HASH_BITS}"))
    return causes


def _limit_response_causes(path: str, response: dict) -> list[Cause]:
    kind, queuing = response.get("type"), response.get("queuing")
    if kind == "Reject":
        if queuing is not None:
            return [forbidden(f"{path}.queuing",
                              "must be nil if limited.limitResponse.type is not Limited")]
        return []
    if kind == "Queue":
        if queuing is None:
            return [required(f"{path}.queuing",
                             "must not be empty if limited.limitResponse.type is Limited")]
        return _queuing_causes(f"{path}.queuing", queuing)
    return [not_supported(f"{path}.type", kind or "", LIMIT_RESPONSES)]


def _limited_causes(path: str, limited: dict) -> list[Cause]:
    causes: list[Cause] = []
    shares = limited.get("nominalConcurrencyShares") or 0
    if shares < 0:
        causes.append(invalid(f"{path}.nominalConcurrencyShares", shares,
                              "must be a non-negative integer"))
    causes += _limit_response_causes(f"{path}.limitResponse", limited.get("limitResponse") or {})
    lendable = limited.get("lendablePercent")
    if lendable is not None and not 0 <= lendable <= 100:
        causes.append(invalid(f"{path}.lendablePercent", lendable,
                              "must be between 0 and 100, inclusive"))
    borrowing = limited.get("borrowingLimitPercent")
    if borrowing is not None and borrowing < 0:
        causes.append(invalid(f"{path}.borrowingLimitPercent", borrowing,
                              "if specified, must be a non-negative integer"))
    return causes


def _exempt_causes(path: str, exempt: dict) -> list[Cause]:
    causes: list[Cause] = []
    shares = exempt.get("nominalConcurrencyShares")
    if shares is not None and shares < 0:
        causes.append(invalid(f"{path}.nominalConcurrencyShares", shares,
                              "must be a non-negative integer"))
    lendable = exempt.get("lendablePercent")
    if lendable is not None and not 0 <= lendable <= 100:
        causes.append(invalid(f"{path}.lendablePercent", lendable,
                              "must be between 0 and 100, inclusive"))
    return causes


def priority_level_spec_causes(name: str, spec: dict) -> list[Cause]:
    """ValidatePriorityLevelConfigurationSpec (v1), then the fixed spec of a mandatory
    level (of 'exempt', everything but spec.exempt)."""
    causes: list[Cause] = []
    kind = spec.get("type") or ""
    if (name == "exempt") != (kind == "Exempt"):
        causes.append(invalid("spec.type", kind,
                              "type must be 'Exempt' if and only if name is 'exempt'"))
    if kind == "Exempt":
        if spec.get("limited") is not None:
            causes.append(forbidden("spec.limited", "must be nil if the type is not Limited"))
        if spec.get("exempt") is not None:
            causes += _exempt_causes("spec.exempt", spec["exempt"])
    elif kind == "Limited":
        if spec.get("exempt") is not None:
            causes.append(forbidden("spec.exempt", "must be nil if the type is Limited"))
        if spec.get("limited") is None:
            causes.append(required("spec.limited", "must not be empty when type is Limited"))
        else:
            causes += _limited_causes("spec.limited", spec["limited"])
    else:
        causes.append(not_supported("spec.type", kind, ENABLEMENTS))
    fixed = _MANDATORY_PL.get(name)
    if fixed is not None:
        have, want = dict(spec), dict(fixed)
        detail = f"spec of '{name}' must equal the fixed value"
        if name == "exempt":
            have["exempt"] = want.get("exempt")
            detail = f"spec of '{name}' except the 'spec.exempt' field must equal the fixed value"
        if semantic(have) != semantic(want):
            causes.append(_struct_invalid("spec", "flowcontrol.PriorityLevelConfigurationSpec",
                                          spec, detail))
    return causes


def default_priority_level(spec: dict) -> None:
    """SetDefaults for v1 priority levels."""
    exempt = spec.get("exempt")
    if isinstance(exempt, dict):
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)
    limited = spec.get("limited")
    if isinstance(limited, dict):
        if limited.get("nominalConcurrencyShares") is None:
            limited["nominalConcurrencyShares"] = 30
        limited.setdefault("lendablePercent", 0)
        queuing = (limited.get("limitResponse") or {}).get("queuing")
        if isinstance(queuing, dict):
            for key, value in (("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)):
                if not queuing.get(key):
                    queuing[key] = value


class PriorityLevelStrategy(Strategy):
    has_status = True
    has_generation = True

    def prepare_for_create(self, obj: Object) -> None:
        if isinstance(obj.get("spec"), dict):
            default_priority_level(obj["spec"])

    def prepare_for_update(self, new: Object, old: Object) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Object) -> list[Cause]:
        name = (obj.get("metadata") or {}).get("name") or ""
        return priority_level_spec_causes(name, obj.get("spec") or {}) + _conditions_causes(obj)


# -- tables (kube's printers) -----------------------------------------------------------------


def _spec(obj: Object) -> dict:
    return obj.get("spec") or {}


def _dangling(obj: Object) -> str:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Dangling":
            return condition.get("status", "")
    return "?"


def _distinguisher(obj: Object) -> str:
    method = _spec(obj).get("distinguisherMethod")
    return method.get("type", "") if isinstance(method, dict) else "<none>"


def _queuing(obj: Object, field: str) -> Any:
    limited = _spec(obj).get("limited")
    if not isinstance(limited, dict):
        return "<none>"
    queuing = (limited.get("limitResponse") or {}).get("queuing")
    return queuing.get(field, 0) if isinstance(queuing, dict) else "<none>"


def _shares(obj: Object) -> Any:
    limited = _spec(obj).get("limited")
    if not isinstance(limited, dict):
        return "<none>"
    return limited.get("nominalConcurrencyShares") or 0


FLOW_SCHEMAS = ResourceDef(
    group=GROUP, version="v1", kind="FlowSchema", plural="flowschemas", singular="flowschema",
    namespaced=False, strategy=FlowSchemaStrategy(),
    columns=(
        NAME,
        Column("PriorityLevel", "string", "`name` is the name of the priority level "
               "configuration being referenced Required.",
               lambda o: (_spec(o).get("priorityLevelConfiguration") or {}).get("name", "")),
        Column("MatchingPrecedence", "string", "`matchingPrecedence` is used to choose among "
               "the FlowSchemas that match a given request. The chosen FlowSchema is among "
               "those with the numerically lowest (which we take to be logically highest) "
               "MatchingPrecedence.  Each MatchingPrecedence value must be ranged in "
               "[1,10000]. Note that if the precedence is not specified, it will be set to "
               "1000 as default.", lambda o: _spec(o).get("matchingPrecedence", 0)),
        Column("DistinguisherMethod", "string", "`distinguisherMethod` defines how to "
               "compute the flow distinguisher for requests that match this schema. `nil` "
               "specifies that the distinguisher is disabled and thus will always be the "
               "empty string.", _distinguisher),
        AGE,
        Column("MissingPL", "string", "references a broken or non-existent "
               "PriorityLevelConfiguration", _dangling),
    ),
    schema="io.k8s.api.flowcontrol.v1.FlowSchema", subresources=("status",),
)
PRIORITY_LEVEL_CONFIGURATIONS = ResourceDef(
    group=GROUP, version="v1", kind="PriorityLevelConfiguration",
    plural="prioritylevelconfigurations", singular="prioritylevelconfiguration",
    namespaced=False, strategy=PriorityLevelStrategy(),
    columns=(
        NAME,
        Column("Type", "string", "`type` indicates whether this priority level is subject "
               "to limitation on request execution.  A value of `\"Exempt\"` means that "
               "requests of this priority level are not subject to a limit (and thus are "
               "never queued) and do not detract from the capacity made available to other "
               "priority levels.  A value of `\"Limited\"` means that (a) requests of this "
               "priority level _are_ subject to limits and (b) some of the server's limited "
               "capacity is made available exclusively to this priority level. Required.",
               lambda o: _spec(o).get("type", "")),
        Column("NominalConcurrencyShares", "string", "`nominalConcurrencyShares` (NCS) "
               "contributes to the computation of the NominalConcurrencyLimit (NominalCL) "
               "of this level.", _shares),
        Column("Queues", "string", "`queues` is the number of queues for this priority "
               "level.", lambda o: _queuing(o, "queues")),
        Column("HandSize", "string", "`handSize` is a small positive number that configures "
               "the shuffle sharding of requests into queues.",
               lambda o: _queuing(o, "handSize")),
        Column("QueueLengthLimit", "string", "`queueLengthLimit` is the maximum number of "
               "requests allowed to be waiting in a given queue of this priority level at a "
               "time.", lambda o: _queuing(o, "queueLengthLimit")),
        AGE,
    ),
    schema="io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration", subresources=("status",),
)
