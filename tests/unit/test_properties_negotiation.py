"""Properties of content negotiation and request bodies (issue 19, item 4: hostile input):
any Accept header gives a representation or kube's 406 Status; any Content-Type with any body
gives an object or a 4xx Status (400 for a body that does not decode, 415 for a type nobody
reads); and whatever decodes can be written out again as UTF-8, as everything downstream
(validation, storage, logs) needs."""

from __future__ import annotations

import json

from aiohttp.test_utils import make_mocked_request
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.apimachinery import status
from gateway.endpoints.negotiation import MediaType, negotiate
from gateway.endpoints.request import body_media_type, decode_strict

PROPERTY = settings(max_examples=400, derandomize=True, database=None, deadline=None)

MEDIA = st.sampled_from((
    "application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
    "application/*", "*/*", "text/*", "text/yaml", "application/x-yaml", "text/html",
    "application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io",
    "application/yaml;as=Table;v=v1;g=meta.k8s.io", "application/json;as=Bogus;g=x;v=y",
    "application/json;q=0", "application/json;q=nan", "application/json;q=1e400",
    "application/json;q=-1", "application/json;q=abc", "", ";", "/", "*", "a/b/c", ";;=;"))
HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e),
                      max_size=60)
ACCEPT = st.one_of(st.lists(MEDIA, max_size=4).map(", ".join), HEADER_TEXT,
                   st.lists(st.one_of(MEDIA, HEADER_TEXT), max_size=3).map(",".join))
TRANSFORMS = st.sets(st.sampled_from(("Table", "PartialObjectMetadata",
                                      "PartialObjectMetadataList")))


@PROPERTY
@given(ACCEPT, TRANSFORMS, st.booleans(), st.booleans())
def test_any_accept_header_is_a_representation_or_a_406(
        accept: str, transforms: set[str], yaml_ok: bool, protobuf: bool) -> None:
    request = make_mocked_request("GET", "/api/v1/configmaps", headers={"Accept": accept})
    try:
        media = negotiate(request, frozenset(transforms), yaml_ok=yaml_ok, protobuf=protobuf)
    except status.StatusError as err:
        assert (err.code, err.reason) == (406, "NotAcceptable"), err
        return
    assert isinstance(media, MediaType)
    assert media.format in ("json", "yaml", "protobuf")
    assert media.format != "protobuf" or protobuf or media.transform
    assert media.format != "yaml" or yaml_ok
    assert not media.transform or media.transform in transforms


# -- request bodies -------------------------------------------------------------------------------

CONTENT_TYPES = st.one_of(MEDIA, HEADER_TEXT, st.sampled_from((
    "application/json; charset=utf-8", "APPLICATION/JSON", "application/yaml ; x=y",
    "application/merge-patch+json", "application/apply-patch+yaml")))
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)
BODIES = st.one_of(
    st.binary(max_size=40),
    JSONISH.map(lambda value: json.dumps(value).encode()),
    # lone surrogate escapes, which Go reads as U+FFFD
    st.sampled_from((b'{"metadata":{"name":"\\ud800"}}', b'{"\\udfff":"\\ud83d\\ude00 \\udc00"}',
                     b'{"a":"\\ud800","a":1}', b'a: "\\ud800"', b"{a: [1, {b: c}]}",
                     b"{", b"- 1", b"\xff\xfe", b"null", b"")))


def utf8(value: object) -> None:
    """Everything in ``value`` can be written as UTF-8 (no lone surrogate)."""
    json.dumps(value, ensure_ascii=False).encode("utf-8")


@PROPERTY
@example(b'{"metadata":{"name":"\\ud800","annotations":{"a":"\\udfff"}}}', "application/json")
@example(b'metadata: {name: "\\ud800"}', "application/yaml")
@given(BODIES, CONTENT_TYPES)
def test_any_body_of_any_content_type_is_an_object_or_a_4xx(body: bytes, content_type: str
                                                            ) -> None:
    request = make_mocked_request("POST", "/api/v1/namespaces/default/configmaps",
                                  headers={"Content-Type": content_type})
    media = body_media_type(request)
    try:
        obj, _ = decode_strict(body, media, "ConfigMap")
    except status.StatusError as err:
        assert err.code in (400, 415), err
        utf8(err.message)
        return
    assert isinstance(obj, dict)
    utf8(obj)


def test_lone_surrogate_escapes_decode_as_go_decodes_them() -> None:
    """A "\\ud800" escape without its pair is U+FFFD, as in Go; a pair is its character. The
    lone one was kept, and a name or annotation holding it was a 500 (UnicodeEncodeError)."""
    obj, _ = decode_strict(b'{"metadata":{"name":"\\ud800","annotations":{"\\udfff":'
                           b'"\\ud83d\\ude00"}}}', "application/json")
    assert obj == {"metadata": {"name": "\ufffd", "annotations": {"\ufffd": "\U0001F600"}}}
    obj, _ = decode_strict(b'metadata: {name: "\\ud800"}', "application/yaml")
    assert obj == {"metadata": {"name": "\ufffd"}}
