"""admissionregistration.k8s.io/v1 validating admission policies and their bindings: stored,
defaulted, validated and served, for clients and for the informers of extension API servers
(k8s.io/apiserver's ValidatingAdmissionPolicy admission plugin lists and watches both before
it admits anything).

Checks follow kube's ValidateValidatingAdmissionPolicy / ...Binding with its messages; CEL
expressions are compiled as the policy plugin compiles them (gateway.admission.expressions:
typed ``request``, ``params`` only with a paramKind, variables declared in order, return
types checked). The policies are enforced by gateway.admission.policy.
"""

from __future__ import annotations

import re

from gateway.admission.expressions import BOOL, STRING, STRING_OR_NULL, Compiler, Options
from gateway.apimachinery.labels import qualified_name_errors
from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    dns1035_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    path_segment_causes,
    required,
)

GROUP = "admissionregistration.k8s.io"
#: sets.NewString(...).List(): the supported values sorted.
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge")
NOT_FOUND_ACTIONS = ("Deny", "Allow")  # in kube's order, not sorted
MAX_AUDIT_ANNOTATIONS = 20
MAX_VALUE_EXPRESSION = 5 * 1024
MAX_MATCH_CONDITIONS = 64
_CEL_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_CEL_RESERVED = frozenset((
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while"))


# -- defaults (SetDefaults_ValidatingAdmissionPolicySpec, _MatchResources, _Rule) ------------


def default_match_resources(match: dict | None) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for field in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(field) or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


# -- shared checks ------------------------------------------------------------------------


def _has_wildcard(values: list) -> bool:
    return "*" in values


def _resources_causes(path: str, resources: list[str]) -> list[Cause]:
    """validateResources (subresources allowed)."""
    causes: list[Cause] = []
    if not resources:
        causes.append(required(path))
    with_wild_sub: set[str] = set()
    wild_res_subs: set[str] = set()
    double = single = plain = False
    for i, item in enumerate(resources):
        if item == "":
            causes.append(required(f"{path}[{i}]"))
            continue
        double = double or item == "*/*"
        single = single or item == "*"
        if "/" not in item:
            plain = item != "*"
            continue
        res, sub = item.split("/", 1)
        if res in with_wild_sub:
            causes.append(invalid(f"{path}[{i}]", item,
                                  f"if '{res}/*' is present, must not specify {item}"))
        if sub in wild_res_subs:
            causes.append(invalid(f"{path}[{i}]", item,
                                  f"if '*/{sub}' is present, must not specify {item}"))
        if sub == "*":
            with_wild_sub.add(res)
        if res == "*":
            wild_res_subs.add(sub)
    if len(resources) > 1 and double:
        causes.append(invalid(path, resources, "if '*/*' is present, must not specify other "
                              "resources"))
    if single and plain:
        causes.append(invalid(path, resources, "if '*' is present, must not specify other "
                              "resources without subresources"))
    return causes


def rule_with_operations_causes(path: str, rule: dict) -> list[Cause]:
    """validateRuleWithOperations, then validateRule, with kube's messages."""
    causes: list[Cause] = []
    operations = rule.get("operations") or []
    if not operations:
        causes.append(required(f"{path}.operations"))
    if len(operations) > 1 and _has_wildcard(operations):
        causes.append(invalid(f"{path}.operations", operations,
                              "if '*' is present, must not specify other operations"))
    for i, operation in enumerate(operations):
        if operation not in OPERATIONS:
            causes.append(not_supported(f"{path}.operations[{i}]", operation, OPERATIONS))
    groups = rule.get("apiGroups") or []
    if not groups:
        causes.append(required(f"{path}.apiGroups"))
    if len(groups) > 1 and _has_wildcard(groups):
        causes.append(invalid(f"{path}.apiGroups", groups,
                              "if '*' is present, must not specify other API groups"))
    versions = rule.get("apiVersions") or []
    if not versions:
        causes.append(required(f"{path}.apiVersions"))
    if len(versions) > 1 and _has_wildcard(versions):
        causes.append(invalid(f"{path}.apiVersions", versions,
                              "if '*' is present, must not specify other API versions"))
    causes += [required(f"{path}.apiVersions[{i}]") for i, v in enumerate(versions) if v == ""]
    causes += _resources_causes(f"{path}.resources", rule.get("resources") or [])
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        causes.append(not_supported(f"{path}.scope", scope, SCOPES))
    return causes


def _named_rule_causes(path: str, rule: dict) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, name in enumerate(rule.get("resourceNames") or []):
        causes += path_segment_causes(name, f"{path}.resourceNames[{i}]")
        if name in seen:
            causes.append(duplicate(f"{path}.resourceNames[{i}]", name))
        seen.add(name)
    return causes + rule_with_operations_causes(path, rule)


def match_resources_causes(path: str, match: dict | None) -> list[Cause]:
    """validateMatchResources (after defaulting, so the defaulted fields are present)."""
    if match is None:
        return []
    causes: list[Cause] = []
    policy = match.get("matchPolicy")
    if policy is None:
        causes.append(required(f"{path}.matchPolicy"))
    elif policy not in MATCH_POLICIES:
        causes.append(not_supported(f"{path}.matchPolicy", policy, MATCH_POLICIES))
    for field in ("namespaceSelector", "objectSelector"):
        if match.get(field) is None:
            causes.append(required(f"{path}.{field}"))
    for field in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(field) or []):
            causes += _named_rule_causes(f"{path}.{field}[{i}]", rule or {})
    return causes


def _compile_causes(path: str, expression: str, compiler: Compiler, options: Options,
                    returns: tuple[str, ...] | None, *, variable: str = "") -> list[Cause]:
    """convertCELErrorToValidationError of one expression's compilation."""
    if variable:
        error = compiler.add_variable(variable, expression, options).error
    else:
        error = compiler.compile(expression, options, returns).error
    return [invalid(path, expression, error)] if error else []


def match_condition_causes(path: str, conditions: list[dict],
                           params: bool = False) -> list[Cause]:
    """validateMatchConditions: at most 64, each with an expression and a qualified name,
    names unique."""
    causes: list[Cause] = []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(conditions)}: must have at "
                            f"most {MAX_MATCH_CONDITIONS} items", path))
    names: set[str] = set()
    for i, condition in enumerate(conditions):
        item = f"{path}[{i}]"
        expression = (condition.get("expression") or "").strip()
        if not expression:
            causes.append(required(f"{item}.expression"))
        else:
            causes += _compile_causes(f"{item}.expression", expression, Compiler(),
                                      Options(params=params), BOOL)
        name = condition.get("name") or ""
        if not name:
            causes.append(required(f"{item}.name"))
        else:
            causes += [invalid(f"{item}.name", name, e) for e in qualified_name_errors(name)]
            if name in names:
                causes.append(duplicate(f"{item}.name", name))
            names.add(name)
    return causes


# -- ValidatingAdmissionPolicy ----------------------------------------------------------------


def _param_kind_causes(path: str, kind: dict) -> list[Cause]:
    causes: list[Cause] = []
    api_version = kind.get("apiVersion") or ""
    if not api_version:
        causes.append(required(f"{path}.apiVersion"))
    elif api_version.count("/") > 1:
        causes.append(invalid(f"{path}.apiVersion", api_version,
                              f"unexpected GroupVersion string: {api_version}"))
    elif api_version != "/":
        group, _, version = api_version.rpartition("/")
        if group and (errors := dns1123_subdomain_errors(group)):
            causes.append(invalid(f"{path}.apiVersion", group, ",".join(errors)))
        if not version:
            causes.append(invalid(f"{path}.apiVersion", api_version,
                                  "version must be specified"))
        elif errors := dns1035_label_errors(version):
            causes.append(invalid(f"{path}.apiVersion", version, ",".join(errors)))
    kind_name = kind.get("kind") or ""
    if not kind_name:
        causes.append(required(f"{path}.kind"))
    elif errors := dns1035_label_errors(kind_name.lower()):
        causes.append(invalid(f"{path}.kind", kind_name, "may have mixed case, but should "
                              "otherwise match: " + ",".join(errors)))
    return causes


def _variable_causes(path: str, variable: dict, compiler: Compiler,
                     options: Options) -> list[Cause]:
    causes: list[Cause] = []
    name = variable.get("name") or ""
    if not name.strip():
        causes.append(required(f"{path}.name", "name is not specified"))
    elif not _CEL_IDENT.fullmatch(name) or name in _CEL_RESERVED:
        causes.append(invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
    expression = variable.get("expression") or ""
    if not expression.strip():
        causes.append(required(f"{path}.expression", "expression is not specified"))
    else:
        causes += _compile_causes(f"{path}.expression", expression, compiler, options, None,
                                  variable=name)
    return causes


def _validation_causes(path: str, validation: dict, compiler: Compiler,
                       params: bool) -> list[Cause]:
    causes: list[Cause] = []
    expression = validation.get("expression") or ""
    if not expression.strip():
        causes.append(required(f"{path}.expression", "expression is not specified"))
    else:
        causes += _compile_causes(f"{path}.expression", expression, compiler,
                                  Options(params=params), BOOL)
    message_expression = validation.get("messageExpression") or ""
    if message_expression and not message_expression.strip():
        causes.append(invalid(f"{path}.messageExpression", message_expression,
                              "must be non-empty if specified"))
    elif message_expression.strip():
        causes += _compile_causes(f"{path}.messageExpression", message_expression, compiler,
                                  Options(params=params, authorizer=False), STRING)
    message = validation.get("message") or ""
    if message and not message.strip():
        causes.append(invalid(f"{path}.message", message,
                              "message must be non-empty if specified"))
    elif re.search(r"[\n\r]", message.strip()):
        causes.append(invalid(f"{path}.message", message,
                              "message must not contain line breaks"))
    reason = validation.get("reason")
    if reason is not None and reason not in REASONS:
        causes.append(not_supported(f"{path}.reason", reason, REASONS))
    return causes


def _audit_annotation_causes(path: str, policy_name: str, annotation: dict,
                             compiler: Compiler, params: bool) -> list[Cause]:
    causes: list[Cause] = []
    key = annotation.get("key") or ""
    if policy_name:
        qualified = f"{policy_name}/{key}"
        causes += [invalid(f"{path}.key", qualified, e) for e in qualified_name_errors(qualified)]
    else:
        causes.append(invalid(f"{path}.key", key, "requires metadata.name be non-empty"))
    value = (annotation.get("valueExpression") or "").strip()
    if not value:
        causes.append(required(f"{path}.valueExpression", "valueExpression is not specified"))
    elif len(value.encode()) > MAX_VALUE_EXPRESSION:
        causes.append(required(f"{path}.valueExpression",
                               f"must not exceed {MAX_VALUE_EXPRESSION} bytes in length"))
    elif error := compiler.compile(value, Options(params=params), STRING_OR_NULL).error:
        causes.append(invalid(f"{path}.valueExpression", annotation["valueExpression"], error))
    return causes


def policy_spec_causes(name: str, spec: dict) -> list[Cause]:
    """validateValidatingAdmissionPolicySpec, in kube's order."""
    causes: list[Cause] = []
    failure = spec.get("failurePolicy")
    if failure is None:
        causes.append(required("spec.failurePolicy"))
    elif failure not in FAILURE_POLICIES:
        causes.append(not_supported("spec.failurePolicy", failure, FAILURE_POLICIES))
    if isinstance(spec.get("paramKind"), dict):
        causes += _param_kind_causes("spec.paramKind", spec["paramKind"])
    constraints = spec.get("matchConstraints")
    if constraints is None:
        causes.append(required("spec.matchConstraints"))
    else:
        causes += match_resources_causes("spec.matchConstraints", constraints)
        if not constraints.get("resourceRules"):
            causes.append(required("spec.matchConstraints.resourceRules"))
    params = isinstance(spec.get("paramKind"), dict)
    causes += match_condition_causes("spec.matchConditions", spec.get("matchConditions") or [],
                                     params)
    compiler = Compiler(composited=True)  # variables declared, in order, for what follows
    for i, variable in enumerate(spec.get("variables") or []):
        causes += _variable_causes(f"spec.variables[{i}]", variable or {}, compiler,
                                   Options(params=params))
    validations = spec.get("validations") or []
    annotations = spec.get("auditAnnotations") or []
    if not validations and not annotations:
        detail = "validations or auditAnnotations must contain at least one item"
        causes += [required("spec.validations", detail),
                   required("spec.auditAnnotations", detail)]
        return causes
    for i, validation in enumerate(validations):
        causes += _validation_causes(f"spec.validations[{i}]", validation or {}, compiler,
                                     params)
    if len(annotations) > MAX_AUDIT_ANNOTATIONS:
        causes.append(Cause("FieldValueInvalid", "Invalid value: \"array\": must not have "
                            f"more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations",
                            "spec.auditAnnotations"))
    keys: set[str] = set()
    for i, annotation in enumerate(annotations):
        annotation = annotation or {}
        causes += _audit_annotation_causes(f"spec.auditAnnotations[{i}]", name, annotation,
                                           compiler, params)
        key = annotation.get("key") or ""
        if key in keys:
            causes.append(duplicate(f"spec.auditAnnotations[{i}].key", key))
        keys.add(key)
    return causes


def _status_causes(obj: Object) -> list[Cause]:
    """validateValidatingAdmissionPolicyStatus: each type-checking warning needs a warning
    and a field reference."""
    causes: list[Cause] = []
    checking = (obj.get("status") or {}).get("typeChecking") or {}
    for i, warning in enumerate(checking.get("expressionWarnings") or []):
        path = f"status.typeChecking.expressionWarnings[{i}]"
        if not warning.get("warning"):
            causes.append(required(f"{path}.warning"))
        if not (warning.get("fieldRef") or "").strip():
            causes.append(required(f"{path}.fieldRef"))
    return causes


class PolicyStrategy(Strategy):
    """kube's validatingadmissionpolicy strategy: generation bumped on spec changes, status
    only through /status."""

    has_generation = True
    has_status = True

    def prepare_for_create(self, obj: Object) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            spec.setdefault("failurePolicy", "Fail")
            default_match_resources(spec.get("matchConstraints"))

    def prepare_for_update(self, new: Object, old: Object) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Object) -> list[Cause]:
        name = (obj.get("metadata") or {}).get("name") or ""
        return policy_spec_causes(name, obj.get("spec") or {})

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return self.validate(new) + _status_causes(new)


# -- ValidatingAdmissionPolicyBinding ---------------------------------------------------------


def _param_ref_causes(path: str, ref: dict | None) -> list[Cause]:
    if ref is None:
        return []
    causes: list[Cause] = []
    name, selector = ref.get("name") or "", ref.get("selector")
    exclusive = "name and selector are mutually exclusive"
    if name:
        causes += path_segment_causes(name, f"{path}.name")
        if selector is not None:
            causes.append(forbidden(f"{path}.name", exclusive))
    if selector is not None and name:
        causes.append(forbidden(f"{path}.selector", exclusive))
    if not name and selector is None:
        causes.append(required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        causes.append(required(f"{path}.parameterNotFoundAction"))
    elif action not in NOT_FOUND_ACTIONS:
        causes.append(not_supported(f"{path}.parameterNotFoundAction", action,
                                    NOT_FOUND_ACTIONS))
    return causes


def _validation_action_causes(path: str, actions: list[str]) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in VALIDATION_ACTIONS:
            causes.append(not_supported(f"{path}[{i}]", action, VALIDATION_ACTIONS))
        if action in seen:
            causes.append(duplicate(f"{path}[{i}]", action))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        causes.append(invalid(path, actions, "must not contain both Deny and Warn (repeating "
                              "the same validation failure information in the API response "
                              "and headers serves no purpose)"))
    if not seen:
        causes.append(required(path, "at least one validation action is required"))
    return causes


def binding_spec_causes(spec: dict) -> list[Cause]:
    """validateValidatingAdmissionPolicyBindingSpec, in kube's order."""
    causes: list[Cause] = []
    policy = spec.get("policyName") or ""
    if not policy:
        causes.append(required("spec.policyName"))
    else:
        causes += [invalid("spec.policyName", policy, e)
                   for e in dns1123_subdomain_errors(policy)]
    causes += _param_ref_causes("spec.paramRef", spec.get("paramRef"))
    causes += match_resources_causes("spec.matchResources", spec.get("matchResources"))
    causes += _validation_action_causes("spec.validationActions",
                                        spec.get("validationActions") or [])
    return causes


class BindingStrategy(Strategy):
    has_generation = True

    def prepare_for_create(self, obj: Object) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_match_resources(spec.get("matchResources"))

    def prepare_for_update(self, new: Object, old: Object) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Object) -> list[Cause]:
        return binding_spec_causes(obj.get("spec") or {})


# -- tables (kube's printers) -----------------------------------------------------------------


def _validations(obj: Object) -> int:
    return len((obj.get("spec") or {}).get("validations") or [])


def _param_kind(obj: Object) -> str:
    kind = (obj.get("spec") or {}).get("paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


def _policy_name(obj: Object) -> str:
    return (obj.get("spec") or {}).get("policyName", "")


def _selector_string(selector: dict) -> str:
    """metav1.LabelSelector as LabelSelectorAsSelector(...).String() writes it: requirements
    sorted by key, joined by commas; an empty selector is the empty string."""
    parts: list[tuple[str, str]] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        parts.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or []:
        key, operator = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or []))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(operator, key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0]))


def _param_ref(obj: Object) -> str:
    ref = (obj.get("spec") or {}).get("paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    if ref.get("name"):
        namespace = ref.get("namespace") or ""
        return f"{namespace}/{ref['name']}" if namespace else f"*/{ref['name']}"
    if ref.get("selector") is not None:
        return _selector_string(ref["selector"])
    return "<unset>"


VALIDATING_ADMISSION_POLICIES = ResourceDef(
    group=GROUP, version="v1", kind="ValidatingAdmissionPolicy",
    plural="validatingadmissionpolicies", singular="validatingadmissionpolicy",
    namespaced=False, strategy=PolicyStrategy(), categories=("api-extensions",),
    columns=(NAME,
             Column("Validations", "integer", "Validations indicates the number of "
                    "validation rules defined in this configuration", _validations),
             Column("ParamKind", "string", "ParamKind specifies the kind of resources used "
                    "to parameterize this policy", _param_kind),
             AGE),
    schema="io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy",
    subresources=("status",),
)
VALIDATING_ADMISSION_POLICY_BINDINGS = ResourceDef(
    group=GROUP, version="v1", kind="ValidatingAdmissionPolicyBinding",
    plural="validatingadmissionpolicybindings", singular="validatingadmissionpolicybinding",
    namespaced=False, strategy=BindingStrategy(), categories=("api-extensions",),
    columns=(NAME,
             Column("PolicyName", "string", "PolicyName indicates the policy definition "
                    "which the policy binding binded to", _policy_name),
             Column("ParamRef", "string", "ParamRef indicates the param resource which sets "
                    "the configration param", _param_ref),
             AGE),
    schema="io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding",
)
