"""Type checking of a policy's expressions (kube's validating/typechecking.go): each
validation's expression and messageExpression is compiled again with ``object`` and
``oldObject`` of the type of each kind the policy's rules name, and ``params`` of its
paramKind's, and what does not compile becomes a warning:
``<group>/<version>, Kind=<kind>: <cel-go's issues>``.

The kinds come from the rules without wildcards (resources without ``*`` or ``/``), at most
ten, sorted by group, version and kind; a kind or a paramKind not served is skipped (a
paramKind without a schema leaves ``params`` undeclared, as in kube). Schemas are the built-in
types' OpenAPI definitions (their ``$ref``s followed) and a CRD version's openAPIV3Schema with
kube's ObjectMeta as its metadata.
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from gateway.admission.expressions import Compiler, Options
from gateway.admission.policy.params import gvk_string, param_gvk
from gateway.admission.policy.served import ServedResources
from gateway.cel.types import TypeBuilder, decl_type
from gateway.registry.admission import Object
from gateway.registry.store import RESTStore
from gateway.schema.dsl import DEFINITIONS, META

MAX_TYPES = 10
#: $refs followed at most this deep (recursive types: JSONSchemaProps)
MAX_DEPTH = 24
_OBJECT_META = {"$ref": f"{META}.ObjectMeta"}


class TypeChecker:
    def __init__(self, resources: ServedResources) -> None:
        self.resources = resources

    def check(self, policy: Object) -> list[Object]:
        """status.typeChecking.expressionWarnings for the policy (empty when none)."""
        spec = policy.get("spec") or {}
        kinds = self._kinds(spec.get("matchConstraints") or {})
        params = self._params(spec.get("paramKind"))
        warnings = []
        for i, validation in enumerate(spec.get("validations") or []):
            for field_name in ("expression", "messageExpression"):
                expression = validation.get(field_name) or ""
                if not expression:
                    continue
                text = "\n".join(self._issues(kinds, params, spec, expression))
                if text:
                    warnings.append({"fieldRef": f"spec.validations[{i}].{field_name}",
                                     "warning": text})
        return warnings

    def _issues(self, kinds: list[tuple[str, TypeBuilder, cel.Type]],
                params: tuple[TypeBuilder, cel.Type] | None, spec: Object,
                expression: str) -> list[str]:
        issues = []
        options = Options(params=params is not None, authorizer=True)
        for gvk, builder, object_type in kinds:
            builders = [builder] + ([params[0]] if params is not None else [])
            compiler = Compiler(object_type=object_type,
                                params_type=params[1] if params is not None else cel.Type.DYN,
                                types=builders, composited=True)
            for variable in spec.get("variables") or []:
                compiler.add_variable(variable.get("name", ""), variable.get("expression", ""),
                                      options)
            error = compiler.compile(expression, options, None).error
            if error:
                issues.append(f"{gvk}: {error.removeprefix('compilation failed: ')}\n")
        return issues

    def _kinds(self, constraints: Object) -> list[tuple[str, TypeBuilder, cel.Type]]:
        """typesToCheck, each with its type."""
        found: dict[tuple[str, str, str], RESTStore] = {}
        for rule in constraints.get("resourceRules") or []:
            groups, versions = rule.get("apiGroups") or [], rule.get("apiVersions") or []
            if any("*" in g for g in groups) or any("*" in v for v in versions):
                continue
            resources = sorted(r for r in rule.get("resources") or []
                               if "*" not in r and "/" not in r)
            for group in sorted(groups):
                for version in sorted(versions):
                    for plural in resources:
                        store = self.resources.by_resource(group, version, plural)
                        if store is not None:
                            res = store.resource
                            found[(res.group, res.version, res.kind)] = store
                        if len(found) >= MAX_TYPES:
                            break
        typed = []
        for gvk in sorted(found)[:MAX_TYPES]:
            declared = _declared(found[gvk])
            if declared is not None:
                typed.append((gvk_string(*gvk), *declared))
        return typed

    def _params(self, param_kind: Any) -> tuple[TypeBuilder, cel.Type] | None:
        if not isinstance(param_kind, dict):
            return None
        store = self.resources.by_kind(*param_gvk(param_kind))
        return _declared(store) if store is not None else None


def _declared(store: RESTStore) -> tuple[TypeBuilder, cel.Type] | None:
    """The CEL type of the store's kind, declared in a builder of its own."""
    resource = store.resource
    if resource.definition is not None:
        schema = dict(resource.definition)
        schema["properties"] = {**(schema.get("properties") or {}), "metadata": _OBJECT_META}
    elif resource.schema in DEFINITIONS:
        schema = {"$ref": resource.schema}
    else:
        return None
    decl = decl_type(inline_refs(schema), True)
    if decl is None:
        return None
    builder = TypeBuilder()
    return builder, builder.cel_type(decl)


def inline_refs(schema: Any, depth: int = 0) -> Any:
    """The schema with every ``$ref`` replaced by its definition (deeper than MAX_DEPTH: a
    node without a type, which CEL does not see)."""
    if not isinstance(schema, dict):
        return schema
    while isinstance(schema.get("$ref"), str):
        if depth >= MAX_DEPTH or schema["$ref"] not in DEFINITIONS:
            return {}
        schema, depth = DEFINITIONS[schema["$ref"]], depth + 1
    out = dict(schema)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: inline_refs(v, depth + 1) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = inline_refs(out[key], depth + 1)
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [inline_refs(s, depth + 1) for s in out["allOf"]]
    return out
