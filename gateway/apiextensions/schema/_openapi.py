"""kube-openapi's SchemaValidator (pkg/validation/validate), as custom resources meet it.

Every node runs kube-openapi's validators in its order (type, allOf/anyOf/oneOf/not, string,
format, number, array, enum, object), each only for the kinds of value it applies to. Errors
carry kube-openapi's path name ("spec.items[0].name", map keys joined with dots) and message;
validation.py turns them into kube's field errors. A result's match count is kube-openapi's too:
anyOf and oneOf report the failures of the branch that matched most.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gateway.apiextensions.schema import formats
from gateway.apiextensions.schema._gofmt import (
    as_float,
    converted_equal,
    deep_equal,
    go_float,
    go_kind,
    go_v,
    is_int,
    is_json_integer,
    normalized,
    trunc_int64,
)
from gateway.apiextensions.schema._regexp import search
from gateway.apimachinery.gowords import go_quote

#: Codes kube's kubeOpenAPIResultToFieldErrors tells apart; "invalid" is all the others, and
#: "composite" an error that is no openapierrors.Validation (allOf, anyOf, oneOf, not).
REQUIRED, ENUM, TOO_LONG, MAX_ITEMS, MAX_PROPERTIES = "required", "enum", "too_long", "max_items", \
    "max_properties"
TYPE, INVALID, COMPOSITE = "type", "invalid", "composite"
NO_VALUE = object()


@dataclass
class Error:
    code: str
    name: str
    message: str
    value: Any = NO_VALUE
    valid: Any = None
    values: list | None = None


@dataclass
class Result:
    errors: list[Error] = field(default_factory=list)
    matches: int = 0

    @property
    def valid(self) -> bool:
        return not self.errors

    def add(self, *errors: Error) -> None:
        """Result.AddErrors: a message already reported is not reported twice."""
        for error in errors:
            if all(error.message != seen.message for seen in self.errors):
                self.errors.append(error)

    def merge(self, *others: Result | None) -> Result:
        for other in others:
            if other is not None:
                self.add(*other.errors)
                self.matches += other.matches
        return self


def _failed(*errors: Error) -> Result:
    return Result(list(errors))


def _passed() -> Result:
    return Result(matches=1)


def _integer(schema: dict, key: str) -> int | None:
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        return None
    return int(value)


def _number(schema: dict, key: str) -> float | None:
    value = schema.get(key)
    return None if isinstance(value, bool) or not isinstance(value, int | float) else value


def _types(schema: dict) -> list[str]:
    if schema.get("x-kubernetes-int-or-string") is True:
        return ["integer", "string"]
    kind = schema.get("type")
    if isinstance(kind, list):
        return [t for t in kind if isinstance(t, str)]
    return [kind] if isinstance(kind, str) and kind else []


def validate(schema: Any, data: Any, name: str) -> Result:
    """SchemaValidator.Validate of ``data`` at path ``name``."""
    result = Result()
    if not isinstance(schema, dict):
        return result
    data = normalized(data)
    fmt = formats.supported(schema.get("format"))
    if data is None:
        return result.merge(_type(schema, fmt, None, name), _enum(schema, None, name))
    kind = go_kind(data)
    # The validators in kube-openapi's order, each counting one match when it applies.
    if fmt or _types(schema):
        result.merge(_type(schema, fmt, data, name))
        result.matches += 1
    if "anyOf" in schema or "oneOf" in schema or "allOf" in schema or "not" in schema:
        result.merge(_composition(schema, data, name))
        result.matches += 1
    else:
        result.matches += 2  # _composition's own match when there is nothing to compose
    if kind == "string":
        result.merge(_string(schema, data, name))
        result.matches += 1
        if fmt:
            result.merge(_format(fmt, data, name))
            result.matches += 1
    elif kind == "int64" or kind == "float64":
        result.merge(_numeric(schema, data, name))
        result.matches += 1
    elif kind == "slice":
        result.merge(_array(schema, data, name))
        result.matches += 1
    result.merge(_enum(schema, data, name))
    result.matches += 1
    if kind == "map":
        result.merge(_object(schema, data, name))
        result.matches += 1
    result.matches += 1
    return result


# -- type and format ---------------------------------------------------------------------------


def invalid_type(name: str, type_name: str, value: Any) -> Error:
    """errors.InvalidType, whose message quotes the value when it is a string."""
    message = f"{name} in body must be of type {type_name}"
    if isinstance(value, str):
        message += f": {go_quote(value)}"
    return Error(TYPE, name, message, value)


_SCHEMA_INFO = {"bool": ("boolean", ""), "string": ("string", ""), "int64": ("integer", "int64"),
                "float64": ("number", "float64"), "slice": ("array", ""), "map": ("object", "")}


def _type(schema: dict, fmt: str, data: Any, name: str) -> Result:
    types = _types(schema)
    joined = ",".join(types)
    if data is None:
        if types and "null" not in types and schema.get("nullable") is not True:
            return _failed(invalid_type(name, joined, "null"))
        return _passed()
    kind = go_kind(data)
    found, found_fmt = _SCHEMA_INFO.get(kind, ("", ""))
    float_int = found == "number" and is_json_integer(data) and "integer" in types
    int_float = found == "integer" and "number" in types
    matches = found in types or float_int or int_float
    if kind not in ("string", "slice") and fmt and not (matches or found_fmt == fmt):
        return _failed(invalid_type(name, fmt, found_fmt))
    numeric = "number" in types or "integer" in types
    if not numeric and fmt and kind in ("string", "slice"):
        return _passed()
    return _passed() if matches else _failed(invalid_type(name, joined, found))


def _format(fmt: str, data: str, name: str) -> Result:
    return Result() if formats.valid(fmt, data) else _failed(invalid_type(name, fmt, data))


# -- allOf, anyOf, oneOf, not ------------------------------------------------------------------


def _subschemas(schema: dict, key: str) -> list[dict]:
    value = schema.get(key)
    return [s for s in value if isinstance(s, dict)] if isinstance(value, list) else []


def _composite(message: str, name: str) -> Error:
    return Error(COMPOSITE, name, message)


def _any_of(branches: list[dict], data: Any, name: str, main: Result) -> None:
    best = None
    for branch in branches:
        result = validate(branch, data, name)
        if result.valid:
            main.merge(result)
            return
        if best is None or result.matches > best.matches:
            best = result
    main.add(_composite(f"{go_quote(name)} must validate at least one schema (anyOf)", name))
    main.merge(best)


def _one_of(branches: list[dict], data: Any, name: str, main: Result) -> None:
    best, first, passed = None, None, 0
    for branch in branches:
        result = validate(branch, data, name)
        if result.valid:
            passed, best, first = passed + 1, None, first or result
        elif passed == 0 and (best is None or result.matches > best.matches):
            best = result
    if passed == 1:
        main.merge(first)
        return
    found = "Found none valid" if passed == 0 else f"Found {passed} valid alternatives"
    main.add(_composite(
        f"{go_quote(name)} must validate one and only one schema (oneOf). {found}", name))
    main.merge(best)


def _all_of(branches: list[dict], data: Any, name: str, main: Result) -> None:
    passed = 0
    for branch in branches:
        result = validate(branch, data, name)
        passed += result.valid
        main.merge(result)
    if passed != len(branches):
        none = ". None validated" if passed == 0 else ""
        main.add(_composite(f"{go_quote(name)} must validate all the schemas (allOf){none}", name))


def _composition(schema: dict, data: Any, name: str) -> Result:
    main = Result()
    if branches := _subschemas(schema, "anyOf"):
        _any_of(branches, data, name, main)
    if branches := _subschemas(schema, "oneOf"):
        _one_of(branches, data, name, main)
    if branches := _subschemas(schema, "allOf"):
        _all_of(branches, data, name, main)
    negated = schema.get("not")
    if isinstance(negated, dict) and validate(negated, data, name).valid:
        main.add(_composite(f"{go_quote(name)} must not validate the schema (not)", name))
    main.matches += 1
    return main


# -- strings, numbers, arrays, enums -----------------------------------------------------------


def _string(schema: dict, data: str, name: str) -> Result | None:
    """The first of maxLength, minLength and pattern that fails (lengths count characters)."""
    longest, shortest = _integer(schema, "maxLength"), _integer(schema, "minLength")
    if longest is not None and len(data) > longest:
        return _failed(Error(TOO_LONG, name, f"{name} in body should be at most {longest} chars "
                             "long", data, longest))
    if shortest is not None and len(data) < shortest:
        return _failed(Error(INVALID, name, f"{name} in body should be at least {shortest} "
                             "chars long", data, shortest))
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            found = search(pattern, data)
        except re.error as err:
            return _failed(Error(INVALID, name, f"{name} in body should match '{pattern}, but "
                                 f"pattern is invalid: {err}'", data))
        if not found:
            return _failed(Error(INVALID, name, f"{name} in body should match '{pattern}'", data))
    return None


def _shown(number: float) -> str:
    return go_v(number) if is_int(number) else go_float(number)


def _multiple_of(factor: float, data: float, name: str) -> Error | None:
    """MultipleOfNativeType: an int64 against the factor truncated to an int64."""
    if is_int(data):
        factor = trunc_int64(factor)
        ok = factor <= 0 or data % factor == 0
    else:
        factor = as_float(factor)
        quotient = (1 / factor * data) if 0 < factor < 1 else (data / factor if factor > 0 else 0)
        ok = factor <= 0 or is_json_integer(quotient)
    if factor <= 0:
        return Error(INVALID, name, f"factor MultipleOf declared for {name} must be positive: "
                     f"{_shown(factor)}", factor)
    return None if ok else Error(INVALID, name, f"{name} in body should be a multiple of "
                                 f"{_shown(factor)}", data)


def _bound(bound: float, exclusive: bool, data: float, name: str, upper: bool) -> Error | None:
    """MaximumNativeType/MinimumNativeType: an int64 against the bound truncated to an int64."""
    bound = trunc_int64(bound) if is_int(data) else as_float(bound)
    value = data if is_int(data) else as_float(data)
    if upper:
        bad = value >= bound if exclusive else value > bound
        words = "less than" if exclusive else "less than or equal to"
    else:
        bad = value <= bound if exclusive else value < bound
        words = "greater than" if exclusive else "greater than or equal to"
    return Error(INVALID, name, f"{name} in body should be {words} {_shown(bound)}", data) \
        if bad else None


def _numeric(schema: dict, data: float, name: str) -> Result:
    result = Result(matches=1)
    factor, low, high = (_number(schema, k) for k in ("multipleOf", "minimum", "maximum"))
    if factor is not None and (error := _multiple_of(factor, data, name)):
        result.add(error)
    if low is not None and (error := _bound(
            low, schema.get("exclusiveMinimum") is True, data, name, upper=False)):
        result.add(error)
    if high is not None and (error := _bound(
            high, schema.get("exclusiveMaximum") is True, data, name, upper=True)):
        result.add(error)
    return result


def _array(schema: dict, data: list, name: str) -> Result:
    result = Result()
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(data):
            result.merge(validate(items, item, f"{name}[{i}]"))
    elif isinstance(items, list):
        for i, (item_schema, item) in enumerate(zip(items, data, strict=False)):
            result.merge(validate(item_schema, item, f"{name}[{i}]"))
    fewest, most = _integer(schema, "minItems"), _integer(schema, "maxItems")
    if fewest is not None and len(data) < fewest:
        result.add(Error(INVALID, name, f"{name} in body should have at least {fewest} items",
                         len(data), fewest))
    if most is not None and len(data) > most:
        result.add(Error(MAX_ITEMS, name, f"{name} in body should have at most {most} items",
                         len(data), most))
    if schema.get("uniqueItems") is True and any(
            deep_equal(a, b) for i, a in enumerate(data) for b in data[:i]):
        result.add(Error(INVALID, name, f"{name} in body shouldn't contain duplicates"))
    result.matches += 1
    return result


def _enum(schema: dict, data: Any, name: str) -> Result | None:
    """basicCommonValidator: a null never matches; other values may match after reflect's
    conversion to the enum value's type."""
    values = schema.get("enum")
    if not isinstance(values, list) or not values:
        return None
    if any(converted_equal(data, value) for value in values):
        return None
    shown = " ".join(v if isinstance(v, str) else go_v(v) for v in values)
    return _failed(Error(ENUM, name, f"{name} in body should be one of [{shown}]", data,
                         values=values))


# -- objects -----------------------------------------------------------------------------------


def _patterns(schema: dict, key: str) -> list[tuple[str, dict]]:
    patterns = schema.get("patternProperties")
    if not isinstance(patterns, dict):
        return []
    out = []
    for pattern, sub in sorted(patterns.items()):
        try:
            if isinstance(sub, dict) and search(pattern, key):
                out.append((pattern, sub))
        except re.error:
            continue
    return out


def _child(name: str, key: str) -> str:
    return f"{name}.{key}"


def _object(schema: dict, data: dict, name: str) -> Result:
    result = Result()
    fewest, most = _integer(schema, "minProperties"), _integer(schema, "maxProperties")
    if fewest is not None and len(data) < fewest:
        result.add(Error(INVALID, name, f"{name} in body should have at least {fewest} "
                         "properties", len(data), fewest))
    if most is not None and len(data) > most:
        result.add(Error(MAX_PROPERTIES, name, f"{name} in body should have at most {most} "
                         "properties", len(data), most))
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    additional = schema.get("additionalProperties")
    for key in sorted(data):
        matched = _patterns(schema, key)
        if additional is False:
            if key not in properties and not matched:
                result.add(Error(INVALID, name, f"{name}.{key} in body is a forbidden property",
                                 key))
            continue
        for _, sub in matched:
            result.merge(validate(sub, data[key], _child(name, key)))
        if key not in properties and not matched and isinstance(additional, dict):
            result.merge(validate(additional, data[key], _child(name, key)))
    for key in sorted(properties):
        if key in data:
            result.merge(validate(properties[key], data[key], _child(name, key) if name else key))
    required = schema.get("required")
    for key in required if isinstance(required, list) else []:
        if isinstance(key, str) and key not in data:
            result.add(Error(REQUIRED, _child(name, key), f"{_child(name, key)} in body is "
                             "required"))
    for key in sorted(data):
        if key not in properties:
            for _, sub in _patterns(schema, key):
                result.merge(validate(sub, data[key], _child(name, key)))
    return result
