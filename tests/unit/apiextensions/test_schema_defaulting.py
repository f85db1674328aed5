"""Structural defaulting of custom resources, as apiextensions-apiserver v1.32 does it.

Facts come from apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go
(Default: missing properties and non-nullable nulls get the default, deep-copied; map values
and list items that are non-nullable nulls get their schema's default; recursion into
properties, additionalProperties and items) and customresource_handler.go (defaulting before
pruning in the decoder, and again on reads).
"""

from __future__ import annotations

from gateway.apiextensions.schema import apply_defaults, prune


def _obj(**props: dict) -> dict:
    return {"type": "object", "properties": props}


def test_missing_properties_get_their_default() -> None:
    schema = _obj(spec=_obj(replicas={"type": "integer", "default": 1},
                            mode={"type": "string", "default": "auto"},
                            other={"type": "string"}))
    obj = {"spec": {"mode": "manual"}}
    apply_defaults(obj, schema)
    assert obj == {"spec": {"replicas": 1, "mode": "manual"}}


def test_defaults_are_deep_copies() -> None:
    schema = _obj(spec={"type": "object", "default": {"list": [1]}})
    first, second = {}, {}
    apply_defaults(first, schema)
    first["spec"]["list"].append(2)
    apply_defaults(second, schema)
    assert second == {"spec": {"list": [1]}}
    assert schema["properties"]["spec"]["default"] == {"list": [1]}


def test_a_defaulted_object_is_defaulted_inside() -> None:
    schema = _obj(spec={"type": "object", "default": {},
                        "properties": {"replicas": {"type": "integer", "default": 3}}})
    obj: dict = {}
    apply_defaults(obj, schema)
    assert obj == {"spec": {"replicas": 3}}


def test_a_null_gets_the_default_unless_nullable() -> None:
    schema = _obj(a={"type": "string", "default": "x"},
                  b={"type": "string", "default": "y", "nullable": True})
    obj = {"a": None, "b": None}
    apply_defaults(obj, schema)
    assert obj == {"a": "x", "b": None}


def test_map_values_and_list_items_that_are_null_get_the_default() -> None:
    schema = _obj(m={"type": "object", "additionalProperties": {"type": "string",
                                                                "default": "v"}},
                  l={"type": "array", "items": _obj(n={"type": "integer", "default": 0})},
                  s={"type": "array", "items": {"type": "string", "default": "s"}})
    obj = {"m": {"a": None, "b": "set"}, "l": [{}, {"n": 5}], "s": [None, "t"]}
    apply_defaults(obj, schema)
    assert obj == {"m": {"a": "v", "b": "set"}, "l": [{"n": 0}, {"n": 5}], "s": ["s", "t"]}


def test_a_null_item_without_default_becomes_null_again() -> None:
    schema = _obj(l={"type": "array", "items": _obj(n={"type": "integer", "default": 0})})
    obj = {"l": [None]}
    apply_defaults(obj, schema)
    assert obj == {"l": [None]}


def test_a_default_of_null_is_no_default() -> None:
    schema = _obj(a={"type": "string", "nullable": True, "default": None})
    obj: dict = {}
    apply_defaults(obj, schema)
    assert obj == {}


def test_defaults_apply_below_preserve_unknown_fields_where_specified() -> None:
    schema = _obj(spec={"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"a": {"type": "string", "default": "x"}}})
    obj = {"spec": {"free": {"a": None}}}
    apply_defaults(obj, schema)
    assert obj == {"spec": {"free": {"a": None}, "a": "x"}}


def test_defaults_inside_embedded_resources() -> None:
    schema = _obj(t={"type": "object", "x-kubernetes-embedded-resource": True,
                     "properties": {"spec": _obj(n={"type": "integer", "default": 2})}})
    obj = {"t": {"apiVersion": "v1", "kind": "K", "spec": {}}}
    apply_defaults(obj, schema)
    assert obj["t"]["spec"] == {"n": 2}


def test_defaulting_then_pruning_as_kube_decodes() -> None:
    schema = _obj(spec=_obj(a={"type": "string", "default": "x"}, b={"type": "string"}))
    obj = {"spec": {"a": None, "b": None, "c": 1}}
    apply_defaults(obj, schema)
    assert prune(obj, schema) == ["spec.c"]
    assert obj == {"spec": {"a": "x"}}


def test_odd_input_does_not_crash() -> None:
    apply_defaults("scalar", _obj(a={"default": 1}))
    apply_defaults({"a": 1}, None)  # type: ignore[arg-type]
    obj = {"a": [1]}
    apply_defaults(obj, {"properties": {"a": {"items": "nonsense"}, "b": 3}})
    assert obj == {"a": [1]}
