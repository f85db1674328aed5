"""Duplicate fields in request bodies, as kube-apiserver's strict decoding reports them: a 400
(create, update) or a 422 about the patch (JSON, merge and strategic merge patches) under
fieldValidation=Strict, Warning headers under Warn (the default), nothing under Ignore; the
object keeps the last value, objects under a repeated key merging as Go's decoder fills a
built-in type. Raw HTTPS, so that the exact bodies and headers are seen."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from tests.support.api import CM, expect_status
from tests.support.gateway import send
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

#: A ConfigMap whose "data" comes twice, with an unknown field between.
DOUBLED = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},'
           b'"data":{"a":"1"},"zz":1,"data":{"b":"2"}}')
DOUBLED_YAML = (b'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n'
                b'data:\n  a: "1"\nzz: 1\ndata:\n  b: "2"\n')
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CANNOT = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '


def call(gateway: Any, method: str, path: str, body: bytes,
         content_type: str = "application/json") -> tuple[int, Any, list[str]]:
    """(status, JSON body, the Warning header's warnings)."""
    code, raw, headers = send(gateway.url + path, method, gateway.ssl_context(), body,
                              {"Content-Type": content_type})
    warnings = [re.sub(r"\\(.)", r"\1", text) for text in
                re.findall(r'299 - "((?:[^"\\]|\\.)*)"', headers.get("Warning", ""))]
    return code, json.loads(raw), warnings


def test_create_strict_names_duplicates_and_unknown_fields_in_document_order(gateway, api, ns):
    code, body, _ = call(gateway, "POST", f"{CM.format(ns=ns)}?fieldValidation=Strict",
                         DOUBLED % b"strict")
    expect_status((code, body), 400, "BadRequest", message=CANNOT + (
        'strict decoding error: unknown field "zz", duplicate field "data"'))
    assert api.get(f"{CM.format(ns=ns)}/strict")[0] == 404
    # the other order, and a duplicate inside a map: each where the document has it
    other = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","name":"y"},'
             b'"data":{"a":"1","a":"2"},"zz":1}')
    code, body, _ = call(gateway, "POST", f"{CM.format(ns=ns)}?fieldValidation=Strict", other)
    expect_status((code, body), 400, "BadRequest", message=CANNOT + (
        'strict decoding error: duplicate field "metadata.name", duplicate field "data.a", '
        'unknown field "zz"'))


def test_an_escaped_colon_in_the_kept_value_does_not_hide_a_duplicate(gateway, api, ns):
    """The cheap duplicate check counts ':' in the body and in the parsed object written
    again; when the value kept is an escaped ':' (\\u003a, one ':' once decoded) and the
    dropped one has none, the counts agree although a key repeats: such a body must take the
    slow path. Here inside a ConfigMap's data, the later value the escaped one."""
    body = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"colon"},'
            b'"data":{"a":"1","a":"\\u003a"}}')
    code, answer, _ = call(gateway, "POST", f"{CM.format(ns=ns)}?fieldValidation=Strict", body)
    expect_status((code, answer), 400, "BadRequest", message=CANNOT + (
        'strict decoding error: duplicate field "data.a"'))
    assert api.get(f"{CM.format(ns=ns)}/colon")[0] == 404
    code, answer, warnings = call(gateway, "POST", CM.format(ns=ns), body)
    assert (code, warnings, answer["data"]) == (201, ['duplicate field "data.a"'], {"a": ":"})


def test_create_warns_by_default_and_merges_objects_as_go_does(gateway, ns):
    code, body, warnings = call(gateway, "POST", CM.format(ns=ns), DOUBLED % b"warned")
    assert code == 201, body
    assert warnings == ['unknown field "zz"', 'duplicate field "data"']
    assert body["data"] == {"a": "1", "b": "2"}  # the second object decoded into the first


def test_ignore_says_nothing_but_decodes_as_go_does(gateway, ns):
    doubled = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"first",'
               b'"name":"last"},"data":{"k":"1","k":"2"},"data":{"j":"3"}}')
    code, body, warnings = call(gateway, "POST", f"{CM.format(ns=ns)}?fieldValidation=Ignore",
                                doubled)
    assert (code, warnings) == (201, [])
    # the last scalar wins; the second "data" is decoded into the first
    assert body["metadata"]["name"] == "last" and body["data"] == {"k": "2", "j": "3"}


def test_yaml_bodies_report_go_yaml_lines(gateway, api, ns):
    path = CM.format(ns=ns)
    code, body, _ = call(gateway, "POST", f"{path}?fieldValidation=Strict",
                         DOUBLED_YAML % b"yaml", "application/yaml")
    expect_status((code, body), 400, "BadRequest", message=CANNOT + (
        'strict decoding error: yaml: unmarshal errors:\n  line 9: key "data" already set in '
        'map, unknown field "zz"'))
    code, body, warnings = call(gateway, "POST", path, DOUBLED_YAML % b"yaml",
                                "application/yaml")
    assert code == 201, body
    # a line break in a warning goes out as a space, as Go's header writer sends it
    assert warnings == ['yaml: unmarshal errors:   line 9: key "data" already set in map',
                        'unknown field "zz"']
    assert body["data"] == {"b": "2"}  # YAML is converted to JSON first: the last one wins


def test_update_strict(gateway, api, ns):
    path = CM.format(ns=ns)
    assert api.post(path, {"metadata": {"name": "upd"}, "data": {"a": "1"}})[0] == 201
    doubled = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"upd"},'
               b'"data":{"a":"2"},"data":{"a":"3"}}')
    code, body, _ = call(gateway, "PUT", f"{path}/upd?fieldValidation=Strict", doubled)
    expect_status((code, body), 400, "BadRequest",
                  message=CANNOT + 'strict decoding error: duplicate field "data"')
    code, body, warnings = call(gateway, "PUT", f"{path}/upd", doubled)
    assert (code, warnings, body["data"]) == (200, ['duplicate field "data"'], {"a": "3"})


def test_merge_patch_strict_is_invalid_patch(gateway, api, ns):
    path = CM.format(ns=ns)
    assert api.post(path, {"metadata": {"name": "mp"}, "data": {"a": "1"}})[0] == 201
    patch = b'{"data":{"c":"3"},"data":{"d":"4"},"qq":1}'
    code, body, _ = call(gateway, "PATCH", f"{path}/mp?fieldValidation=Strict", patch,
                         "application/merge-patch+json")
    status = expect_status((code, body), 422, "Invalid")
    tail = 'strict decoding error: duplicate field "data", unknown field "qq"'
    assert status["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert status["message"].endswith(f'}}": {tail}')
    [cause] = status["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    assert cause["message"].endswith(tail)
    code, body, warnings = call(gateway, "PATCH", f"{path}/mp", patch,
                                "application/merge-patch+json")
    assert (code, warnings) == (200, ['duplicate field "data"', 'unknown field "qq"'])
    assert body["data"] == {"a": "1", "d": "4"}


def test_strategic_merge_patch_strict_shows_the_patch_as_go_prints_it(gateway, api, ns):
    path = CM.format(ns=ns)
    assert api.post(path, {"metadata": {"name": "smp"}, "data": {"a": "1"}})[0] == 201
    code, body, _ = call(gateway, "PATCH", f"{path}/smp?fieldValidation=Strict",
                         b'{"data":{"c":"3"},"data":{"d":"4"},"qq":1}',
                         "application/strategic-merge-patch+json")
    cause = ('Invalid value: "map[data:map[d:4] qq:1]": strict decoding error: duplicate '
             'field "data", unknown field "qq"')
    expect_status((code, body), 422, "Invalid", message=f' "" is invalid: patch: {cause}',
                  causes=[{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}])


def test_json_patch_operations_are_strictly_decoded(gateway, api, ns):
    path = CM.format(ns=ns)
    assert api.post(path, {"metadata": {"name": "jp"}, "data": {"a": "1"}})[0] == 201
    patch = b'[{"op":"add","path":"/data/e","value":"5","op":"add","foo":1}]'
    code, body, warnings = call(gateway, "PATCH", f"{path}/jp", patch,
                                "application/json-patch+json")
    assert (code, body["data"]) == (200, {"a": "1", "e": "5"})
    assert warnings == ['json patch duplicate field "[0].op"', 'json patch unknown field '
                        '"[0].foo"']
    code, body, warnings = call(gateway, "PATCH", f"{path}/jp?fieldValidation=Ignore", patch,
                                "application/json-patch+json")
    assert (code, warnings) == (200, [])


def test_apply_checks_the_configuration_with_go_yamls_strict_mode(gateway, api, ns):
    path = f"{CM.format(ns=ns)}/applied?fieldManager=me"
    config = (b'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n'
              b'data:\n  f: "6"\n  f: "7"\n')
    code, body, _ = call(gateway, "PATCH", f"{path}&fieldValidation=Strict", config,
                         "application/apply-patch+yaml")
    expect_status((code, body), 400, "BadRequest", message=(
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 7: key "f" already set in map'))
    code, body, warnings = call(gateway, "PATCH", path, config, "application/apply-patch+yaml")
    assert (code, body["data"]) == (201, {"f": "7"})
    assert warnings == ['error converting YAML to JSON: yaml: unmarshal errors:   line 7: '
                        'key "f" already set in map']


def test_custom_resources_tell_duplicates_before_pruned_fields(gateway, api):
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "string"}, "image": {"type": "string"}}}}}
    code, body = api.post(CRDS, {
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}]}})
    assert code == 201, body
    gateway.kubectl("wait", "--for=condition=established", "--timeout=30s",
                    f"crd/widgets.{group}")
    path = f"/apis/{group}/v1/namespaces/default/widgets"
    doubled = (b'{"apiVersion":"%s/v1","kind":"Widget","metadata":{"name":"w"},'
               b'"spec":{"size":"s","bogus":1},"spec":{"image":"i","bogus":2}}' % group.encode())

    def create(query: str) -> tuple[int, Any, list[str]]:
        return eventually(lambda: _served(call(gateway, "POST", path + query, doubled)),
                          timeout=30, what="the custom resource served")

    code, body, _ = create("?fieldValidation=Strict")
    expect_status((code, body), 400, "BadRequest", message=(
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
        'duplicate field "spec", unknown field "spec.bogus"'))
    code, body, warnings = create("")
    assert (code, warnings) == (201, ['duplicate field "spec"', 'unknown field "spec.bogus"'])
    assert body["spec"] == {"image": "i"}  # an unstructured object: the last value wins


def _served(answer: tuple[int, Any, list[str]]) -> tuple[int, Any, list[str]]:
    assert answer[0] != 404, answer
    return answer
