"""A DeleteOptions body whose fields have the wrong JSON types is refused in Go's words (found
by the OpenAPI fuzzing of tests/e2e/test_openapi_fuzz.py: such bodies were 500s)."""

from __future__ import annotations

import pytest

from gateway.endpoints.request import delete_options_error

FIELD = "json: cannot unmarshal {} into Go struct field DeleteOptions.{} of type {}"


@pytest.mark.parametrize(("given", "error"), [
    ({}, ""),
    ({"propagationPolicy": "Background", "dryRun": ["All"], "gracePeriodSeconds": 0,
      "orphanDependents": None, "preconditions": {"uid": "u", "resourceVersion": "1"},
      "apiVersion": "v1", "kind": "DeleteOptions", "unknown": [1]}, ""),
    ({"propagationPolicy": 1.5}, FIELD.format("number", "propagationPolicy",
                                              "v1.DeletionPropagation")),
    ({"dryRun": 7}, FIELD.format("number", "dryRun", "[]string")),
    ({"dryRun": "All"}, FIELD.format("string", "dryRun", "[]string")),
    ({"dryRun": ["All", 3]}, FIELD.format("number", "dryRun", "string")),
    ({"gracePeriodSeconds": "30"}, FIELD.format("string", "gracePeriodSeconds", "int64")),
    ({"gracePeriodSeconds": 1.5}, FIELD.format("number 1.5", "gracePeriodSeconds", "int64")),
    ({"gracePeriodSeconds": 1 << 63}, FIELD.format(f"number {1 << 63}", "gracePeriodSeconds",
                                                   "int64")),
    ({"gracePeriodSeconds": True}, FIELD.format("bool", "gracePeriodSeconds", "int64")),
    ({"orphanDependents": "yes"}, FIELD.format("string", "orphanDependents", "bool")),
    ({"preconditions": []}, FIELD.format("array", "preconditions", "v1.Preconditions")),
    ({"preconditions": {"uid": 3}}, FIELD.format("number", "preconditions.uid", "types.UID")),
    # the first field in the document that does not fit
    ({"orphanDependents": 1, "dryRun": 2}, FIELD.format("number", "orphanDependents", "bool")),
    # the version/kind probe comes first
    ({"dryRun": 2, "kind": {}}, "couldn't get version/kind; json parse error: json: cannot "
                                "unmarshal object into Go struct field .kind of type string"),
])
def test_go_type_errors(given, error):
    assert delete_options_error(given) == error
