"""Properties of PATCH (issue 19, item 4: hostile input): any body of any patch type, applied
to a real kind's object as the PATCH handler applies it, gives a patched object or a 4xx
Status (or the one 500 kube answers itself, an unknown ``$patch`` directive), never another
exception, and leaves the current object as it was."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import gateway.apis.install  # noqa: F401 - defines every schema
from gateway.apimachinery import status
from gateway.endpoints import patch as patches

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)

SERVICE = {"$ref": "io.k8s.api.core.v1.Service"}
CURRENT = {
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                 "finalizers": ["a", "b"]},
    "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                       {"name": "https", "port": 443, "protocol": "TCP"}],
             "selector": {"app": "web"}, "type": "ClusterIP"},
}

#: Keys a patch is made of: the object's own, and strategic merge patch's directives.
KEYS = st.sampled_from((
    "metadata", "labels", "finalizers", "spec", "ports", "port", "name", "protocol",
    "selector", "type", "app", "x", "$patch", "$retainKeys", "$deleteFromPrimitiveList/finalizers",
    "$setElementOrder/ports", "$setElementOrder/finalizers", "$deleteFromPrimitiveList/ports",
))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 500),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(("replace", "delete", "merge", "web", "a", "http", "")),
                    st.text(max_size=5))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
POINTERS = st.sampled_from(("", "/", "/metadata", "/metadata/labels/app", "/spec/ports/0",
                            "/spec/ports/-", "/spec/ports/9", "/metadata/finalizers/1", "/x/y",
                            "/spec/ports/0/port", "/metadata/labels/a~1b", "/~2", "spec"))
OPERATIONS = st.fixed_dictionaries(
    {"op": st.sampled_from(("add", "remove", "replace", "move", "copy", "test", "bogus"))},
    optional={"path": st.one_of(POINTERS, SCALARS), "from": st.one_of(POINTERS, SCALARS),
              "value": VALUES})
JSON_PATCHES = st.one_of(st.lists(OPERATIONS, max_size=4), VALUES)
MAP_PATCHES = st.one_of(st.dictionaries(KEYS, VALUES, max_size=5), VALUES)
RAW = st.one_of(st.binary(max_size=30), st.sampled_from(
    (b"", b"null", b"{", b"[", b'{"a":1,"a":2}', b"\xff", b"1e999", b"[{}]")))
VALIDATIONS = st.sampled_from(("Strict", "Warn", "Ignore"))


def patched(body: bytes, patch_type: str, validation: str) -> Any:
    """The PATCH handler's steps for one patch type: read the body, then patch CURRENT."""
    parsed = patches.parse(body, patch_type, validation)
    if parsed.error is not None:
        raise parsed.error
    current = copy.deepcopy(CURRENT)
    if patch_type == patches.JSON_PATCH:
        result = patches.apply_json_patch(current, parsed.document)
    elif patch_type == patches.MERGE_PATCH:
        result = patches.merge_patch(current, parsed.document)
    else:
        result = patches.strategic_merge(current, parsed.document, SERVICE)
    assert current == CURRENT, "the current object was changed"
    return result


def judge(body: bytes, patch_type: str, validation: str) -> None:
    try:
        result = patched(body, patch_type, validation)
    except status.StatusError as err:
        kubes_own = err.code == 500 and "Unknown patch type" in err.message
        assert 400 <= err.code < 500 or kubes_own, err
        assert err.message, err
        return
    assert isinstance(result, dict), result


@PROPERTY
@given(JSON_PATCHES, VALIDATIONS)
def test_any_json_patch_patches_or_is_a_4xx_status(document: Any, validation: str) -> None:
    judge(json.dumps(document).encode(), patches.JSON_PATCH, validation)


@PROPERTY
@given(MAP_PATCHES, VALIDATIONS)
def test_any_merge_patch_patches_or_is_a_4xx_status(document: Any, validation: str) -> None:
    judge(json.dumps(document).encode(), patches.MERGE_PATCH, validation)


@PROPERTY
@given(MAP_PATCHES, VALIDATIONS)
def test_any_strategic_merge_patch_patches_or_is_a_4xx_status(
        document: Any, validation: str) -> None:
    judge(json.dumps(document).encode(), patches.STRATEGIC_PATCH, validation)


@PROPERTY
@given(RAW, st.sampled_from(patches.PATCH_TYPES), VALIDATIONS)
def test_any_bytes_of_any_patch_type_patch_or_are_a_4xx_status(
        body: bytes, patch_type: str, validation: str) -> None:
    if patch_type == patches.APPLY_PATCH:  # server-side apply reads it; parsing is the part
        try:
            patches.parse(body, patch_type, validation)
        except status.StatusError as err:
            assert 400 <= err.code < 500, err
        return
    judge(body, patch_type, validation)


# -- what the properties found, each on its own -------------------------------------------------


def _strategic(patch: dict) -> Any:
    return patches.strategic_merge(copy.deepcopy(CURRENT), patch, SERVICE)


def _refused(patch: dict) -> status.StatusError:
    try:
        _strategic(patch)
    except status.StatusError as err:
        return err
    raise AssertionError(f"{patch} was applied")


def test_directives_that_are_no_list_are_kubes_400s() -> None:
    """A $retainKeys, $deleteFromPrimitiveList or $setElementOrder that is no list was a
    TypeError (a 500 of the gateway's own) or applied; kube answers mergepatch's 400."""
    for patch, message in (
            ({"spec": {"$retainKeys": 5, "type": "ClusterIP"}}, patches.BAD_RETAIN_KEYS),
            ({"spec": {"$retainKeys": [{}]}}, patches.BAD_RETAIN_KEYS),
            ({"spec": {"$retainKeys": ["type"], "selector": {"a": "b"}}},
             patches.BAD_RETAIN_KEYS),
            ({"metadata": {"$deleteFromPrimitiveList/finalizers": True}},
             patches.BAD_PRIMITIVE_LIST),
            ({"metadata": {"$setElementOrder/finalizers": 5}}, patches.BAD_ELEMENT_ORDER)):
        err = _refused(patch)
        assert (err.code, err.reason, err.message) == (400, "BadRequest", message), patch


def test_retain_keys_keep_the_named_fields() -> None:
    result = _strategic({"spec": {"$retainKeys": ["type", "ports"], "type": "NodePort"}})
    assert set(result["spec"]) == {"type", "ports"}
    assert result["spec"]["type"] == "NodePort"


def test_deleting_from_a_missing_primitive_list_adds_nothing() -> None:
    result = _strategic({"spec": {"$deleteFromPrimitiveList/externalIPs": ["1.2.3.4"]}})
    assert "externalIPs" not in result["spec"]
    assert _strategic({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})[
        "metadata"]["finalizers"] == ["b"]


def test_an_unknown_patch_directive_is_kubes_internal_error() -> None:
    """kube's mergeMap knows replace and delete only; anything else is ErrBadPatchType,
    which kube's PATCH answers with 500 (it was applied as if absent)."""
    err = _refused({"spec": {"$patch": "merge", "type": "NodePort"}})
    assert (err.code, err.reason) == (500, "InternalError")
    assert err.message == ("Internal error occurred: Unknown patch type: merge in map: "
                           "map[$patch:merge type:NodePort]")
