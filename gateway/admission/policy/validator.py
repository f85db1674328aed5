"""One policy evaluated for one write and one param (kube's validating/validator.go): its
matchConditions, then every validation (with its message), then its audit annotations, as
decisions the plugin acts on through the binding's validationActions.

An expression that fails is decided by the failurePolicy: ``Fail`` denies with the error,
``Ignore`` admits. A failed validation is denied with, in order, its messageExpression's
string (trimmed; none when empty, multi-line or over 5 KiB), its message, or ``failed
expression: <expression>``, and its reason (Invalid unless given).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.admission.conditions import ConditionError, evaluate
from gateway.admission.expressions import Activation
from gateway.admission.policy.compiled import CompiledPolicy, Validation

ADMIT, DENY = "admit", "deny"
PUBLISH, EXCLUDE, ERROR = "publish", "exclude", "error"
MAX_MESSAGE_BYTES = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes


@dataclass
class Decision:
    action: str
    message: str = ""
    reason: str = ""
    #: the evaluation failed (an error, not a false validation)
    errored: bool = False


@dataclass
class AnnotationResult:
    key: str
    action: str
    value: str = ""
    error: str = ""


@dataclass
class Result:
    decisions: list[Decision] = field(default_factory=list)
    annotations: list[AnnotationResult] = field(default_factory=list)


async def validate(policy: CompiledPolicy, activation: Activation) -> Result:
    on_error = ADMIT if policy.failure_policy == "Ignore" else DENY
    if policy.match_conditions:
        try:
            match = await evaluate(policy.match_conditions, activation)
        except ConditionError as err:
            return Result([Decision(on_error, str(err), errored=True)])
        if not match.matches:
            return Result()
    result = Result()
    for validation in policy.validations:
        result.decisions.append(await _decide(validation, activation, on_error))
    for annotation in policy.audit_annotations:
        outcome = await activation.evaluate(annotation.compiled)
        if outcome.error:
            action = EXCLUDE if on_error == ADMIT else ERROR
            result.annotations.append(AnnotationResult(annotation.key, action,
                                                       error=outcome.error))
        elif isinstance(outcome.value, str) and outcome.value.strip():
            result.annotations.append(AnnotationResult(annotation.key, PUBLISH,
                                                       outcome.value.strip()))
        else:  # null, or an empty string
            result.annotations.append(AnnotationResult(annotation.key, EXCLUDE))
    return result


async def _decide(validation: Validation, activation: Activation, on_error: str) -> Decision:
    outcome = await activation.evaluate(validation.compiled)
    if outcome.error:
        return Decision(on_error, outcome.error, errored=True)
    if outcome.value is True:
        return Decision(ADMIT)
    message = ""
    if validation.message is not None:
        said = await activation.evaluate(validation.message)
        if not said.error and isinstance(said.value, str):
            message = said.value.strip()
            if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
                message = ""
    source = validation.source
    if not message and source.get("message"):
        message = source["message"].strip()
    if not message:
        message = f"failed expression: {source.get('expression', '').strip()}"
    return Decision(DENY, message, source.get("reason") or "Invalid")
