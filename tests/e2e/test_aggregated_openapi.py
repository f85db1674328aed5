"""The aggregated OpenAPI documents end to end: /openapi/v2 as JSON and as the protobuf kubectl
asks for (kubectl's errors for an unknown kind, validation, explain), the backend's v2 document
merged in after its APIService is registered, and the backend's /openapi/v3 group version
listed in the gateway's index and served through it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest

from tests.support.backend import (
    APISERVICE_NAME,
    DEFINITION,
    GROUP,
    GV_PATH,
    LIST_DEFINITION,
    VERSION,
    BackendProcess,
)
from tests.support.gateway import GatewayProcess, send
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
V3_KEY = f"apis/{GROUP}/{VERSION}"
UNKNOWN_KIND = """apiVersion: foo.example.com/v1
kind: Bar
metadata:
  name: bar-one
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with GatewayProcess(tmp_path_factory.mktemp("openapi"),
                        "--enable-aggregator-routing") as proc:
        yield proc


@pytest.fixture(scope="module")
def backend(gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[BackendProcess]:
    proc = BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), gw)
    with proc:
        gw.kubectl("apply", "-f", "-", input=proc.manifests_yaml("127.0.0.1"))
        yield proc


def get(gw: GatewayProcess, path: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    return send(gw.url + path, "GET", gw.ssl_context(), headers=headers)


def v2_json(gw: GatewayProcess) -> dict:
    code, body, headers = get(gw, "/openapi/v2", Accept="application/json")
    assert code == 200, body[:300]
    assert headers["Content-Type"] == "application/json"
    return json.loads(body)


# -- the gateway's own document ---------------------------------------------------------------


def test_unknown_kind_is_kubes_no_matches_error(gw):
    """kubectl validates an unknown kind against /openapi/v2 in protobuf (it is not in v3):
    the document must parse for kubectl to get as far as the REST mapping."""
    result = gw.kubectl("apply", "-f", "-", input=UNKNOWN_KIND, check=False)
    assert result.returncode == 1
    assert "proto:" not in result.stderr, result.stderr
    assert result.stderr == (
        'error: resource mapping not found for name: "bar-one" namespace: "" from "STDIN": '
        'no matches for kind "Bar" in version "foo.example.com/v1"\n'
        "ensure CRDs are installed first\n"), result.stderr


def test_strict_validation_still_works(gw):
    good = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict-good\n"
            "  namespace: default\ndata:\n  a: b\n")
    out = gw.kubectl("apply", "--validate=strict", "-f", "-", input=good).stdout
    assert "configmap/strict-good created" in out
    bad = good.replace("strict-good", "strict-bad") + "bogus: 1\n"
    result = gw.kubectl("apply", "--validate=strict", "-f", "-", input=bad, check=False)
    assert result.returncode == 1
    assert 'unknown field "bogus"' in result.stderr, result.stderr


def test_explain_from_the_v2_protobuf(gw):
    """kubectl's openapiv2 explain reads every definition of the protobuf document."""
    out = gw.kubectl("explain", "configmaps.data", "--output=plaintext-openapiv2").stdout
    assert "KIND:     ConfigMap" in out and "FIELD:    data" in out, out


def test_protobuf_gzip_etag_and_304(gw):
    code, body, headers = get(gw, "/openapi/v2", Accept=PROTOBUF)
    assert code == 200
    assert headers["Content-Type"] == \
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert not body.startswith(b"{")
    etag = headers["ETag"]
    assert "Accept" in headers["Vary"]
    code, packed, zipped = get(gw, "/openapi/v2", Accept=PROTOBUF, **{"Accept-Encoding": "gzip"})
    assert code == 200 and zipped["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed) == body
    code, _, json_headers = get(gw, "/openapi/v2", Accept="application/json")
    assert code == 200 and json_headers["ETag"] == etag  # one ETag for both forms, as kube
    code, body, _ = get(gw, "/openapi/v2", Accept=PROTOBUF, **{"If-None-Match": etag})
    assert (code, body) == (304, b"")
    code, _, _ = get(gw, "/openapi/v2", Accept="text/plain")
    assert code == 406


# -- a backend's documents --------------------------------------------------------------------


def test_backend_definitions_merged_into_v2(gw, backend):
    def merged() -> dict:
        doc = v2_json(gw)
        assert DEFINITION in doc["definitions"], sorted(doc["definitions"])[-5:]
        return doc

    doc = eventually(merged, timeout=60, what="the backend's Flunder in /openapi/v2")
    assert LIST_DEFINITION in doc["definitions"]
    assert f"{GV_PATH}/namespaces/{{namespace}}/flunders" in doc["paths"]
    # the gateway's own definitions stay as they are (the backend's ObjectMeta differs)
    assert "managedFields" in doc["definitions"][
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
    assert "io.k8s.api.core.v1.ConfigMap" in doc["definitions"]
    downloads = backend.requests("/openapi/v2")
    assert downloads and all(r.user == "system:aggregator" and r.groups == []
                             for r in downloads), downloads
    # the protobuf form has it too: kubectl explains a flunder from it
    out = gw.kubectl("explain", "flunders.spec", "--output=plaintext-openapiv2").stdout
    assert "KIND:     Flunder" in out and "reference" in out, out


def test_backend_group_version_in_the_v3_index_and_served(gw, backend):
    def listed() -> str:
        code, body, _ = get(gw, "/openapi/v3")
        assert code == 200
        paths = json.loads(body)["paths"]
        assert V3_KEY in paths, sorted(paths)
        assert "api/v1" in paths
        return paths[V3_KEY]["serverRelativeURL"]

    url = eventually(listed, timeout=60, what="the backend's group version in /openapi/v3")
    assert url.startswith(f"/openapi/v3/{V3_KEY}?hash=")
    code, body, _ = get(gw, url)
    assert code == 200, body[:300]
    document = json.loads(body)
    assert DEFINITION in document["components"]["schemas"]
    # the backend's own caching passes through, after the gateway's filter's value (kube's
    # proxy adds the backend's headers to those its filters wrote first)
    response = gw.open("GET", url)
    try:
        values = response.headers.get_all("Cache-Control")
    finally:
        response.close()
    assert values[0] == "no-cache, private" and any("immutable" in v for v in values[1:]), values
    raw = gw.kubectl("get", "--raw", f"/openapi/v3/{V3_KEY}").stdout
    assert DEFINITION in json.loads(raw)["components"]["schemas"]
    code, _, _ = get(gw, "/openapi/v3/apis/nothing.example.com/v1")
    assert code == 404


def test_kubectl_explain_flunders(gw, backend):
    def explained() -> str:
        result = gw.kubectl("explain", "flunders.spec", check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    out = eventually(explained, timeout=60, what="kubectl explain flunders")
    assert "KIND:       Flunder" in out and "reference" in out, out


def test_apiservice_deleted_drops_its_documents(gw, backend):
    eventually(lambda: DEFINITION in v2_json(gw)["definitions"], timeout=60,
               what="the backend's definitions merged")
    gw.kubectl("delete", "apiservice", APISERVICE_NAME)
    try:
        eventually(lambda: DEFINITION not in v2_json(gw)["definitions"],
                   what="the backend's definitions gone")

        def unlisted() -> bool:
            code, body, _ = get(gw, "/openapi/v3")
            return code == 200 and V3_KEY not in json.loads(body)["paths"]

        eventually(unlisted, what="the backend's group version gone from /openapi/v3")
    finally:
        gw.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
