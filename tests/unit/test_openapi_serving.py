"""/openapi/v2 served as kube-openapi serves it: Accept negotiation between JSON and the
protobuf types (406 otherwise), gzip for bodies of 1400 bytes or more when accepted, one ETag
for both forms (the quoted SHA-512 of the JSON), 304 on If-None-Match or If-Modified-Since."""

from __future__ import annotations

import gzip
import hashlib
import json
from email.utils import formatdate

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.server.openapi import JSON, PROTOBUF_V2, V2Spec, v2_media, v2_message

DEPRECATED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
BIG = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1"},
       "definitions": {f"D{i}": {"type": "object", "description": "x" * 40} for i in range(60)}}
SMALL = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1"}}


def serve(spec: V2Spec, **headers: str):
    return spec.serve(make_mocked_request("GET", "/openapi/v2", headers=headers))


@pytest.mark.parametrize("accept, expected", [
    ("", (JSON, False)),
    ("*/*", (JSON, False)),
    ("application/*", (JSON, False)),
    ("application/json", (JSON, False)),
    (DEPRECATED, (PROTOBUF_V2, True)),
    (PROTOBUF_V2, (PROTOBUF_V2, True)),
    (f"{DEPRECATED}, application/json", (PROTOBUF_V2, True)),
    (f"application/json;q=0.5, {DEPRECATED}", (PROTOBUF_V2, True)),
    (f"*/*, {DEPRECATED}", (PROTOBUF_V2, True)),  # the more specific first at equal q
    (f"{DEPRECATED};q=0, application/json", (JSON, False)),
    ("text/html, application/json;q=0.9", (JSON, False)),
    ("text/plain", None),
    ("application/yaml", None),
    ("application/vnd.kubernetes.protobuf", None),
])
def test_accept_negotiation(accept, expected):
    assert v2_media(accept) == expected


def test_json_and_etag():
    spec = V2Spec(BIG)
    response = serve(spec, Accept="application/json")
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    assert json.loads(response.body) == BIG
    assert response.headers["ETag"] == \
        '"' + hashlib.sha512(response.body).hexdigest().upper() + '"'
    assert response.headers["Vary"] == "Accept-Encoding, Accept"
    assert "Last-Modified" in response.headers and "Content-Encoding" not in response.headers


def test_protobuf_has_the_same_etag():
    spec = V2Spec(BIG)
    response = serve(spec, Accept=DEPRECATED)
    assert response.headers["Content-Type"] == PROTOBUF_V2
    decoded = v2_message("Document")()
    decoded.ParseFromString(response.body)
    assert decoded.swagger == "2.0" and len(decoded.definitions.additional_properties) == 60
    assert response.headers["ETag"] == serve(spec).headers["ETag"]


@pytest.mark.parametrize("accept", ["application/json", DEPRECATED])
def test_gzip_when_accepted_and_large_enough(accept):
    spec = V2Spec(BIG)
    plain = serve(spec, Accept=accept).body
    assert len(plain) >= 1400
    packed = serve(spec, Accept=accept, **{"Accept-Encoding": "deflate, gzip"})
    assert packed.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed.body) == plain
    refused = serve(spec, Accept=accept, **{"Accept-Encoding": "gzip;q=0"})
    assert "Content-Encoding" not in refused.headers and refused.body == plain


def test_small_bodies_are_not_compressed():
    response = serve(V2Spec(SMALL), **{"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in response.headers
    assert json.loads(response.body) == SMALL


@pytest.mark.parametrize("header", ["{etag}", 'W/{etag}', '"other", {etag}', "*"])
def test_304_on_a_matching_if_none_match(header):
    spec = V2Spec(SMALL)
    response = serve(spec, **{"If-None-Match": header.format(etag=spec.etag)})
    assert response.status == 304 and response.body is None
    assert response.headers["ETag"] == spec.etag
    assert "Content-Type" not in response.headers


def test_200_on_an_old_etag():
    spec = V2Spec(SMALL)
    assert serve(spec, **{"If-None-Match": '"OLD"'}).status == 200
    assert serve(V2Spec({**SMALL, "host": "x"}), **{"If-None-Match": spec.etag}).status == 200


def test_if_modified_since():
    spec = V2Spec(SMALL)
    later = formatdate(spec.modified + 10, usegmt=True)
    earlier = formatdate(spec.modified - 10, usegmt=True)
    assert serve(spec, **{"If-Modified-Since": later}).status == 304
    assert serve(spec, **{"If-Modified-Since": earlier}).status == 200
    assert serve(spec, **{"If-Modified-Since": "garbage"}).status == 200
    # If-None-Match decides alone when present
    assert serve(spec, **{"If-Modified-Since": later, "If-None-Match": '"OLD"'}).status == 200


def test_406_for_nothing_acceptable():
    response = serve(V2Spec(SMALL), Accept="text/plain")
    assert response.status == 406 and response.body is None
