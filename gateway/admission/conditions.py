"""A webhook's matchConditions: CEL expressions (cel-python) that must all hold for it to be called.

Each expression sees ``object``, ``oldObject`` (null when there is none) and ``request`` (the
AdmissionRequest, without the objects). One that is false skips the webhook; one that cannot be
evaluated is an error the webhook's failurePolicy decides on. Expressions are compiled once, when
the configuration is validated and again on first use, and kept.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import celpy

Object = dict[str, Any]


class ConditionError(Exception):
    """An expression failed to evaluate, or did not give a boolean."""


_ENVIRONMENT = celpy.Environment()


@lru_cache(maxsize=1024)
def _program(expression: str) -> Any:
    return _ENVIRONMENT.program(_ENVIRONMENT.compile(expression))


def compile_error(expression: str) -> str:
    """Why ``expression`` does not compile ("" when it does)."""
    try:
        _program(expression)
    except celpy.CELParseError as err:
        cause = str(err.__context__ or "").split(".", 1)[0] or "syntax error"
        return f"ERROR: <input>:{err.line}:{err.column}: {cause}"
    return ""


def conditions_hold(conditions: list[Object], obj: Object | None, old: Object | None,
                    request: Object) -> bool:
    """Whether every condition is true (ConditionError when one cannot be evaluated)."""
    if not conditions:
        return True
    activation = {"object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
                  "request": celpy.json_to_cel(request)}
    for condition in conditions:
        name = condition.get("name", "")
        try:
            result = _program(condition.get("expression", "")).evaluate(activation)
        except (celpy.CELParseError, celpy.CELEvalError) as err:
            raise ConditionError(f"expression '{name}' resulted in error: {err}") from None
        if isinstance(result, celpy.CELEvalError):
            raise ConditionError(f"expression '{name}' resulted in error: {result}")
        if not isinstance(result, bool | celpy.celtypes.BoolType):
            raise ConditionError(f"expression '{name}' did not give a boolean")
        if not result:
            return False
    return True
