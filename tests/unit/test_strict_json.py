"""Duplicate fields as kube's strict decoding names them, the cheap check that keeps the common
path free of it, and Go's printing of values in those errors."""

from __future__ import annotations

import orjson
import pytest

from gateway.apimachinery.gowords import go_float, go_print
from gateway.apimachinery.strictjson import (
    json_pairs,
    json_patch_findings,
    may_have_duplicates,
    yaml_load,
)
from gateway.endpoints import patch as patches


@pytest.mark.parametrize(("body", "repeats"), [
    (b'{"a":1,"b":{"c":"x:y"}}', False),
    (b'{"a":1,"a":2}', True),
    (b'{"a":{"b":1},"c":[{"d":1,"d":2}]}', True),
    (b'{"a":"https://x:1","a":"y"}', True),  # the dropped value had a ':' of its own
    (b'{"a:b":1,"c":"::"}', False),
    (b'{"a":"\\u003a","a":1}', True),  # an escaped ':' takes the slow path
    # the kept value an escaped ':': without the slow path the counts would agree (2 and 2)
    (b'{"a":1,"a":"\\u003a"}', True),
    (b'{"d":{"a":"1","a":"\\u003a"}}', True),
    (b' { "a" : 1 } ', False),
])
def test_may_have_duplicates(body, repeats):
    assert may_have_duplicates(body, orjson.loads(body)) is repeats


def test_typed_duplicates_merge_objects_and_keep_the_last_scalar():
    body = b'{"m":{"a":1,"n":{"x":1}},"s":1,"m":{"b":2,"n":{"y":2}},"s":3,"l":[1],"l":[2]}'
    obj, findings = json_pairs(body, merge=True)
    assert obj == {"m": {"a": 1, "b": 2, "n": {"x": 1, "y": 2}}, "s": 3, "l": [2]}
    assert [p for _, p in findings.duplicates] == ["m", "s", "l"]
    unstructured, _ = json_pairs(body, merge=False)
    assert unstructured["m"] == {"b": 2, "n": {"y": 2}}


def test_errors_in_document_order_for_typed_objects():
    body = b'{"x":{"a":1,"a":2},"k":1,"z":2,"k":3,"items":[{"q":1,"q":2}]}'
    _, findings = json_pairs(body, merge=True)
    # an unknown field's own duplicates are not told (Go skips its value)
    assert findings.ordered(["x", "z"], typed=True) == [
        'unknown field "x"', 'unknown field "z"', 'duplicate field "k"',
        'duplicate field "items[0].q"']
    assert findings.ordered(["z"], typed=False) == [
        'duplicate field "x.a"', 'duplicate field "k"', 'duplicate field "items[0].q"',
        'unknown field "z"']


def test_json_patch_operations():
    body = b'[{"op":"add","path":"/a","value":{"v":1,"v":2},"op":"add","Op":1},{"op":"test"}]'
    findings = json_patch_findings(body, orjson.loads(body))
    assert findings.leading == [
        'json patch duplicate field "[0].value.v"', 'json patch duplicate field "[0].op"',
        'json patch unknown field "[0].Op"']
    plain = b'[{"op":"add","path":"/a","value":"x:y"}]'
    assert not json_patch_findings(plain, orjson.loads(plain))


def test_yaml_duplicates_are_go_yamls_lines():
    body = b"a: 1\nb:\n  c: 1\n  c: 2\na: 3\ntrue: 1\ntrue: 2\n"
    obj, problem = yaml_load(body, strict=True)
    assert obj == {"a": 3, "b": {"c": 2}, True: 2}
    assert problem == ('yaml: unmarshal errors:\n  line 4: key "c" already set in map\n'
                       '  line 5: key "a" already set in map\n'
                       "  line 7: key true already set in map")
    assert yaml_load(body, strict=False)[1] == ""
    assert yaml_load(b"a: 1\nb: 2\n", strict=True) == ({"a": 1, "b": 2}, "")


@pytest.mark.parametrize(("value", "printed"), [
    (1.5, "1.5"), (1e6, "1e+06"), (123456.0, "123456"), (123456789.0, "1.23456789e+08"),
    (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5, "-2.5"), (100.0, "100"), (0.0, "0"),
])
def test_go_float(value, printed):
    assert go_float(value) == printed


def test_go_print_is_fmts_v_of_a_decoded_map():
    assert go_print({"s": "a b", "m": {"z": None, "a": [1, True, 2.5]}}) == \
        "map[m:map[a:[1 true 2.5] z:<nil>] s:a b]"


@pytest.mark.parametrize(("patch_type", "validation", "body", "message"), [
    (patches.MERGE_PATCH, "Warn", b"{", "error decoding patch: unexpected end of JSON input"),
    (patches.MERGE_PATCH, "Ignore", b"{", "Invalid JSON Patch"),
    (patches.STRATEGIC_PATCH, "Strict", b"nul", "unexpected end of JSON input"),
    (patches.JSON_PATCH, "Strict", b'[{"op":1}]', "error decoding patch: json: cannot "
     "unmarshal number into Go struct field jsonPatchOp.op of type string"),
    (patches.JSON_PATCH, "Ignore", b'["x"]', "json: cannot unmarshal string into Go value of "
     "type jsonpatch.Operation"),
])
def test_patch_parse_errors_in_kubes_words(patch_type, validation, body, message):
    parsed = patches.parse(body, patch_type, validation)
    assert parsed.error is not None and parsed.error.message == message


def test_a_failed_json_patch_has_an_empty_details_object():
    with pytest.raises(Exception) as caught:
        patches.apply_json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert caught.value.to_status()["details"] == {}
