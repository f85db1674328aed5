"""matchConditions: CEL expressions that must all hold for a webhook to be called, or for a
ValidatingAdmissionPolicy to be evaluated (kube's admission/plugin/webhook/matchconditions).

Every condition is evaluated; one that is false means no match, whatever the others gave;
otherwise any that could not be evaluated make an error (kube's aggregate of them) that the
failurePolicy decides on. Webhooks' conditions see ``object``, ``oldObject``, ``request`` and
the ``authorizer``; a policy's also its ``params`` and variables (see gateway.admission.policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gateway.admission.expressions import BOOL, Activation, Compiled, Compiler, Options

Object = dict[str, Any]
WEBHOOK_OPTIONS = Options(params=False, authorizer=True)


class ConditionError(Exception):
    """A condition could not be evaluated."""


@dataclass
class Match:
    """Whether the conditions hold, and which one did not."""

    matches: bool
    failed: str = ""


@lru_cache(maxsize=1024)
def webhook_condition(expression: str) -> Compiled:
    """A webhook's condition, compiled once."""
    return Compiler().compile(expression, WEBHOOK_OPTIONS, BOOL)


def compile_error(expression: str) -> str:
    """Why a webhook's condition is refused when its configuration is written ("")."""
    return webhook_condition(expression).error


async def evaluate(conditions: list[tuple[str, Compiled]], activation: Activation) -> Match:
    """kube's Matcher.Match over (name, compiled) conditions; ConditionError for errors."""
    errors: list[str] = []
    for name, compiled in conditions:
        result = await activation.evaluate(compiled)
        if result.error:
            errors.append(result.error)
        elif result.value is False:
            return Match(False, name)
    if errors:
        raise ConditionError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return Match(True)
