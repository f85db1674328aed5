"""Negotiating protobuf as kube-apiserver does: the client's best acceptable type wins when the
kind has a protobuf form; a custom resource falls back to JSON or is 406; transforms as
kube's RequestScope allows them; Status errors follow the Accept header too."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.apimachinery import status
from gateway.endpoints.negotiation import TRANSFORMS, MediaType, negotiate, status_response
from gateway.server.genericapiserver import not_found_handler, not_found_until_installed
from tests.support import kubeproto

PB = "application/vnd.kubernetes.protobuf"
CLIENT_GO = f"{PB}, application/json"
METADATA_LIST = (f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                 "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                 "application/json")


def media(accept: str, *, protobuf: bool = True, watch: bool = False) -> MediaType:
    request = make_mocked_request("GET", "/", headers={"Accept": accept} if accept else {})
    return negotiate(request, TRANSFORMS, yaml_ok=not watch, protobuf=protobuf)


@pytest.mark.parametrize(("accept", "protobuf", "expected"), [
    ("", True, MediaType("json")),  # no Accept: JSON, the default
    (CLIENT_GO, True, MediaType("protobuf")),
    (CLIENT_GO, False, MediaType("json")),  # a custom resource: JSON is acceptable too
    ("application/json, application/vnd.kubernetes.protobuf", True, MediaType("json")),
    ("application/*", True, MediaType("json")),  # kube's first serializer
    ("*/*, application/vnd.kubernetes.protobuf", True, MediaType("protobuf")),  # concrete first
    ("application/vnd.kubernetes.protobuf;q=0.5, application/json", True, MediaType("json")),
    ("application/vnd.kubernetes.protobuf;q=0, application/yaml", True, MediaType("yaml")),
    (METADATA_LIST, True, MediaType("protobuf", "PartialObjectMetadataList")),
    (METADATA_LIST, False, MediaType("protobuf", "PartialObjectMetadataList")),  # CRs too
    (f"{PB};as=Table;g=meta.k8s.io;v=v1, application/json", True, MediaType("json")),
    ("application/yaml;as=Table;g=meta.k8s.io;v=v1", True, MediaType("yaml", "Table")),
    (f"{PB};as=Table;g=example.com;v=v1, {PB}", True, MediaType("protobuf")),
])
def test_the_best_acceptable_representation(accept: str, protobuf: bool,
                                             expected: MediaType) -> None:
    assert media(accept, protobuf=protobuf) == expected


def test_nothing_acceptable_is_kubes_406() -> None:
    with pytest.raises(status.StatusError) as raised:
        media(PB, protobuf=False)  # a custom resource asked for protobuf only
    assert (raised.value.code, raised.value.message) == (
        406, "only the following media types are accepted: application/json, "
             "application/yaml, application/vnd.kubernetes.protobuf")
    with pytest.raises(status.StatusError) as raised:
        media(f"{PB};as=Table;g=meta.k8s.io;v=v1")  # kube serves no Table in protobuf
    assert raised.value.code == 406


def test_content_types() -> None:
    chosen = media(CLIENT_GO, watch=True)
    assert chosen.content_type == PB
    assert chosen.stream_content_type == f"{PB};stream=watch"
    assert media("application/json").stream_content_type == "application/json"
    # kube writes the serializer's own type for a transformed answer too
    assert media("application/json;as=Table;g=meta.k8s.io;v=v1").content_type == \
        "application/json"


def test_errors_in_protobuf_when_the_client_asked_for_it_first() -> None:
    err = status.invalid("ConfigMap", "c", [status.Cause("FieldValueRequired",
                                                         "Required value", "data")])
    response = status_response({"Accept": CLIENT_GO}, err)
    assert (response.status, response.headers["Content-Type"]) == (422, PB)
    decoded = kubeproto.decode(response.body, kubeproto.META + "Status", "v1", "Status")
    assert (decoded.code, decoded.reason, decoded.details.kind) == (422, "Invalid", "ConfigMap")
    assert [(c.reason, c.field) for c in decoded.details.causes] == [
        ("FieldValueRequired", "data")]
    # a Retry-After travels with it
    busy = status_response({"Accept": PB}, status.paths_not_installed())
    assert busy.headers["Retry-After"] == "5"
    # JSON first, a transform (errors are never transformed), or nothing acceptable: JSON
    for accept in ("application/json, " + PB, METADATA_LIST, "text/html", ""):
        answer = status_response({"Accept": accept}, err)
        assert answer.headers["Content-Type"] == "application/json", accept
        assert answer.status == 422


async def test_the_end_of_the_chain_negotiates_its_status() -> None:
    """Nobody serves the path (404) or not every path is installed yet (503, Retry-After):
    protobuf for a client that asks for it first, JSON otherwise, as kube's ErrorNegotiated."""
    def request(accept: str) -> Any:
        return make_mocked_request("GET", "/apis/nowhere.example.com/v1/things",
                                   headers={"Accept": accept})

    response = await not_found_handler(request(CLIENT_GO))
    assert (response.status, response.content_type) == (404, PB)
    found = kubeproto.decode(response.body, kubeproto.META + "Status", "v1", "Status")
    assert (found.code, found.reason, found.message) == (
        404, "NotFound", "the server could not find the requested resource")
    early = await not_found_until_installed(lambda: False)(request(CLIENT_GO))
    assert (early.status, early.content_type, early.headers["Retry-After"]) == (503, PB, "5")
    unavailable = kubeproto.decode(early.body, kubeproto.META + "Status", "v1", "Status")
    assert (unavailable.reason, unavailable.details.retryAfterSeconds) == (
        "ServiceUnavailable", 5)
    as_json = await not_found_handler(request("application/json, " + PB))
    assert (as_json.status, as_json.content_type) == (404, "application/json")
