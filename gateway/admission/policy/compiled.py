"""A ValidatingAdmissionPolicy compiled once per version of it (kube's compilePolicy): its
variables in order, then its matchConditions, validations, messageExpressions and audit
annotations, each with the variables and options kube compiles it with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.admission.expressions import (
    BOOL,
    STRING,
    STRING_OR_NULL,
    Compiled,
    Compiler,
    Options,
)
from gateway.registry.admission import Object


@dataclass
class Validation:
    compiled: Compiled
    message: Compiled | None
    source: Object


@dataclass
class AuditAnnotation:
    key: str
    compiled: Compiled


@dataclass
class CompiledPolicy:
    """What the validator runs for every binding of one policy."""

    name: str
    failure_policy: str
    variables: dict[str, Compiled] = field(default_factory=dict)
    match_conditions: list[tuple[str, Compiled]] = field(default_factory=list)
    validations: list[Validation] = field(default_factory=list)
    audit_annotations: list[AuditAnnotation] = field(default_factory=list)


def compile_policy(policy: Object) -> CompiledPolicy:
    spec = policy.get("spec") or {}
    params = isinstance(spec.get("paramKind"), dict)
    with_authorizer = Options(params=params, authorizer=True)
    compiler = Compiler(composited=True)
    for variable in spec.get("variables") or []:
        compiler.add_variable(variable.get("name", ""), variable.get("expression", ""),
                              with_authorizer)
    compiled = CompiledPolicy(policy["metadata"]["name"], spec.get("failurePolicy") or "Fail",
                              dict(compiler.variables))
    for condition in spec.get("matchConditions") or []:
        compiled.match_conditions.append((condition.get("name", ""), compiler.compile(
            condition.get("expression", ""), with_authorizer, BOOL)))
    for validation in spec.get("validations") or []:
        message = None
        if validation.get("messageExpression"):
            message = compiler.compile(validation["messageExpression"],
                                       Options(params=params, authorizer=False), STRING)
        compiled.validations.append(Validation(
            compiler.compile(validation.get("expression", ""), with_authorizer, BOOL), message,
            validation))
    for annotation in spec.get("auditAnnotations") or []:
        value = compiler.compile(annotation.get("valueExpression", ""), with_authorizer,
                                 STRING_OR_NULL)
        compiled.audit_annotations.append(AuditAnnotation(annotation.get("key", ""), value))
    return compiled
