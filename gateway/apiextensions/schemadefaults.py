"""Defaults in a CRD's schema, checked as apiextensions-apiserver v1.32's
defaulting.ValidateDefaults checks them: a default must survive pruning whole (keep no field
the schema would drop), and must validate against the schema it sits on (the caller's
``default_check``: the value's own schema validation, metadata rules and CEL rules).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.apiextensions.structural import (
    Schema,
    is_non_structural,
    item_schema,
    props,
    schema_has,
)
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.registry.validation import go_value

#: default_check(value, schema, path): causes for a default value that does not validate
#: against the schema it sits on (the pruning of defaults is checked here).
DefaultCheck = Callable[[Any, Schema, str], list[Cause]]
_META_FIELDS = ("metadata", "kind", "apiVersion")


def default_causes(schema: Schema, path: str, require_pruned: bool,
                   check: DefaultCheck | None) -> list[Cause]:
    """ValidateDefaults: every default outside additionalProperties keeps no field pruning
    would drop (when required), and passes ``check`` (its schema, metadata rules, CEL)."""
    out: list[Cause] = []
    _defaults_at(schema, path, True, False, require_pruned, check, out)
    return out


def _defaults_at(s: Schema, path: str, embedded: bool, inside_meta: bool,
                 require_pruned: bool, check: DefaultCheck | None, out: list[Cause]) -> None:
    embedded = embedded or s.get("x-kubernetes-embedded-resource") is True
    if embedded:
        inside_meta = False
    value = s.get("default")
    if value is not None:
        where = f"{path}.default"
        if not inside_meta and require_pruned and _prunes(value, s, embedded):
            out.append(Cause("FieldValueInvalid", f"Invalid value: {go_json(value, top=True)}: "
                             "must not have unknown fields", where))
        if check is not None:
            out.extend(check(value, s, where))
    if (items := item_schema(s)) is not None:
        _defaults_at(items, f"{path}.items", False, inside_meta, require_pruned, check, out)
    for key, sub in props(s).items():
        meta = inside_meta or (embedded and key in _META_FIELDS)
        _defaults_at(sub, f"{path}.properties[{key}]", False, meta, require_pruned, check, out)


def _prunes(value: Any, s: Schema | None, embedded: bool) -> bool:
    """Whether pruning ``value`` by ``s`` drops anything (pruning.Prune)."""
    below: Schema | None  # the schema below a key or an item: None prunes all of it
    if s is not None and s.get("x-kubernetes-preserve-unknown-fields") is True:
        return _skip_prunes(value, s, embedded)
    if isinstance(value, dict):
        if s is None:
            return bool(value)
        for key, sub in value.items():
            if embedded and key in _META_FIELDS:
                continue
            if key in props(s):
                below = props(s)[key]
            elif s.get("additionalProperties") is not None:
                below = _extra(s)
            else:
                return True
            if _prunes(sub, below, _embedded(below)):
                return True
        return False
    if isinstance(value, list):
        below = item_schema(s) if s is not None else None
        return any(_prunes(v, below, _embedded(below)) for v in value)
    return False


def _skip_prunes(value: Any, s: Schema, embedded: bool) -> bool:
    """Below x-kubernetes-preserve-unknown-fields only what the schema specifies is pruned."""
    below: Schema | None
    if isinstance(value, dict):
        for key, sub in value.items():
            if embedded and key in _META_FIELDS:
                continue
            if key in props(s):
                below = props(s)[key]
            elif s.get("additionalProperties") is not None:
                below = _extra(s)
            else:
                continue
            if _prunes(sub, below, _embedded(below)):
                return True
        return False
    if isinstance(value, list) and (items := item_schema(s)) is not None:
        return any(_skip_prunes(v, items, _embedded(items)) for v in value)
    return False


def _extra(s: Schema) -> Schema | None:
    extra = s.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _embedded(s: Schema | None) -> bool:
    return s is not None and s.get("x-kubernetes-embedded-resource") is True


def go_json(value: Any, *, top: bool = False) -> str:
    """A decoded JSON value as field.Error shows it: strings %q, numbers and booleans %v at
    the top, anything else Go's %#v of its interface{} form."""
    if top and not isinstance(value, dict | list):
        return go_value(value)
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool | int | float):
        return go_value(float(value) if isinstance(value, int) and not isinstance(value, bool)
                        else value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_json(v) for v in value) + "}"
    inner = ", ".join(f"{go_quote(k)}:{go_json(value[k])}" for k in sorted(value))
    return "map[string]interface {}{" + inner + "}"


def has_defaults(schema: Any) -> bool:
    return schema_has(schema, lambda s: s.get("default") is not None)


def has_unpruned_defaults(schema: Any) -> bool:
    """schemaHasUnprunedDefaults, for a structural schema."""
    if not isinstance(schema, dict) or not has_defaults(schema) or is_non_structural(schema):
        return False
    return bool(default_causes(schema, "", True, None))
