"""Validation of custom resources against CRD schemas, with kube-apiserver v1.32's causes.

Facts come from apiextensions-apiserver pkg/apiserver/validation/validation.go (the mapping of
kube-openapi errors to field errors) and validation_test.go (expected messages), from
kube-openapi pkg/validation/errors/schema.go and validate/schema_messages.go (message texts),
pkg/validation/validate/{type,values,validator,object_validator,slice_validator,
schema_props}.go (what is checked, in which order), from k8s.io/apimachinery
pkg/util/validation/field/errors.go (how a field error prints its value), and from
apiextensions-apiserver pkg/apiserver/schema/{listtype,objectmeta}/validation.go.
"""

from __future__ import annotations

import copy

import pytest

from gateway.apiextensions.schema import formats, validate
from gateway.apiextensions.schema.validation import list_causes, schema_causes
from gateway.apimachinery.status import Cause


def _obj(**props: dict) -> dict:
    return {"type": "object", "properties": props}


def _spec(**props: dict) -> dict:
    return _obj(spec=_obj(**props))


def _lines(causes: list[Cause]) -> list[str]:
    """As kube's tests write field errors: "<field>: <message>"."""
    return [f"{c.field}: {c.message}" for c in causes]


def _only(schema: dict, obj: dict) -> Cause:
    causes = validate(schema, obj)
    assert len(causes) == 1, causes
    return causes[0]


# -- types (validation_test.go "x-kubernetes-int-or-string", "nullable" cases) -----------------


@pytest.mark.parametrize(("value", "found"), [
    ("foo", "string"), (42, "integer"), (True, "boolean"), (1.2, "number"), ([], "array"),
    (None, "null"),
])
def test_type_mismatch_names_the_json_type_found(value: object, found: str) -> None:
    cause = _only(_obj(field={"type": "object"}), {"field": value})
    assert cause == Cause("FieldValueTypeInvalid", f'Invalid value: "{found}": field in body '
                          f'must be of type object: "{found}"', "field")


def test_the_brief_s_replicas_example() -> None:
    cause = _only(_spec(replicas={"type": "integer"}), {"spec": {"replicas": "3"}})
    assert _lines([cause]) == ['spec.replicas: Invalid value: "string": spec.replicas in body '
                               'must be of type integer: "string"']


def test_nullable_accepts_null_only_where_declared() -> None:
    schema = _obj(a={"type": "string", "nullable": True}, b={"type": "string"})
    assert validate(schema, {"a": None}) == []
    assert _lines(validate(schema, {"b": None})) == [
        'b: Invalid value: "null": b in body must be of type string: "null"']


def test_an_integral_float_is_an_integer_and_an_integer_a_number() -> None:
    schema = _obj(i={"type": "integer"}, n={"type": "number"})
    assert validate(schema, {"i": 3.0, "n": 3}) == []
    assert _lines(validate(schema, {"i": 3.5})) == [
        'i: Invalid value: "number": i in body must be of type integer: "number"']


@pytest.mark.parametrize("value", [42, "foo", None])
def test_int_or_string_accepts_integers_strings_and_null_when_nullable(value: object) -> None:
    schema = _obj(field={"x-kubernetes-int-or-string": True, "nullable": True})
    assert validate(schema, {"field": value}) == []


def test_int_or_string_rejects_others_with_both_types_named() -> None:
    cause = _only(_obj(field={"x-kubernetes-int-or-string": True}), {"field": True})
    assert cause.message == ('Invalid value: "boolean": field in body must be of type '
                             'integer,string: "boolean"')


def test_any_of_reports_at_the_root_and_the_best_branch() -> None:
    # validation_test.go: "nullable, x-kubernetes-int-or-string and user-provided anyOf"
    schema = _obj(field={"nullable": True, "x-kubernetes-int-or-string": True,
                         "anyOf": [{"type": "integer"}, {"type": "string"}]})
    assert validate(schema, {"field": 42}) == []
    assert sorted(_lines(validate(schema, {"field": 1.2}))) == [
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        'field: Invalid value: "number": field in body must be of type integer,string: "number"',
        'field: Invalid value: "number": field in body must be of type integer: "number"',
    ]


def test_all_of_around_any_of() -> None:
    # validation_test.go: "nullable, x-kubernetes-int-or-string and user-provider allOf"
    schema = _obj(field={"nullable": True, "x-kubernetes-int-or-string": True,
                         "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]})
    assert sorted(_lines(validate(schema, {"field": []}))) == [
        '<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated',
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        'field: Invalid value: "array": field in body must be of type integer,string: "array"',
        'field: Invalid value: "array": field in body must be of type integer: "array"',
    ]


def test_all_of_with_some_branches_valid_has_no_suffix() -> None:
    schema = _spec(n={"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 5}]})
    assert _lines(validate(schema, {"spec": {"n": 7}})) == [
        "spec.n: Invalid value: 7: spec.n in body should be less than or equal to 5",
        '<nil>: Invalid value: "": "spec.n" must validate all the schemas (allOf)',
    ]


def test_one_of_none_and_several_valid() -> None:
    schema = _spec(n={"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 0}]})
    assert _lines(validate(schema, {"spec": {"n": 2}})) == [
        '<nil>: Invalid value: "": "spec.n" must validate one and only one schema (oneOf). '
        "Found none valid",
        "spec.n: Invalid value: 2: spec.n in body should be greater than or equal to 5",
    ]
    schema = _spec(n={"type": "integer", "oneOf": [{"minimum": 1}, {"maximum": 5}]})
    assert _lines(validate(schema, {"spec": {"n": 2}})) == [
        '<nil>: Invalid value: "": "spec.n" must validate one and only one schema (oneOf). '
        "Found 2 valid alternatives"]


def test_any_of_keeps_the_failures_of_the_branch_that_matched_most() -> None:
    # MatchCount: the object branch gets further (its properties validate) than the string one
    schema = _spec(v={"anyOf": [{"type": "string"},
                                {"type": "object", "properties": {"a": {"type": "integer"}},
                                 "required": ["b"]}]})
    assert _lines(validate(schema, {"spec": {"v": {"a": 1}}})) == [
        '<nil>: Invalid value: "": "spec.v" must validate at least one schema (anyOf)',
        "spec.v.b: Required value",
    ]


def test_not() -> None:
    schema = _spec(s={"type": "string", "not": {"enum": ["forbidden"]}})
    assert validate(schema, {"spec": {"s": "fine"}}) == []
    assert _lines(validate(schema, {"spec": {"s": "forbidden"}})) == [
        '<nil>: Invalid value: "": "spec.s" must not validate the schema (not)']


def test_composite_errors_name_the_given_path() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer",
                                                     "not": {"minimum": 0}}}}
    assert _lines(validate(schema, {"n": 1}, "status")) == [
        'status: Invalid value: "": "n" must not validate the schema (not)']


# -- required, enum ----------------------------------------------------------------------------


def test_required_at_the_root_and_below() -> None:
    schema = {"type": "object", "required": ["spec"],
              "properties": {"spec": {"type": "object", "required": ["a", "b"],
                                      "properties": {"a": {"type": "string"}}}}}
    assert _lines(validate(schema, {})) == ["spec: Required value"]
    assert validate(schema, {"spec": {"a": "x"}}) == [
        Cause("FieldValueRequired", "Required value", "spec.b")]


def test_enum_lists_strings_as_they_are_and_other_values_as_json() -> None:
    schema = _spec(e={"enum": ["a", 1, 1.5, True, None, {"k": [1]}]})
    cause = _only(schema, {"spec": {"e": 2}})
    assert cause == Cause("FieldValueNotSupported", 'Unsupported value: 2: supported values: '
                          '"a", "1", "1.5", "true", "null", "{\\"k\\":[1]}"', "spec.e")


def test_enum_never_matches_null() -> None:
    schema = _spec(e={"type": "string", "nullable": True, "enum": ["a", None]})
    assert _lines(validate(schema, {"spec": {"e": None}})) == [
        'spec.e: Unsupported value: null: supported values: "a", "null"']


def test_enum_compares_after_go_conversion() -> None:
    schema = _spec(e={"x-kubernetes-int-or-string": True, "enum": ["a", 2.0]})
    # an int64 converts to a float64, and to a string as a rune (97 is "a")
    assert validate(schema, {"spec": {"e": 2}}) == []
    assert validate(schema, {"spec": {"e": 97}}) == []
    assert _lines(validate(schema, {"spec": {"e": "b"}})) == [
        'spec.e: Unsupported value: "b": supported values: "a", "2"']


def test_enum_of_objects_shows_the_value_as_go_does() -> None:
    schema = _spec(e={"type": "object", "enum": [{"a": 1}]})
    assert validate(schema, {"spec": {"e": {"a": 1}}}) == []
    cause = _only(schema, {"spec": {"e": {"b": "x", "a": None}}})
    assert cause.message == ('Unsupported value: map[string]interface {}{"a":interface {}(nil), '
                             '"b":"x"}: supported values: "{\\"a\\":1}"')


# -- strings -----------------------------------------------------------------------------------


def test_max_length_is_too_long_in_bytes_words() -> None:
    cause = _only(_spec(s={"type": "string", "maxLength": 3}), {"spec": {"s": "abcd"}})
    assert cause == Cause("FieldValueTooLong", "Too long: may not be more than 3 bytes", "spec.s")


def test_lengths_count_characters() -> None:
    schema = _spec(s={"type": "string", "maxLength": 2, "minLength": 2})
    assert validate(schema, {"spec": {"s": "éé"}}) == []


def test_min_length() -> None:
    cause = _only(_spec(s={"type": "string", "minLength": 3}), {"spec": {"s": "ab"}})
    assert cause == Cause("FieldValueInvalid", 'Invalid value: "ab": spec.s in body should be '
                          "at least 3 chars long", "spec.s")


def test_only_the_first_failing_string_check_is_reported() -> None:
    schema = _spec(s={"type": "string", "maxLength": 2, "pattern": "^[a-z]+$"})
    assert _lines(validate(schema, {"spec": {"s": "ABC"}})) == [
        "spec.s: Too long: may not be more than 2 bytes"]


def test_pattern_is_an_unanchored_re2_search() -> None:
    schema = _spec(s={"type": "string", "pattern": "[0-9]"}, t={"type": "string",
                                                                "pattern": "^[a-z]+$"})
    assert validate(schema, {"spec": {"s": "ab1cd", "t": "abc"}}) == []
    assert _lines(validate(schema, {"spec": {"t": "abc\n"}})) == [
        "spec.t: Invalid value: \"abc\\n\": spec.t in body should match '^[a-z]+$'"]


def test_invalid_pattern_message() -> None:
    # validation_test.go: "invalid regex"
    cause = _only(_obj(field={"type": "string", "pattern": "+"}), {"field": "foo"})
    assert cause.message == ("Invalid value: \"foo\": field in body should match '+, but "
                             "pattern is invalid: error parsing regexp: missing argument to "
                             "repetition operator: `+`'")


# -- formats -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("ipv4", "10.0.0.1", "10.0.0.256"),
    ("ipv6", "2001:db8::1", "10.0.0.1"),
    ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
    ("date", "2024-02-29", "2023-02-29"),
    ("date-time", "2024-01-01T10:00:00Z", "2024-01-01 10:00:00Z"),
    ("duration", "1h30m", "soon"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", "not-a-uuid"),
    ("email", "a@example.com", "a@b@c"),
    ("hostname", "www.example.org", "-www.example.org"),
    ("mac", "01:02:03:04:05:06", "01:02:03:04:05"),
    ("uri", "https://example.com/x", "relative/path"),
    ("byte", "aGVsbG8=", "aGVsbG8"),
])
def test_supported_formats(fmt: str, good: str, bad: str) -> None:
    schema = _spec(v={"type": "string", "format": fmt})
    assert validate(schema, {"spec": {"v": good}}) == []
    # errors.InvalidType with the format as the type: a FieldValueTypeInvalid cause
    assert validate(schema, {"spec": {"v": bad}}) == [Cause(
        "FieldValueTypeInvalid", f'Invalid value: "{bad}": spec.v in body must be of type '
        f'{fmt}: "{bad}"', "spec.v")]


@pytest.mark.parametrize("fmt", ["int32", "int64", "float", "double", "color", "k8s-short-name"])
def test_formats_kube_does_not_support_are_ignored(fmt: str) -> None:
    schema = _spec(v={"type": "string", "format": fmt}, n={"type": "integer", "format": fmt})
    assert validate(schema, {"spec": {"v": "anything", "n": 2**40}}) == []


def test_a_format_on_a_value_of_another_kind() -> None:
    # type.go: a non-string with a format is reported against the format, by Go kind
    schema = _spec(d={"type": "string", "format": "date"})
    assert _lines(validate(schema, {"spec": {"d": 5}})) == [
        'spec.d: Invalid value: "int64": spec.d in body must be of type date: "int64"']
    # ...while a list passes the type check of a string with a format
    assert validate(schema, {"spec": {"d": ["x"]}}) == []


# -- numbers -----------------------------------------------------------------------------------


def test_integer_bounds() -> None:
    schema = _spec(n={"type": "integer", "minimum": 1, "maximum": 10})
    assert validate(schema, {"spec": {"n": 10}}) == []
    assert _lines(validate(schema, {"spec": {"n": 11}})) == [
        "spec.n: Invalid value: 11: spec.n in body should be less than or equal to 10"]
    assert _lines(validate(schema, {"spec": {"n": 0}})) == [
        "spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1"]


def test_exclusive_bounds() -> None:
    schema = _spec(n={"type": "number", "minimum": 0, "exclusiveMinimum": True,
                      "maximum": 1.5, "exclusiveMaximum": True})
    assert _lines(validate(schema, {"spec": {"n": 0}})) == [
        "spec.n: Invalid value: 0: spec.n in body should be greater than 0"]
    assert _lines(validate(schema, {"spec": {"n": 1.5}})) == [
        "spec.n: Invalid value: 1.5: spec.n in body should be less than 1.5"]


def test_an_integer_meets_a_bound_truncated_to_an_integer() -> None:
    # MaximumNativeType: int64(max)
    schema = _spec(n={"type": "integer", "maximum": 5.5})
    assert validate(schema, {"spec": {"n": 5}}) == []
    assert _lines(validate(schema, {"spec": {"n": 6}})) == [
        "spec.n: Invalid value: 6: spec.n in body should be less than or equal to 5"]


def test_floats_print_as_go_prints_them() -> None:
    schema = _spec(n={"type": "number", "maximum": 1000000})
    assert _lines(validate(schema, {"spec": {"n": 2500000.5}})) == [
        "spec.n: Invalid value: 2.5000005e+06: spec.n in body should be less than or equal "
        "to 1e+06"]


def test_multiple_of() -> None:
    schema = _spec(i={"type": "integer", "multipleOf": 3}, f={"type": "number",
                                                             "multipleOf": 0.1})
    assert validate(schema, {"spec": {"i": 9, "f": 0.3}}) == []
    assert _lines(validate(schema, {"spec": {"i": 10, "f": 0.35}})) == [
        "spec.f: Invalid value: 0.35: spec.f in body should be a multiple of 0.1",
        "spec.i: Invalid value: 10: spec.i in body should be a multiple of 3",
    ]


def test_multiple_of_an_integer_uses_the_truncated_factor() -> None:
    schema = _spec(i={"type": "integer", "multipleOf": 0.5})
    assert _lines(validate(schema, {"spec": {"i": 2}})) == [
        "spec.i: Invalid value: 0: factor MultipleOf declared for spec.i must be positive: 0"]


# -- arrays ------------------------------------------------------------------------------------


def test_items_are_validated_with_indexed_paths() -> None:
    schema = _spec(items={"type": "array", "items": _obj(name={"type": "string"})})
    assert _lines(validate(schema, {"spec": {"items": [{"name": "a"}, {"name": 1}]}})) == [
        'spec.items[1].name: Invalid value: "integer": spec.items[1].name in body must be of '
        'type string: "integer"']


def test_max_items_is_too_many() -> None:
    # validation_test.go: "maxItems"
    cause = _only(_obj(fieldX={"type": "array", "maxItems": 2}), {"fieldX": ["a", "b", "c"]})
    assert cause == Cause("FieldValueTooMany", "Too many: 3: must have at most 2 items", "fieldX")


def test_min_items() -> None:
    cause = _only(_spec(l={"type": "array", "minItems": 2}), {"spec": {"l": [1]}})
    assert cause == Cause("FieldValueInvalid", "Invalid value: 1: spec.l in body should have at "
                          "least 2 items", "spec.l")


def test_unique_items_compares_as_go_deep_equal() -> None:
    schema = _spec(l={"type": "array", "uniqueItems": True})
    assert validate(schema, {"spec": {"l": [1, 1.0, "1"]}}) == []
    assert _lines(validate(schema, {"spec": {"l": [{"a": 1}, {"a": 1}]}})) == [
        'spec.l: Invalid value: "": spec.l in body shouldn\'t contain duplicates']


# -- objects -----------------------------------------------------------------------------------


def test_max_properties_is_too_many_items() -> None:
    # validation_test.go: "maxProperties"
    cause = _only(_obj(fieldX={"type": "object", "maxProperties": 2}),
                  {"fieldX": {"a": True, "b": True, "c": True}})
    assert cause == Cause("FieldValueTooMany", "Too many: 3: must have at most 2 items", "fieldX")


def test_min_properties() -> None:
    cause = _only(_spec(m={"type": "object", "minProperties": 1}), {"spec": {"m": {}}})
    assert cause.message == "Invalid value: 0: spec.m in body should have at least 1 properties"


def test_map_values_are_named_with_dots() -> None:
    schema = _spec(labels={"type": "object", "additionalProperties": {"type": "string",
                                                                      "maxLength": 1}})
    assert _lines(validate(schema, {"spec": {"labels": {"a.b/c": "xy"}}})) == [
        "spec.labels.a.b/c: Too long: may not be more than 1 bytes"]


def test_additional_properties_false_forbids_at_the_object() -> None:
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"spec": {"type": "object", "additionalProperties": False}}}
    assert _lines(validate(schema, {"spec": {"x": 1}, "y": 2})) == [
        '<nil>: Invalid value: "y": .y in body is a forbidden property',
        'spec: Invalid value: "x": spec.x in body is a forbidden property',
    ]


def test_preserve_unknown_fields_leaves_unknown_fields_alone() -> None:
    schema = _spec(any={"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"n": {"type": "integer"}}})
    assert validate(schema, {"spec": {"any": {"whatever": [1, {"x": None}]}}}) == []
    assert _lines(validate(schema, {"spec": {"any": {"n": "x"}}})) == [
        'spec.any.n: Invalid value: "string": spec.any.n in body must be of type integer: '
        '"string"']


def test_a_path_prefix_goes_before_the_field_only() -> None:
    # ValidateStatusUpdate: the status schema, the field under "status"
    schema = _obj(replicas={"type": "integer"})
    assert _lines(validate(schema, {"replicas": "x"}, "status")) == [
        'status.replicas: Invalid value: "string": replicas in body must be of type integer: '
        '"string"']


def test_identical_messages_are_reported_once() -> None:
    schema = _spec(n={"type": "integer", "allOf": [{"maximum": 1}, {"maximum": 1}]})
    assert _lines(validate(schema, {"spec": {"n": 2}})) == [
        "spec.n: Invalid value: 2: spec.n in body should be less than or equal to 1",
        '<nil>: Invalid value: "": "spec.n" must validate all the schemas (allOf). None validated',
    ]


def test_odd_schemas_and_values_do_not_crash() -> None:
    schema = {"type": "object", "properties": {"a": "not a schema", "b": {"items": 3,
              "properties": [], "required": "x", "enum": "y", "maxLength": "z"}}}
    obj = {"a": 1, "b": [object()], "c": {1: 2}}
    before = copy.copy(obj)
    validate(schema, obj)
    validate("nonsense", obj)  # type: ignore[arg-type]
    assert obj == before


def test_schema_causes_alone_skip_the_list_and_embedded_checks() -> None:
    schema = _spec(s={"type": "array", "x-kubernetes-list-type": "set"})
    assert schema_causes(schema, {"spec": {"s": [1, 1]}}) == []
    assert list_causes(schema, {"spec": {"s": [1, 1]}}) != []


# -- x-kubernetes-list-type (schema/listtype/validation.go) ------------------------------------


def test_set_reports_each_duplicate_once_at_its_second_appearance() -> None:
    schema = _spec(s={"type": "array", "x-kubernetes-list-type": "set"})
    assert validate(schema, {"spec": {"s": ["a", "b", "a", "a", "b"]}}) == [
        Cause("FieldValueDuplicate", 'Duplicate value: "a"', "spec.s[2]"),
        Cause("FieldValueDuplicate", 'Duplicate value: "b"', "spec.s[4]"),
    ]


def test_set_scalars_compare_by_go_type_objects_by_json() -> None:
    schema = _spec(s={"type": "array", "x-kubernetes-list-type": "set"})
    assert validate(schema, {"spec": {"s": [1, 1.0]}}) == []
    assert _lines(validate(schema, {"spec": {"s": [[1], [1.0]]}})) == [
        "spec.s[1]: Duplicate value: []interface {}{1}"]


def test_map_with_one_key() -> None:
    schema = _spec(m={"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"]})
    assert _lines(validate(schema, {"spec": {"m": [{"name": "a"}, {"name": "a", "v": 1},
                                                   {"v": 2}, {}]}})) == [
        'spec.m[1]: Duplicate value: map[string]interface {}{"name":"a"}',
        "spec.m[3]: Duplicate value: map[string]interface {}{}",
    ]


def test_map_with_several_keys() -> None:
    schema = _spec(m={"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port", "protocol"]})
    obj = {"spec": {"m": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"},
                          {"port": 80, "protocol": "TCP", "x": 1}]}}
    assert _lines(validate(schema, obj)) == [
        'spec.m[2]: Duplicate value: map[string]interface {}{"port":80, "protocol":"TCP"}']


def test_map_items_must_be_objects() -> None:
    schema = _spec(m={"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"]})
    assert list_causes(schema, {"spec": {"m": [{"name": "a"}, "b"]}}) == [Cause(
        "FieldValueInvalid", 'Invalid value: "b": must be an object for an array of list-type '
        "map", "spec.m[1]")]


def test_list_types_below_maps_use_bracketed_keys() -> None:
    schema = _spec(m={"type": "object", "additionalProperties": {
        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}})
    assert _lines(validate(schema, {"spec": {"m": {"k": ["x", "x"]}}})) == [
        'spec.m[k][1]: Duplicate value: "x"']


# -- x-kubernetes-embedded-resource (schema/objectmeta/validation.go) --------------------------

_EMBEDDED = {"type": "object", "x-kubernetes-embedded-resource": True,
             "x-kubernetes-preserve-unknown-fields": True}


def test_embedded_resources_need_api_version_and_kind() -> None:
    assert _lines(validate(_spec(template=_EMBEDDED), {"spec": {"template": {}}})) == [
        "spec.template.apiVersion: Required value: must not be empty",
        "spec.template.kind: Required value: must not be empty",
    ]


def test_embedded_type_meta_is_checked() -> None:
    obj = {"spec": {"template": {"apiVersion": "a/b/c", "kind": "My_Kind"}}}
    assert _lines(validate(_spec(template=_EMBEDDED), obj)) == [
        'spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
        'spec.template.kind: Invalid value: "My_Kind": may have mixed case, but should '
        "otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters "
        "or '-', start with an alphabetic character, and end with an alphanumeric character "
        "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
        "'[a-z]([-a-z0-9]*[a-z0-9])?')",
    ]
    obj = {"spec": {"template": {"apiVersion": 1, "kind": ""}}}
    assert _lines(validate(_spec(template=_EMBEDDED), obj)) == [
        "spec.template.apiVersion: Invalid value: 1: must be a string",
        'spec.template.kind: Invalid value: "": must not be empty',
    ]


def test_embedded_metadata_is_validated_as_object_meta() -> None:
    obj = {"spec": {"templates": {"web": {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a/b", "namespace": "a.b", "labels": {"k": "-bad"}}}}}}
    schema = _spec(templates={"type": "object", "additionalProperties": _EMBEDDED})
    assert _lines(validate(schema, obj)) == [
        "spec.templates[web].metadata.name: Invalid value: \"a/b\": may not contain '/'",
        'spec.templates[web].metadata.namespace: Invalid value: "a.b": must not contain dots',
        'spec.templates[web].metadata.labels: Invalid value: "-bad": a valid label must be an '
        "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
        "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
        "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ]


def test_embedded_metadata_that_does_not_decode() -> None:
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": "x"}}}
    assert _lines(validate(_spec(template=_EMBEDDED), obj)) == [
        'spec.template.metadata: Invalid value: "x": json: cannot unmarshal string into Go '
        "value of type v1.ObjectMeta"]
    obj["spec"]["template"]["metadata"] = {"labels": "x"}
    assert _lines(validate(_spec(template=_EMBEDDED), obj)) == [
        'spec.template.metadata: Invalid value: map[string]interface {}{"labels":"x"}: json: '
        "cannot unmarshal string into Go struct field ObjectMeta.labels of type "
        "map[string]string"]


def test_embedded_metadata_name_may_be_empty() -> None:
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}}}}
    assert validate(_spec(template=_EMBEDDED), obj) == []


# -- strfmt checks (samples from kube-openapi pkg/validation/strfmt/default_test.go) -----------


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("hostname", ["888.com", "xn--bcher-kva.example.com", "☁→❄→☃→☀→☺→☂→☹→✝.ws", "ôlà.ôlà",
                  "ex$ample", "<foo>", "www.詹姆斯.london", "x"],
     ["1.1.1.1", "a" * 256, "x.y." + "a" * 64, "www.-d.org", "_www.example.org", "www.詹姆斯.x",
      "a.b.c.é;ö", "x."]),
    ("email", ['" "@example.com', '"Abc@def"@example.com', "!#$%&'*+-/=?^_`{}|~@example.com",
               "postmaster@☁→❄→☃→☀→☺→☂→☹→✝.ws", "root@localhost"], ["somebody@somewhere@com"]),
    ("ipv4", ["192.168.1.01"], ["198.168.254.2.2"]),
    ("ipv6", ["::ffff:1.2.3.4"], ["127.0.0.1", "fe80::1%eth0", "::ffff:01.2.3.4"]),
    ("cidr", ["192.0.02.1/24", "2001:db8:a0b:12f0::1/32"], ["198.168.254.2", "10.0.0.0/x"]),
    ("mac", ["0102.0304.0506", "01-02-03-04-05-06-07-08"], ["01:02-03:04:05:06"]),
    ("isbn10", ["0321751043"], ["836217463"]),
    ("isbn13", ["978-0321751041"], ["978-0321751042"]),
    ("hexcolor", ["#FFFFFF", "fff"], ["#fffffffz"]),
    ("rgbcolor", ["rgb(255,255,255)"], ["rgb(300,0,0)"]),
    ("ssn", ["111-11-1111", "999 99 9999"], ["999 99 999", "111111111"]),
    ("creditcard", ["4111-1111-1111-1111", "4012-8888-8888-1881"], ["9999-9999-9999-999"]),
    ("byte", ["VGhpcyBpcyBh"], ["ZWxpemFiZXRocG9zZXk", ""]),
    ("date-time", ["2020-01-01t10:00:00.5+02:00"], ["2020-01-01T24:00:00Z", "2020-01-01"]),
    ("duration", ["3 days", "5 minutes", "-1.5h", "0"], ["1x", "abc"]),
    ("uuid4", ["123e4567-e89b-42d3-a456-426614174000"], ["123e4567-e89b-12d3-a456-426614174000"]),
    ("uri", ["mailto:a@b", "*", "/path?q"], ["", "http://[::1", "http://h:port/"]),
    ("bsonobjectid", ["507f1f77bcf86cd799439011"], ["507f1f77bcf86cd79943901"]),
])
def test_strfmt_samples(fmt: str, good: list[str], bad: list[str]) -> None:
    assert [g for g in good if not formats.valid(fmt, g)] == []
    assert [b for b in bad if formats.valid(fmt, b)] == []


def test_supported_formats_are_matched_without_dashes() -> None:
    assert formats.supported("date-time") == "date-time"
    assert formats.supported("u-u-i-d") == "u-u-i-d"
    assert formats.supported("int32") == ""
