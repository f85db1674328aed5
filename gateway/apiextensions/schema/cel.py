"""CEL validation rules (x-kubernetes-validations) of custom resources, as kube-apiserver 1.32.

The library is cel-expr-python, Google's Python binding of cel-cpp (the CEL team's C++
implementation), chosen over the two candidates after trying all three on kube's rules:

- correctness: it type-checks, so a CRD gets kube's compile errors word for word ("undefined
  field 'x'", "found no matching overload for '_==_' applied to '(int, string)'", a rule that
  is not a bool), and parses what kube parses: optionals (``self.?x.orValue(1)``), the strings
  extension v2 (``format``, ``lowerAscii``, ``indexOf``), heterogeneous equality, int/uint kept
  apart, overflow errors. common-expression-language (Rust) has no checker and no ``.?``
  syntax; cel-python (pure Python) has neither, adds int + uint, and fails ``dyn(1) == 1.0``.
- safety: cel-cpp stops an evaluation after 10,000 comprehension iterations in all (fixed by
  the binding): a hard bound on one call, stricter than kube's PerCallLimit (1,000,000 cost
  units, some 300,000 iterations of a simple ``all``), reported with kube's "call cost exceeds
  limit" words. kube's per-object budget (RuntimeCELCostBudget) is kept in time: a call costs
  its run time in units of 100 ns (kube sizes PerCallLimit at about 0.1 s). Neither candidate
  bounds anything: the Rust one has no limit at all, and cel-python runs some 200 µs per
  iteration (a kube-sized budget would take minutes). Measured here on
  ``self.minReplicas <= self.replicas``: 5 µs with cel-expr-python, 65 µs with the Rust one,
  3 ms with cel-python (most of it converting the object).
- maintenance: it is the CEL project's own binding (cel-expr/cel-python), on the conformance
  suite; its checker's messages are cel-go's.

Not supported (yet): kube's compile-time cost estimation (StaticEstimatedCostLimit), the URL,
quantity, IP, CIDR and format libraries, list ``indexOf``/``lastIndexOf`` (cel-cpp's strings
extension owns the names), two-variable comprehensions, order-free equality of set and map
lists, RE2 syntax beyond Python's ``re`` in ``find``/``findAll``.

``compile_schema`` (cel_rules.py) compiles a CRD schema once; ``validate`` runs it against an
object (and the old one on update) as pkg/apiserver/schema/cel/validation.go does. The tree it
walks holds only the nodes with rules at or below them; a node converts to CEL values only the
fields its rules read (all of ``self`` when one uses it whole: ``self.all(...)``,
``size(self)``, ``self == oldSelf``), once, into one activation all its rules share, and paths
are spelled out only for an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.apiextensions.schema.cel_rules import (
    CompiledRules,
    Rule,
    compile_schema,
    runtime_env,
)
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.cel import library as lib
from gateway.cel.types import FieldView, to_cel

__all__ = ["PER_CALL_LIMIT", "RUNTIME_COST_BUDGET", "CompiledRules", "compile_schema",
           "validate"]

#: k8s.io/apiserver/pkg/apis/cel/config.go (the per-call limit stands as cel-cpp's iteration cap)
PER_CALL_LIMIT = 1_000_000
RUNTIME_COST_BUDGET = 10_000_000
MAX_MESSAGE_BYTES = 5 * 1024
#: one cost unit of run time: kube says PerCallLimit "gives roughly 0.1 second"
NANOS_PER_COST_UNIT = 100
OUT_OF_BUDGET = ("validation failed due to running out of cost budget, no further validation "
                 "rules will be run")
_COST_ERROR = "operation cancelled: actual cost limit exceeded"


def validate(compiled: CompiledRules, obj: Any, old: Any | None = None, path: str = "", *,
             ratchet: bool = False, warnings: list[str] | None = None,
             budget: int = RUNTIME_COST_BUDGET) -> list[Cause]:
    """Run every rule on obj (and old, for transition rules); the causes kube reports.

    ``ratchet`` is kube's CRDValidationRatcheting on an update of the main resource (on by
    default in 1.32, not for status): a failing rule that does not use oldSelf, on a value that
    did not change, becomes a warning (appended to ``warnings``) instead of an error.
    """
    run = _Run(budget, warnings)
    corr = _Ratchet(_Corr(obj, old, compiled.schema)) if ratchet and old is not None else _NONE
    return _validate(compiled, path, obj, old, corr, run)


class _Run:
    """The budget left, and where ratcheted errors go."""

    __slots__ = ("budget", "warnings")

    def __init__(self, budget: int, warnings: list[str] | None) -> None:
        self.budget, self.warnings = budget, warnings


#: Where a value is: a string, or (parent, name, in brackets) made into one only for an error.
_Path = str | tuple[Any, Any, bool]


def _text(path: _Path) -> str:
    if isinstance(path, str):
        return path
    parent, name, bracket = path
    base = _text(parent)
    return f"{base}[{name}]" if bracket else _child(base, name)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _validate(node: CompiledRules | None, path: _Path, obj: Any, old: Any, corr: _Ratchet,
              run: _Run) -> list[Cause]:
    """Nodes without rules below them are not in the tree (compile_schema leaves them out)."""
    if node is None or obj is None:
        return []
    errs = _expressions(node, path, obj, old, corr, run) if node.rules or node.init_error else []
    for sub in node.all_of:
        if run.budget < 0:
            return errs
        errs += _validate(sub, path, obj, old, _Ratchet(None, corr.parent), run)
    if run.budget < 0:
        return errs
    if isinstance(obj, list):
        if node.items:
            errs += _array(node, path, obj, old, corr, run)
    elif isinstance(obj, dict) and (node.properties or node.additional):
        errs += _map(node, path, obj, old, corr, run)
    return errs


def _map(node: CompiledRules, path: _Path, obj: dict, old: Any, corr: _Ratchet,
         run: _Run) -> list[Cause]:
    """validateMap: properties and additionalProperties, the old value by the same key."""
    errs: list[Cause] = []
    old_map = old if isinstance(old, dict) else {}
    if node.schema.get("x-kubernetes-map-type") not in (None, "granular", "atomic"):
        old_map = {}
    props, extra = node.properties, node.additional
    keys: Any = obj
    if extra is None and len(props) < len(obj):  # only the properties with rules, in obj's order
        keys = [k for k in props if k in obj]
        if len(keys) > 1:
            keys = [k for k in obj if k in props]
    for key in keys:
        value = obj[key]
        if extra is not None and run.budget >= 0:
            errs += _validate(extra, (path, key, True), value, old_map.get(key), corr.key(key),
                              run)
        sub = props.get(key)
        if sub is not None and run.budget >= 0:
            errs += _validate(sub, (path, key, False), value, old_map.get(key), corr.key(key),
                              run)
    return errs


def _array(node: CompiledRules, path: _Path, obj: list, old: Any, corr: _Ratchet,
           run: _Run) -> list[Cause]:
    """validateArray: items; only map lists correlate an item with its old self, by keys."""
    errs: list[Cause] = []
    old_items = map_list_index(node.schema, old)
    for i, value in enumerate(obj):
        if run.budget < 0:
            break
        old_value = old_items.get(map_list_key(node.schema, value)) if old_items else None
        errs += _validate(node.items, (path, i, True), value, old_value, corr.index(i), run)
    return errs


def map_list_key(schema: dict, item: Any) -> Any:
    """The key of an item of an x-kubernetes-list-type=map list."""
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in schema.get("x-kubernetes-list-map-keys") or [])


def map_list_index(schema: dict, old: Any) -> dict[Any, Any]:
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return {}
    return {map_list_key(schema, item): item for item in old if isinstance(item, dict)}


# -- one node's rules ----------------------------------------------------------------------


@dataclass
class _Bound:
    """What a node's rules are evaluated on: ``self`` and ``oldSelf`` as CEL values, and the
    activation they share (None: each evaluation is given ``data`` to convert)."""

    node: CompiledRules
    data: dict
    activation: Any = None

    @property
    def value_type(self) -> str:
        return _value_type(self.node)


def _bind(node: CompiledRules, obj: Any, old: Any) -> _Bound:
    """The values the node's rules read, converted once for all of them.

    Only the fields the rules read are converted (the node's FieldViews) unless one of the
    others would have made a difference: a value the CEL runtime refuses (an integer beyond 64
    bits, a lone surrogate: what orjson refuses, and more), which makes every rule fail, or a
    date-time or duration whose conversion fails. Then all is converted and given to each
    evaluation, as it always was.
    """
    if _plain(obj) and _plain(old) and _viewable(obj, node.self_view) and _viewable(
            old, node.old_view):
        data = {"self": _convert(obj, node, node.self_view),
                "oldSelf": _convert(old, node, node.old_view)}
        return _Bound(node, data, runtime_env().Activation(data))
    return _Bound(node, {"self": to_cel(obj, node.decl), "oldSelf": to_cel(old, node.decl)})


#: orjson's refusals are the CEL runtime's (integers within [-2^63, 2^64), strings encodable
#: as UTF-8), and more: anything not decoded from JSON
_STRICT = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
           | orjson.OPT_PASSTHROUGH_SUBCLASS)


def _plain(value: Any) -> bool:
    """Whether the CEL runtime takes every part of this JSON value."""
    try:
        orjson.dumps(value, option=_STRICT)
    except orjson.JSONEncodeError:
        return False
    return True


def _viewable(value: Any, view: FieldView | None) -> bool:
    return view is None or not isinstance(value, dict) or not view.may_fail(value)


def _convert(value: Any, node: CompiledRules, view: FieldView | None) -> Any:
    if view is None or not isinstance(value, dict):
        return to_cel(value, node.decl)
    return view.to_cel(value)


def _expressions(node: CompiledRules, path: _Path, obj: Any, old: Any, corr: _Ratchet,
                 run: _Run) -> list[Cause]:
    """validateExpressions: each rule of the node, in order, within the budget."""
    if node.init_error:
        return [_invalid(path, _value_type(node), f"rule compiler initialization error: "
                                                  f"{node.init_error}")]
    if not node.rules:
        return []
    if run.budget <= 0:
        run.budget = -1
        return [_invalid(path, _value_type(node), OUT_OF_BUDGET)]
    bound = _bind(node, obj, old)
    errs: list[Cause] = []
    for rule in node.rules:
        errs += _one_rule(rule, path, bound, corr, run)
        if run.budget < 0:
            break
    return errs


def _value_type(node: CompiledRules) -> str:
    """The node's type as its errors quote it (made only for an error)."""
    return go_quote(_type_name(node.schema))


def _type_name(schema: dict) -> str:
    kind = schema.get("type")
    return kind if isinstance(kind, str) else ""


def _one_rule(rule: Rule, path: _Path, bound: _Bound, corr: _Ratchet,
              run: _Run) -> list[Cause]:
    if rule.error:
        return [_invalid(path, bound.value_type, f"rule compile error: {rule.error}")]
    if rule.program is None:
        return []
    if rule.uses_old_self and bound.data["oldSelf"] is None and not rule.optional_old_self:
        return []  # transition rules run only where an old value exists
    result, error, cost = _evaluate(rule.program, bound)
    if cost > run.budget:
        run.budget = -1
        return [_invalid(path, bound.value_type, OUT_OF_BUDGET)]
    run.budget -= cost
    if error:
        text = error_string(rule.source)
        if error.startswith("no such overload"):
            return [_invalid(path, bound.value_type, f"'{error}': call arguments did not match "
                             f"a supported operator, function or macro signature for rule: "
                             f"{text}")]
        if error == _COST_ERROR:
            run.budget = -1
            return [_invalid(path, bound.value_type, f"'{error}': no further validation rules "
                             f"will be run due to call cost exceeds limit for rule: {text}")]
        return [_invalid(path, bound.value_type, f"{error} evaluating rule: {text}")]
    if result is True:
        return []
    return _failure(rule, path, bound, corr, run)


def _failure(rule: Rule, path: _Path, bound: _Bound, corr: _Ratchet,
             run: _Run) -> list[Cause]:
    """The error of a rule that came out false; its detail may come from messageExpression."""
    if rule.field_path:
        path = _child(_text(path), rule.field_path)
    detail = ruleset_message(rule.source)
    if rule.message_program is not None:
        message, problem = _message(rule, bound, run)
        if problem:
            return _ratcheted(rule, corr, run, [_invalid(path, bound.value_type, problem)])
        detail = message or detail
    cause = _for_reason(rule.source.get("reason"), path, bound.value_type, detail)
    return _ratcheted(rule, corr, run, [cause])


def _message(rule: Rule, bound: _Bound, run: _Run) -> tuple[str, str]:
    """evalMessageExpression: (message, "") or ("", error that stops validation) or ("", "")."""
    result, error, cost = _evaluate(rule.message_program, bound)
    source = rule.source.get("messageExpression", "")
    if cost > run.budget:
        run.budget = -1
        return "", ("messageExpression evaluation failed due to running out of cost budget, "
                    "no further validation rules will be run")
    if error == _COST_ERROR:
        run.budget = -1
        return "", ("no further validation rules will be run due to call cost exceeds limit "
                    f"for messageExpression: {go_quote(source)}")
    run.budget -= cost
    if error or not isinstance(result, str):
        return "", ""
    message = result.strip()
    if not message or "\n" in message or len(message.encode()) > MAX_MESSAGE_BYTES:
        return "", ""
    return message, ""


def _ratcheted(rule: Rule, corr: _Ratchet, run: _Run, causes: list[Cause]) -> list[Cause]:
    """Errors of unchanged values become warnings (transition rules always count)."""
    if rule.uses_old_self or not corr.should_ratchet():
        return causes
    if run.warnings is not None:
        run.warnings += [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    return []


def _evaluate(program: Any, bound: _Bound) -> tuple[Any, str, int]:
    """(result, cel-go's error text or "", cost in units of run time)."""
    start = time.perf_counter_ns()
    try:
        if bound.activation is not None:
            value = program.eval(activation=bound.activation)
        else:
            value = program.eval(data=bound.data)
        result, error = value.value(), ""
        if type(result) is not bool and value.type().name() == "ERROR":  # an error is a str
            result, error = None, lib.runtime_error(str(result))
    except (RuntimeError, ValueError, TypeError) as err:
        result, error = None, lib.runtime_error(str(err))
    cost = max(1, (time.perf_counter_ns() - start) // NANOS_PER_COST_UNIT)
    return result, error, cost


def error_string(rule: dict) -> str:
    """ruleErrorString: the rule's message when it has one, else the rule."""
    message = rule.get("message")
    if isinstance(message, str) and message:
        return message.strip()
    return str(rule.get("rule", "")).strip()


def ruleset_message(rule: dict) -> str:
    """ruleMessageOrDefault."""
    message = rule.get("message")
    if isinstance(message, str) and message:
        return message.strip()
    return f"failed rule: {error_string(rule)}"


def _invalid(path: _Path, value_type: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {value_type}: {detail}", _text(path))


def _for_reason(reason: Any, path: _Path, value_type: str, detail: str) -> Cause:
    """fieldErrorForReason: the rule's reason picks the kind of field error."""
    path = _text(path)
    if reason == "FieldValueForbidden":
        return Cause(reason, f"Forbidden: {detail}", path)
    if reason == "FieldValueRequired":
        return Cause(reason, f"Required value: {detail}", path)
    if reason == "FieldValueDuplicate":
        return Cause(reason, f"Duplicate value: {value_type}", path)
    return _invalid(path, value_type, detail)


# -- ratcheting (apiserver pkg/cel/common/equality.go) -------------------------------------


class _Corr:
    """CorrelatedObject: a new value, the old value it corresponds to, and their schema."""

    def __init__(self, new: Any, old: Any, schema: dict) -> None:
        self.new, self.old, self.schema = new, old, schema if isinstance(schema, dict) else {}
        self._equal: bool | None = None

    def key(self, name: str) -> _Corr | None:
        if not (isinstance(self.new, dict) and isinstance(self.old, dict)):
            return None
        if name not in self.new or name not in self.old:
            return None
        props, extra = self.schema.get("properties") or {}, self.schema.get("additionalProperties")
        sub = props.get(name) if name in props else extra if isinstance(extra, dict) else None
        return None if sub is None else _Corr(self.new[name], self.old[name], sub)

    def index(self, i: int) -> _Corr | None:
        items = self.schema.get("items")
        if not (isinstance(self.new, list) and i < len(self.new) and isinstance(items, dict)):
            return None
        old = map_list_index(self.schema, self.old).get(map_list_key(self.schema, self.new[i]))
        return None if old is None else _Corr(self.new[i], old, items)

    def unchanged(self) -> bool:
        """CachedDeepEqual."""
        if self._equal is None:
            self._equal = self._deep_equal()
        return self._equal

    def _deep_equal(self) -> bool:
        new, old = self.new, self.old
        if new is None or old is None:
            return new is None and old is None
        if isinstance(new, list) and isinstance(old, list):
            if len(new) != len(old):
                return False
            if self.schema.get("x-kubernetes-list-type") != "map":
                return strict_equal(new, old)
            return all((c := self.index(i)) is not None and c.unchanged() for i in range(len(new)))
        if isinstance(new, dict) and isinstance(old, dict):
            return len(new) == len(old) and all(
                (c := self.key(k)) is not None and c.unchanged() for k in new)
        return strict_equal(new, old)


def strict_equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual on JSON values: 1, 1.0 and True are three different values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(v, b[k]) for k, v in a.items())
    return bool(a == b)


@dataclass(frozen=True)
class _Ratchet:
    """ratchetingOptions: the current correlation and the nearest correlatable ancestor."""

    current: _Corr | None = None
    parent: _Corr | None = None

    def key(self, name: str) -> _Ratchet:
        if self.current is None:
            return self
        if self.parent is None and name in ("apiVersion", "kind"):
            return _Ratchet()
        return _Ratchet(self.current.key(name), self.current)

    def index(self, i: int) -> _Ratchet:
        if self.current is None:
            return self
        return _Ratchet(self.current.index(i), self.current)

    def should_ratchet(self) -> bool:
        if self.current is not None:
            return self.current.unchanged()
        return self.parent is not None and self.parent.unchanged()


_NONE = _Ratchet()
