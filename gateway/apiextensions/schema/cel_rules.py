"""Compiling a schema's x-kubernetes-validations once, for every object of the CRD.

kube's pkg/apiserver/schema/cel/compilation.go (Compile, compileRule) type-checks each rule
against the node's declared type with ``self`` and ``oldSelf`` declared, requires a bool
(a string for messageExpression), and marks rules that reference ``oldSelf`` as transition
rules; pkg/apis/apiextensions/validation/validation.go reports the problems as causes on
``<schema path>.x-kubernetes-validations[i].rule`` (or ``.messageExpression``,
``.optionalOldSelf``). The validator tree (validation.go, ``validator``) follows properties,
items, additionalProperties and allOf; a property CEL cannot type is left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.cel import library as lib
from gateway.cel.types import (
    Decl,
    FieldView,
    TypeBuilder,
    decl_type,
    escape,
    field_view,
)

T = cel.Type
#: A rule with optionalOldSelf sees ``oldSelf`` as an optional. cel-expr-python cannot declare
#: a variable of optional type, so the rule is checked and run inside a binding of it, on a
#: line of its own (error positions are moved back by that line).
_CHECK_WRAP = "cel.bind(oldSelf, optional.of(oldSelf),\n{}\n)"
_RUN_WRAP = "cel.bind(oldSelf, oldSelf == null ? optional.none() : optional.of(oldSelf),\n{}\n)"
_OLD_SELF = re.compile(r"undeclared reference to 'oldSelf[.']")


@dataclass
class Rule:
    """One compiled rule: its programs, or why it has none."""

    source: dict
    program: Any = None
    message_program: Any = None
    error: str = ""
    uses_old_self: bool = False
    field_path: str = ""

    @property
    def optional_old_self(self) -> bool:
        return self.source.get("optionalOldSelf") is True


@dataclass
class CompiledRules:
    """kube's Validator: the rules of one schema node and of the nodes below it."""

    schema: dict = field(default_factory=dict)
    decl: Decl | None = None
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, CompiledRules] = field(default_factory=dict)
    items: CompiledRules | None = None
    additional: CompiledRules | None = None
    all_of: list[CompiledRules] = field(default_factory=list)
    #: "failed to convert to declType..." when the node has rules but no CEL type
    init_error: str = ""
    #: the fields of ``self`` and of ``oldSelf`` the rules read; None: the whole value
    self_view: FieldView | None = None
    old_view: FieldView | None = None

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.additional
                    or self.all_of or self.init_error)


@dataclass
class _Pending:
    node: CompiledRules
    rules: list[dict]
    path: str
    uncorrelatable: str | None


def compile_schema(schema: dict, path: str = "", *,
                   root: bool = True) -> tuple[CompiledRules, list[Cause]]:
    """Compile every rule of a schema tree; causes are kube's CRD validation errors."""
    types = TypeBuilder()
    pending: list[_Pending] = []
    tree = _build(schema, schema, root, decl_type(schema, root), path, None, types, pending)
    causes: list[Cause] = []
    if pending:
        pool = types.pool()
        for item in pending:
            causes += _compile_node(item, pool, types)
    return tree or CompiledRules(schema=schema), causes


def _build(vschema: dict, nschema: dict, root: bool, decl: Decl | None, path: str,
           uncorrelatable: str | None, types: TypeBuilder,
           pending: list[_Pending]) -> CompiledRules | None:
    """validator(): the node's own rules and its children's, None when there are none."""
    node = CompiledRules(schema=nschema, decl=decl)
    rules = [r for r in vschema.get("x-kubernetes-validations") or [] if isinstance(r, dict)]
    if rules and decl is None:
        node.init_error = "failed to convert to declType for CEL validation rules"
    elif rules and decl is not None:
        types.cel_type(decl)
        node.rules = [Rule(source=r) for r in rules]
        pending.append(_Pending(node, rules, path, uncorrelatable))
    elem = decl.elem if decl else None
    items, nitems = vschema.get("items"), nschema.get("items")
    if isinstance(items, dict) and isinstance(nitems, dict):
        inner = uncorrelatable
        if nschema.get("x-kubernetes-list-type") != "map":
            inner = uncorrelatable or path
        node.items = _build(items, nitems, _embedded(nitems), elem, f"{path}.items", inner,
                            types, pending)
    nprops = nschema.get("properties") or {}
    for name, prop in (vschema.get("properties") or {}).items():
        if name not in nprops or not isinstance(prop, dict):
            continue
        ptype = _property_type(decl, name, nprops[name])
        if ptype is not None:
            sub = _build(prop, nprops[name], _embedded(nprops[name]), ptype,
                         f"{path}.properties[{name}]", uncorrelatable, types, pending)
            if sub:
                node.properties[name] = sub
    extra, nextra = vschema.get("additionalProperties"), nschema.get("additionalProperties")
    if isinstance(extra, dict) and isinstance(nextra, dict):
        node.additional = _build(extra, nextra, _embedded(nextra), elem,
                                 f"{path}.additionalProperties", uncorrelatable, types, pending)
    for i, sub_schema in enumerate(vschema.get("allOf") or []):
        if isinstance(sub_schema, dict):
            sub = _build(sub_schema, nschema, root, decl, f"{path}.allOf[{i}]",
                         uncorrelatable, types, pending)
            if sub:
                node.all_of.append(sub)
    return None if node.empty() else node


def _embedded(schema: Any) -> bool:
    return isinstance(schema, dict) and bool(schema.get("x-kubernetes-embedded-resource"))


def _property_type(decl: Decl | None, name: str, schema: dict) -> Decl | None:
    """The type of a property as its parent declares it (or its own, when unescapable)."""
    if escape(name) is None:
        return decl_type(schema, _embedded(schema))
    if decl is None or name not in decl.fields:
        return None
    return decl.fields[name][1]


# -- one node's rules ----------------------------------------------------------------------


def _compile_node(item: _Pending, pool: Any, types: TypeBuilder) -> list[Cause]:
    decl = item.node.decl
    assert decl is not None  # a node's rules are pending only when it has a type (_build)
    self_type = types.cel_type(decl)
    envs = _Envs(pool, self_type)
    causes = []
    for i, (rule, compiled) in enumerate(zip(item.rules, item.node.rules, strict=True)):
        where = f"{item.path}.x-kubernetes-validations[{i}]"
        causes += _compile_rule(rule, compiled, envs, where, item)
    # a program is made only from a rule's (or message's) text
    sources = [text for rule, compiled in zip(item.rules, item.node.rules, strict=True)
               for text, program in ((rule.get("rule"), compiled.program),
                                     (rule.get("messageExpression"), compiled.message_program))
               if program is not None and isinstance(text, str)]
    item.node.self_view = field_view(decl, read_fields(sources, "self"))
    item.node.old_view = field_view(decl, read_fields(sources, "oldSelf"))
    return causes


#: A variable, and the field selected of it (``self.x``, ``self.?x``) unless a method is
#: called (``self.all(...)``, ``self.size()``) or the variable stands alone.
_REFERENCE = re.compile(r"\b(self|oldSelf)\b(?:\s*\.\s*\??\s*([A-Za-z_][A-Za-z0-9_]*)"
                        r"(?![A-Za-z0-9_])(?!\s*\())?")


def read_fields(sources: list[str], variable: str) -> set[str] | None:
    """The fields of ``self`` (or ``oldSelf``) the expressions can read, None when one may use
    it whole (passed to a function or macro, compared, indexed, a method called on it).

    Read on the text: the name anywhere else (in a string, a comment) counts as a use of the
    whole value, so a doubt always falls on the side of converting everything.
    """
    names: set[str] = set()
    for source in sources:
        for match in _REFERENCE.finditer(source):
            if match[1] != variable:
                continue
            if match[2] is None:
                return None
            names.add(match[2])
    return names


class _Envs:
    """The node's checking environments, made when first needed."""

    def __init__(self, pool: Any, self_type: cel.Type) -> None:
        self.pool, self.self_type = pool, self_type
        self.made: dict[str, cel.Env] = {}

    def get(self, kind: str) -> cel.Env:
        if kind not in self.made:
            variables = {"self": self.self_type}
            if kind != "self":
                variables["oldSelf"] = self.self_type
            self.made[kind] = lib.new_env(variables, pool=self.pool, bindings=kind == "bind")
        return self.made[kind]


_runtime_env: cel.Env | None = None
_precheck_env: cel.Env | None = None


def runtime_env() -> cel.Env:
    """One environment runs every rule: ``self`` and ``oldSelf`` are dyn maps at run time."""
    global _runtime_env
    if _runtime_env is None:
        _runtime_env = lib.new_env({"self": T.DYN, "oldSelf": T.DYN}, runtime=True,
                                   bindings=True)
    return _runtime_env


def _precheck() -> cel.Env:
    """Parses and resolves names as kube does (no cel.bind), before a wrapped check."""
    global _precheck_env
    if _precheck_env is None:
        _precheck_env = lib.new_env({"self": T.DYN, "oldSelf": T.DYN})
    return _precheck_env


def _check(env: cel.Env, source: str, shift: int = 0) -> tuple[Any, str]:
    try:
        return env.compile(source), ""
    except (RuntimeError, ValueError) as err:
        return None, lib.compile_error(str(err), shift)


def _runtime(checked: Any, unchecked: str | None) -> tuple[Any, str]:
    """The program that runs a rule: the checked expression moved to the runtime
    environment, or for a wrapped rule (whose run-time text is not the checked one) that
    text parsed there unchecked."""
    try:
        if unchecked is not None:
            return runtime_env().compile(unchecked, disable_check=True), ""
        return lib.runtime_program(runtime_env(), checked), ""
    except (RuntimeError, ValueError) as err:
        return None, lib.compile_error(str(err))


def _compile_rule(rule: dict, out: Rule, envs: _Envs, where: str,
                  item: _Pending) -> list[Cause]:
    source = text if isinstance(text := rule.get("rule"), str) else ""
    if not source.strip():
        return []
    checked, error = _check(envs.get("self"), source)
    out.uses_old_self = checked is None and _OLD_SELF.search(error) is not None
    wrapped = out.uses_old_self and out.optional_old_self
    if out.uses_old_self:
        checked, error = _typed_check(envs, source, wrapped)
    causes = []
    if checked is not None and checked.return_type() != T.BOOL:
        error = "cel expression must evaluate to a bool"
    if error:
        out.error = f"compilation failed: {error}" if checked is None else error
        causes.append(Cause("FieldValueInvalid",
                            f"Invalid value: {go_rule(rule)}: {out.error}", f"{where}.rule"))
    else:
        out.program, run_error = _runtime(checked, _RUN_WRAP.format(source) if wrapped
                                          else None)
        out.error = run_error and f"compilation failed: {run_error}"
    causes += _compile_message(rule, out, envs, where, wrapped)
    causes += _old_self_causes(rule, out, where, item)
    out.field_path = normalize_field_path(rule.get("fieldPath") or "", item.node.schema) or ""
    return causes


def _typed_check(envs: _Envs, source: str, wrapped: bool) -> tuple[Any, str]:
    if not wrapped:
        return _check(envs.get("old"), source)
    checked, error = _check(_precheck(), source)
    if checked is None:
        return None, error
    return _check(envs.get("bind"), _CHECK_WRAP.format(source), shift=1)


def _compile_message(rule: dict, out: Rule, envs: _Envs, where: str,
                     wrapped: bool) -> list[Cause]:
    source = rule.get("messageExpression")
    if not isinstance(source, str) or not source or out.program is None:
        return []
    checked, error = _typed_check(envs, source, wrapped)
    if checked is None:
        error = f"messageExpression compilation failed: {error}"
    elif checked.return_type() != T.STRING:
        error = "messageExpression must evaluate to a string"
    if error:
        return [Cause("FieldValueInvalid", f"Invalid value: {go_rule(rule)}: {error}",
                      f"{where}.messageExpression")]
    out.message_program, _ = _runtime(checked, source if wrapped else None)
    return []


def _old_self_causes(rule: dict, out: Rule, where: str, item: _Pending) -> list[Cause]:
    uses_old_self = out.uses_old_self and not out.error  # kube knows it of compiled rules only
    if uses_old_self and item.uncorrelatable is not None:
        return [Cause("FieldValueInvalid", f"Invalid value: {go_quote(rule.get('rule', ''))}: "
                      "oldSelf cannot be used on the uncorrelatable portion of the schema "
                      f"within {item.uncorrelatable}", f"{where}.rule")]
    optional = rule.get("optionalOldSelf")
    if not uses_old_self and isinstance(optional, bool):
        return [Cause("FieldValueInvalid", f"Invalid value: {str(optional).lower()}: "
                      "may not be set if oldSelf is not used in rule", f"{where}.optionalOldSelf")]
    return []


def go_rule(rule: dict) -> str:
    """The internal apiextensions.ValidationRule as Go's %#v prints it (pointers as addresses)."""
    def text(key: str) -> str:
        value = rule.get(key)
        return go_quote(value if isinstance(value, str) else "")

    reason = ("(*apiextensions.FieldValueErrorReason)(nil)" if rule.get("reason") is None
              else "(*apiextensions.FieldValueErrorReason)(0xc000a1c000)")
    optional = "(*bool)(nil)" if rule.get("optionalOldSelf") is None else "(*bool)(0xc000a1c008)"
    return (f"apiextensions.ValidationRule{{Rule:{text('rule')}, Message:{text('message')}, "
            f"MessageExpression:{text('messageExpression')}, Reason:{reason}, "
            f"FieldPath:{text('fieldPath')}, OptionalOldSelf:{optional}}}")


_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]")


def normalize_field_path(text: str, schema: dict) -> str | None:
    """ValidFieldPath: a path of properties and map keys below the node, as field.Path prints."""
    if not text:
        return None
    out, pos = "", 0
    for match in _PATH_TOKEN.finditer(text):
        if match.start() != pos:
            return None
        pos = match.end()
        name = match[1] if match[1] is not None else _unescape(match[2])
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        if props is not None:
            if name not in props:
                return None
            schema, out = props[name], f"{out}.{name}" if out else name
        elif isinstance(extra, dict):
            schema, out = extra, f"{out}[{name}]"
        else:
            return None
    return out if pos == len(text) else None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), text)
