"""x-kubernetes-validations: compile errors, failures, transition rules, ratcheting, cost."""

from __future__ import annotations

import pytest

from gateway.apiextensions.schema.cel import compile_schema, validate
from gateway.apiextensions.schema.cel_rules import read_fields
from gateway.apimachinery.status import Cause
from gateway.cel.types import _fast_timestamp, _parse_timestamp

PREFIX = "spec.validation.openAPIV3Schema"
RULE0 = f"{PREFIX}.properties[spec].x-kubernetes-validations[0]"
NIL_TAIL = ('Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)'
            '(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}')


def spec_schema(*rules: dict, **props: dict) -> dict:
    """A resource whose spec has these properties and these rules."""
    spec = {"type": "object", "properties": props, "x-kubernetes-validations": list(rules)}
    return {"type": "object", "properties": {"spec": spec}}


INT = {"type": "integer"}
STR = {"type": "string"}


def compiled(schema: dict):
    rules, causes = compile_schema(schema, PREFIX)
    assert causes == []
    return rules


def errors(schema: dict, obj: dict, old: dict | None = None, **kw) -> list[Cause]:
    return validate(compiled(schema), obj, old, **kw)


def fails(rule: str, spec: dict, old: dict | None = None, **props: dict) -> list[str]:
    """The messages of one rule on spec (and the old spec)."""
    old_obj = None if old is None else {"spec": old}
    return [c.message for c in errors(spec_schema({"rule": rule}, **props), {"spec": spec},
                                      old_obj)]


# -- compiling -------------------------------------------------------------------------------


def compile_causes(rule: dict, **props: dict) -> list[Cause]:
    return compile_schema(spec_schema(rule, **props), PREFIX)[1]


def test_syntax_error_is_cel_go_issue_text():
    causes = compile_causes({"rule": "self.replicas <="}, replicas=INT)
    assert causes == [Cause(
        "FieldValueInvalid",
        'Invalid value: apiextensions.ValidationRule{Rule:"self.replicas <=", ' + NIL_TAIL
        + ": compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' "
        "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT,"
        " NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.replicas <=\n | ................^",
        f"{RULE0}.rule")]


@pytest.mark.parametrize(("rule", "detail"), [
    ("self.nope == 1", "compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n"
                       " | self.nope == 1\n | ....^"),
    ("self.replicas == 'a'", "compilation failed: ERROR: <input>:1:15: found no matching "
                             "overload for '_==_' applied to '(int, string)'\n"
                             " | self.replicas == 'a'\n | ..............^"),
    ("self.replicas", "cel expression must evaluate to a bool"),
    ("foo(self)", "compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' "
                  "(in container '')\n | foo(self)\n | ...^"),
])
def test_type_errors_are_found_when_compiling(rule, detail):
    [cause] = compile_causes({"rule": rule}, replicas=INT)
    assert cause.field == f"{RULE0}.rule"
    assert cause.message.endswith(f"{NIL_TAIL}: {detail}")


def test_resource_root_sees_only_name_and_generate_name_of_metadata():
    schema = {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.metadata.name.startsWith('a')"}, {"rule": "has(self.metadata.labels)"}]}
    _, causes = compile_schema(schema, PREFIX)
    assert [c.field for c in causes] == [f"{PREFIX}.x-kubernetes-validations[1].rule"]
    assert "undefined field 'labels'" in causes[0].message


def test_message_expression_must_be_a_string():
    [cause] = compile_causes({"rule": "self.replicas > 0", "messageExpression": "self.replicas"},
                             replicas=INT)
    assert cause.field == f"{RULE0}.messageExpression"
    assert cause.message.endswith(": messageExpression must evaluate to a string")


def test_optional_old_self_needs_old_self():
    [cause] = compile_causes({"rule": "self.replicas > 0", "optionalOldSelf": True},
                             replicas=INT)
    assert cause == Cause("FieldValueInvalid", "Invalid value: true: may not be set if oldSelf "
                          "is not used in rule", f"{RULE0}.optionalOldSelf")


def test_old_self_is_forbidden_below_an_atomic_list():
    item = {"type": "object", "properties": {"a": INT},
            "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}
    schema = spec_schema(items={"type": "array", "items": item})
    [cause] = compile_schema(schema, PREFIX)[1]
    items = f"{PREFIX}.properties[spec].properties[items]"
    assert cause == Cause("FieldValueInvalid", 'Invalid value: "self.a == oldSelf.a": oldSelf '
                          f"cannot be used on the uncorrelatable portion of the schema within "
                          f"{items}", f"{items}.items.x-kubernetes-validations[0].rule")


def test_cel_bind_is_not_in_kubes_environment():
    [cause] = compile_causes({"rule": "cel.bind(x, self.replicas, x > 0)"}, replicas=INT)
    assert "undeclared reference to 'cel'" in cause.message


def test_a_rule_that_did_not_compile_fails_every_object():
    rules, _ = compile_schema(spec_schema({"rule": "self.replicas =="}, replicas=INT))
    [cause] = validate(rules, {"spec": {"replicas": 1}})
    assert cause.field == "spec"
    assert cause.message.startswith('Invalid value: "object": rule compile error: compilation '
                                    "failed: ERROR: <input>:1:17: Syntax error")


# -- failing rules ---------------------------------------------------------------------------


def test_failed_rule_message_and_field():
    schema = spec_schema({"rule": "self.minReplicas <= self.replicas"},
                         replicas=INT, minReplicas=INT)
    rules = compiled(schema)
    assert validate(rules, {"spec": {"replicas": 3, "minReplicas": 1}}) == []
    assert validate(rules, {"spec": {"replicas": 1, "minReplicas": 3}}) == [Cause(
        "FieldValueInvalid",
        'Invalid value: "object": failed rule: self.minReplicas <= self.replicas', "spec")]


def test_path_prefix_and_rule_on_a_leaf():
    schema = spec_schema(replicas={"type": "integer",
                                   "x-kubernetes-validations": [{"rule": "self < 10"}]})
    assert errors(schema, {"spec": {"replicas": 12}}, path="root") == [Cause(
        "FieldValueInvalid", 'Invalid value: "integer": failed rule: self < 10',
        "root.spec.replicas")]


def test_message_and_reason_and_field_path():
    rule = {"rule": "self.replicas < 5", "message": " too many ",
            "reason": "FieldValueForbidden", "fieldPath": ".replicas"}
    assert errors(spec_schema(rule, replicas=INT), {"spec": {"replicas": 7}}) == [
        Cause("FieldValueForbidden", "Forbidden: too many", "spec.replicas")]
    rule = {"rule": "has(self.name)", "reason": "FieldValueRequired"}
    assert errors(spec_schema(rule, name=STR), {"spec": {}}) == [
        Cause("FieldValueRequired", "Required value: failed rule: has(self.name)", "spec")]
    rule = {"rule": "false", "reason": "FieldValueDuplicate"}
    assert errors(spec_schema(rule), {"spec": {}}) == [
        Cause("FieldValueDuplicate", 'Duplicate value: "object"', "spec")]


@pytest.mark.parametrize(("expression", "message"), [
    ("'replicas is ' + string(self.replicas)", "replicas is 7"),
    ("'  padded  '", "padded"),
    ("''", "failed rule: self.replicas < 5"),  # empty: the rule's default message
    ("'a\\nb'", "failed rule: self.replicas < 5"),  # line breaks are refused
    ("self.nope.size() > 0 ? 'x' : 'y'", "failed rule: self.replicas < 5"),  # runtime error
])
def test_message_expression(expression, message):
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"replicas": INT, "nope": {"type": "array", "items": STR}},
        "x-kubernetes-validations": [{"rule": "self.replicas < 5",
                                      "messageExpression": expression}]}}}
    assert [c.message for c in errors(schema, {"spec": {"replicas": 7}})] == [
        f'Invalid value: "object": {message}']


@pytest.mark.parametrize(("rule", "spec", "message"), [
    ("self.replicas > 0", {}, "no such key: replicas evaluating rule: self.replicas > 0"),
    ("10 / self.replicas > 1", {"replicas": 0},
     "division by zero evaluating rule: 10 / self.replicas > 1"),
    ("self.replicas + 9223372036854775807 > 0", {"replicas": 1},
     "integer overflow evaluating rule: self.replicas + 9223372036854775807 > 0"),
    ("self.port > 80", {"port": "http"},
     "'no such overload': call arguments did not match a supported operator, function or "
     "macro signature for rule: self.port > 80"),
])
def test_runtime_errors_in_cel_go_words(rule, spec, message):
    port = {"x-kubernetes-int-or-string": True}
    assert fails(rule, spec, replicas=INT, port=port) == [f'Invalid value: "object": {message}']


# -- types -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("rule", "spec", "ok"), [
    ("self.at > timestamp('2020-01-01T00:00:00Z')", {"at": "2024-05-01T10:00:00Z"}, True),
    ("self.at.getFullYear() == 2019", {"at": "2024-05-01T10:00:00.123456789Z"}, False),
    ("self.timeout <= duration('1m')", {"timeout": "90s"}, False),
    ("self.timeout == duration('1h30m')", {"timeout": "1h30m"}, True),
    ("self.ratio < 1", {"ratio": 0.5}, True),  # int and double compare (kube 1.28+)
    ("self.ratio == 2.0", {"ratio": 2}, True),  # a number is a double even when integral
    ("self.port == 80 || self.port == 'http'", {"port": "http"}, True),
    ("self.foo__dash__bar == 'x' && self.__namespace__ == 'y'",
     {"foo-bar": "x", "namespace": "y"}, True),
    ("!has(self.name)", {"name": None}, True),  # null is absent
    ("self.?name.orValue('none') == 'none'", {}, True),
    ("self.data == b'hi'", {"data": "aGk="}, True),
    ("1 == 1u", {}, None),  # int and uint are not comparable: compile error
])
def test_values_are_typed_by_the_schema(rule, spec, ok):
    props = {"at": {"type": "string", "format": "date-time"}, "ratio": {"type": "number"},
             "timeout": {"type": "string", "format": "duration"},
             "port": {"x-kubernetes-int-or-string": True}, "foo-bar": STR, "namespace": STR,
             "name": STR, "data": {"type": "string", "format": "byte"}}
    rules, causes = compile_schema(spec_schema({"rule": rule}, **props))
    if ok is None:
        assert "found no matching overload for '_==_' applied to '(int, uint)'" in (
            causes[0].message)
        return
    assert causes == []
    assert (validate(rules, {"spec": spec}) == []) is ok


@pytest.mark.parametrize("rule", [
    "self.all(k, k.startsWith('x'))",
    "self.size() <= 3",
    "self.all(k, k.matches('^x.*$'))",
    "['b', 'a', 'c'].exists_one(x, x == 'a')",
    "[1, 2, 3].isSorted() && ![2, 1].isSorted()",
    "[1, 2, 3].sum() == 6 && [1.5, 2.0].sum() == 3.5",
    "[3, 1, 2].min() == 1 && ['a', 'c'].max() == 'c'",
    "'abc123'.find('[0-9]+') == '123' && 'a1b2'.findAll('[0-9]') == ['1', '2']",
    "sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 4])",
    "'ABC'.lowerAscii() == 'abc' && 'abc'.indexOf('c') == 2",
    "'%s has %d'.format(['x', 3]) == 'x has 3'",
    "'a,b'.split(',').size() == 2",
    "optional.of(1).hasValue()",
])
def test_kube_libraries(rule):
    schema = {"type": "object", "properties": {"labels": {
        "type": "object", "additionalProperties": STR, "x-kubernetes-validations": [
            {"rule": rule}]}}}
    assert errors(schema, {"labels": {"xa": "1", "xb": "2"}}) == []


def test_compiled_once_for_many_objects():
    rules = compiled(spec_schema({"rule": "self.replicas % 2 == 0"}, replicas=INT))
    bad = [n for n in range(10) if validate(rules, {"spec": {"replicas": n}})]
    assert bad == [1, 3, 5, 7, 9]


def test_all_of_rules_run_on_the_node():
    spec = {"type": "object", "properties": {"a": INT},
            "allOf": [{"x-kubernetes-validations": [{"rule": "self.a > 1"}]}]}
    schema = {"type": "object", "properties": {"spec": spec}}
    assert [c.message for c in errors(schema, {"spec": {"a": 1}})] == [
        'Invalid value: "object": failed rule: self.a > 1']


# -- transition rules ------------------------------------------------------------------------


def test_transition_rule_runs_only_on_update():
    rule = "self.replicas >= oldSelf.replicas"
    assert fails(rule, {"replicas": 1}, replicas=INT) == []
    assert fails(rule, {"replicas": 1}, {"replicas": 2}, replicas=INT) == [
        'Invalid value: "object": failed rule: self.replicas >= oldSelf.replicas']
    assert fails(rule, {"replicas": 3}, {"replicas": 2}, replicas=INT) == []


def test_optional_old_self_runs_on_create_too():
    rule = {"rule": "oldSelf.hasValue() ? self.name == oldSelf.value().name : "
                    "self.name.startsWith('new')", "optionalOldSelf": True}
    rules = compiled(spec_schema(rule, name=STR))
    assert validate(rules, {"spec": {"name": "new-a"}}) == []
    assert len(validate(rules, {"spec": {"name": "a"}})) == 1
    assert validate(rules, {"spec": {"name": "a"}}, {"spec": {"name": "a"}}) == []
    assert len(validate(rules, {"spec": {"name": "b"}}, {"spec": {"name": "a"}})) == 1


def test_map_list_items_correlate_by_key_and_new_items_skip():
    item = {"type": "object", "properties": {"name": STR, "size": INT},
            "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size"}]}
    schema = spec_schema(disks={"type": "array", "items": item, "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"]})
    old = {"spec": {"disks": [{"name": "a", "size": 5}, {"name": "b", "size": 1}]}}
    new = {"spec": {"disks": [{"name": "b", "size": 2}, {"name": "c", "size": 0},
                              {"name": "a", "size": 4}]}}
    assert [c.field for c in errors(schema, new, old)] == ["spec.disks[2]"]


def test_map_values_correlate_by_key():
    value = {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf"}]}
    schema = spec_schema(limits={"type": "object", "additionalProperties": value})
    old = {"spec": {"limits": {"cpu": 4, "mem": 8}}}
    new = {"spec": {"limits": {"cpu": 2, "mem": 9, "gpu": 0}}}
    assert [c.field for c in errors(schema, new, old)] == ["spec.limits[cpu]"]


# -- ratcheting ------------------------------------------------------------------------------


def test_unchanged_invalid_values_ratchet_to_warnings():
    schema = spec_schema(name={"type": "string", "x-kubernetes-validations": [
        {"rule": "self.size() < 3"}]}, other=INT)
    rules = compiled(schema)
    old = {"spec": {"name": "long", "other": 1}}
    warnings: list[str] = []
    new = {"spec": {"name": "long", "other": 2}}
    assert validate(rules, new, old, ratchet=True, warnings=warnings) == []
    assert warnings == ['spec.name: Invalid value: "string": failed rule: self.size() < 3']
    changed = {"spec": {"name": "longer", "other": 1}}
    assert len(validate(rules, changed, old, ratchet=True)) == 1
    assert len(validate(rules, new, old)) == 1  # no ratcheting (status, or the gate off)


def test_transition_rules_do_not_ratchet():
    rule = {"rule": "self.a == oldSelf.a && self.a > 5"}
    schema = spec_schema(rule, a=INT)
    old = {"spec": {"a": 1}}
    assert len(errors(schema, old, old, ratchet=True)) == 1


# -- cost ------------------------------------------------------------------------------------


def test_runaway_rule_stops_validation_with_call_cost_error():
    schema = spec_schema(
        {"rule": "self.xs.all(x, self.xs.all(y, x + y >= 0))"}, {"rule": "false"},
        xs={"type": "array", "items": INT})
    assert errors(schema, {"spec": {"xs": list(range(200))}}) == [Cause(
        "FieldValueInvalid", "Invalid value: \"object\": 'operation cancelled: actual cost "
        "limit exceeded': no further validation rules will be run due to call cost exceeds "
        "limit for rule: self.xs.all(x, self.xs.all(y, x + y >= 0))", "spec")]


def test_running_out_of_budget_stops_validation():
    item = {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0"}]}
    schema = spec_schema(xs={"type": "array", "items": item})
    causes = errors(schema, {"spec": {"xs": [1, 2, 3]}}, budget=1)
    assert causes == [Cause("FieldValueInvalid", 'Invalid value: "integer": validation failed '
                            "due to running out of cost budget, no further validation rules "
                            "will be run", "spec.xs[0]")]


# -- what the rules are given ----------------------------------------------------------------

DATE_TIME = {"type": "string", "format": "date-time"}
WIDE = {"a": INT, "b": INT, "name": STR, "at": DATE_TIME, "other": DATE_TIME,
        "timeout": {"type": "string", "format": "duration"}}


def test_a_rule_reading_a_date_time_field_sees_a_timestamp():
    spec = {"a": 1, "at": "2024-05-01T10:00:00.5+02:00", "other": "not a date", "name": "x"}
    assert fails("self.at == timestamp('2024-05-01T08:00:00.5Z')", spec, **WIDE) == []
    assert fails("self.at.getHours() == 8 && self.at.getMilliseconds() == 500", spec,
                 **WIDE) == []
    assert fails("self.a < 1", spec, **WIDE) == ['Invalid value: "object": failed rule: '
                                                 "self.a < 1"]
    assert fails("dyn(self.other) == 'not a date'", spec, **WIDE) == []  # unparsable


def test_a_rule_using_self_whole_sees_every_field():
    spec = {"a": 1, "b": 2, "name": "x", "at": "2024-05-01T10:00:00Z", "timeout": "1m"}
    assert fails("dyn(self).size() == 5 && self.a == 1", spec, **WIDE) == []
    assert fails("dyn(self).all(k, k != 'other') && has(self.timeout)", spec, **WIDE) == []
    assert fails("self == oldSelf", spec, dict(spec), **WIDE) == []
    assert fails("self == oldSelf", spec, {**spec, "at": "2024-05-01T10:00:01Z"}, **WIDE) == [
        'Invalid value: "object": failed rule: self == oldSelf']
    rule = {"rule": "self.a > 5", "messageExpression": "string(size(dyn(self))) + ' fields'"}
    assert [c.message for c in errors(spec_schema(rule, **WIDE), {"spec": spec})] == [
        'Invalid value: "object": 5 fields']


def test_rules_read_only_the_fields_they_name():
    rules = compiled(spec_schema({"rule": "self.a <= self.b"}, {"rule": "has(self.name)"},
                                 **WIDE)).properties["spec"]
    assert sorted(rules.self_view.fields) == ["a", "b", "name"]
    assert rules.old_view.fields == {}
    assert [name for name, _ in rules.self_view.unread_special] == ["at", "other", "timeout"]
    rules = compiled(spec_schema({"rule": "self.a > 0"}, {"rule": "[self].size() > 0"},
                                 **WIDE)).properties["spec"]
    assert rules.self_view is None  # self whole: every field


@pytest.mark.parametrize(("sources", "variable", "names"), [
    (["self.a < self.b", "has(self.c) && self.?d.orValue(1) > 0"], "self", {"a", "b", "c", "d"}),
    (["self.a.b.size() > 0 && self . e[0] == 1"], "self", {"a", "e"}),
    (["self.abc(1) > 0"], "self", None),  # a method: self whole, never a shorter field
    (["self.a > 0", "size(self) > 1"], "self", None),
    (["self.all(k, k != 'a')"], "self", None),
    (["self.a == oldSelf.a"], "oldSelf", {"a"}),
    (["self == oldSelf"], "oldSelf", None),
    (["oldSelf.hasValue() && oldSelf.value().a > 0"], "oldSelf", None),
    (["self.a > 0"], "oldSelf", set()),
    (["self.a == 'self'"], "self", None),  # in a string: still counted, as a whole use
    (["myself.a > 0 || self_.b"], "self", set()),
])
def test_read_fields(sources, variable, names):
    assert read_fields(sources, variable) == names


def test_unread_values_the_runtime_refuses_fail_every_rule_as_before():
    assert fails("self.a > 0", {"a": 1, "b": 2 ** 64}, **WIDE) == [
        "Invalid value: \"object\": Integer value '18446744073709551616' out of range for "
        "'self['b'] -> 18446744073709551616'. evaluating rule: self.a > 0"]
    assert fails("self.a > 0", {"a": 1, "name": "\ud800"}, **WIDE) == [
        'Invalid value: "object": basic_string: construction from null is not valid '
        "evaluating rule: self.a > 0"]


@pytest.mark.parametrize(("value", "may_fail"), [
    ({"at": "2024-05-01T10:00:00Z", "timeout": "720h0m0s"}, False),
    ({"at": "not a date", "timeout": "nonsense!"}, False),  # kept as strings
    ({"at": "0001-01-01T00:00:00+01:00"}, True),  # datetime cannot hold it in UTC
    ({"at": "9999-12-31T20:00:00Z"}, True),  # the same years are all looked at closely
    ({"timeout": "99999w"}, False),
    ({"timeout": "999999 weeks"}, True),  # more than 10,000 years: refused by the runtime
    ({"timeout": "1." + "9" * 400 + "s"}, True),  # parse_kube_duration's OverflowError
    ({"nested": {"t": "0001-01-01T00:00:00+01:00"}}, True),
    ({"nested": {"list": [{"t": "2024-05-01T10:00:00Z"}, {"t": "9999-01-01"}]}}, True),
    ({"nested": {"map": {"x": "2024-05-01"}}}, False),
])
def test_unread_date_times_and_durations_that_may_not_convert(value, may_fail):
    inner = {"type": "object", "properties": {"t": DATE_TIME}}
    nested = {"type": "object", "properties": {
        "t": DATE_TIME, "list": {"type": "array", "items": inner},
        "map": {"type": "object", "additionalProperties": DATE_TIME}}}
    rules = compiled(spec_schema({"rule": "self.a > 0"}, nested=nested, **WIDE))
    assert rules.properties["spec"].self_view.may_fail(value) is may_fail


def test_unread_values_that_do_not_convert_are_converted_as_before():
    spec = {"a": 1, "timeout": "999999 weeks"}
    [message] = fails("self.a > 0", spec, **WIDE)
    assert "above maximum allowed duration" in message
    with pytest.raises(OverflowError):  # as it always did (and self.size() does)
        fails("self.a > 0", {"a": 1, "at": "0001-01-01T00:00:00+01:00"}, **WIDE)


@pytest.mark.parametrize(("text", "fast"), [
    ("2024-05-01T12:34:56Z", True), ("2024-05-01T12:34:56.123456789Z", True),
    ("2024-05-01T12:34:56.5+05:30", True), ("1970-01-01T00:00:00-00:00", True),
    ("2024-02-29T23:59:59.000000001-12:00", True), ("0001-01-01T00:00:00Z", True),
    ("9999-12-31T23:59:59.999999999Z", True), ("2024-01-01T00:00:00+99:99", True),
    ("2024-05-01", True), ("0001-01-01", True), ("9999-12-31", True),
    ("0001-01-01T00:00:00+00:01", False),  # before year 1 in UTC: FromJsonString refuses
    ("2023-02-29T00:00:00Z", False), ("2024-05-01T12:34:60Z", False),
    ("2024-13-01T00:00:00Z", False), ("2024-05-01T24:00:00Z", False),
    ("0000-01-01T00:00:00Z", False), ("2023-02-29", False), ("2024-05-01T12:34:56z", False),
    ("2024-05-01T12:34:56.1234567891Z", False), ("20240501T123456Z", False),
])
def test_fast_timestamps_are_the_slow_ones(text, fast):
    """Where the fast parser answers, it gives what the slow one (FromJsonString, else
    fromisoformat) gives; the rest it leaves to it."""
    stamp = _fast_timestamp(text)
    assert (stamp is not None) is fast
    if fast:
        assert stamp == _parse_timestamp(text)


# -- kube's libraries in CRD rules ----------------------------------------------------------------


@pytest.mark.parametrize(("rule", "spec", "failing"), [
    ("quantity(self.memory).isLessThan(quantity('1Gi'))", {"memory": "512Mi"}, False),
    ("quantity(self.memory).isLessThan(quantity('1Gi'))", {"memory": "2G"}, True),
    ("isCIDR(self.cidr) && cidr(self.cidr).containsIP(self.ip)",
     {"cidr": "10.0.0.0/8", "ip": "10.1.2.3"}, False),
    ("ip(self.ip).family() == 6", {"ip": "10.1.2.3"}, True),
    ("url(self.endpoint).getScheme() == 'https'", {"endpoint": "https://example.com/"}, False),
    ("!format.dns1123Label().validate(self.name).hasValue()", {"name": "Bad_Name"}, True),
])
def test_kube_libraries_in_rules(rule: str, spec: dict, failing: bool):
    props = {name: STR for name in spec}
    assert bool(fails(rule, spec, **props)) is failing


def test_a_library_error_is_a_rule_error():
    assert fails("ip(self.ip).isLoopback()", {"ip": "01.2.3.4"}, ip=STR) == [
        'Invalid value: "object": IP Address "01.2.3.4" parse error during conversion from '
        'string: ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero evaluating '
        "rule: ip(self.ip).isLoopback()"]
