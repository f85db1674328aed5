"""Representations, discovery, OpenAPI and metrics over HTTP; conformance checks in our own
words from the Kubernetes e2e suite's table_conversion.go, discovery.go and server_version.go."""

from __future__ import annotations

import json
import re
import urllib.error

import pytest
import yaml

from tests.support.api import API, CM, ROOT_CA, configmap, expect_status

pytestmark = pytest.mark.slow

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
POM = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
POML = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


@pytest.fixture(scope="module")
def preloaded(api: API) -> str:
    """One namespace for the whole module, holding ConfigMaps "one" (labelled x=y, two keys)
    and "two" (and the root CA every namespace holds); the tests here only read it (or add
    objects of other kinds)."""
    name = api.namespace()
    for made in (configmap("one", labels={"x": "y"}, a="1", b="2"), configmap("two")):
        code, body = api.post(CM.format(ns=name), made)
        assert code == 201, body
    return name


def raw(gateway, path: str, accept: str, **headers: str):
    return gateway.open("GET", path, headers={"Accept": accept, **headers})


def test_yaml(gateway, preloaded):
    response = raw(gateway, f"{CM.format(ns=preloaded)}/one", "application/yaml")
    assert response.headers["Content-Type"] == "application/yaml"
    assert yaml.safe_load(response.read())["data"] == {"a": "1", "b": "2"}


def test_protobuf_when_asked_first_and_nothing_acceptable_is_406(api, gateway, preloaded):
    response = raw(gateway, f"{CM.format(ns=preloaded)}/one",
                   "application/vnd.kubernetes.protobuf, application/json")
    assert response.headers["Content-Type"] == "application/vnd.kubernetes.protobuf"
    assert response.read().startswith(b"k8s\x00")
    response = raw(gateway, f"{CM.format(ns=preloaded)}/one",
                   "application/json, application/vnd.kubernetes.protobuf")
    assert response.headers["Content-Type"] == "application/json"
    assert json.loads(response.read())["metadata"]["name"] == "one"
    # kube lists its serializers (negotiation.NewNotAcceptableError)
    status = expect_status(api.get(f"{CM.format(ns=preloaded)}/one", Accept="text/html"),
                           406, "NotAcceptable",
                           message="only the following media types are accepted: "
                                   "application/json, application/yaml, "
                                   "application/vnd.kubernetes.protobuf")
    assert "details" not in status
    # a watch is negotiated once more for a type that can stream, which YAML cannot
    expect_status(api.get(f"{CM.format(ns=preloaded)}?watch=1", Accept="application/yaml"),
                  406, "NotAcceptable",
                  message="only the following media types are accepted: "
                          "application/json;stream=watch, "
                          "application/vnd.kubernetes.protobuf;stream=watch")


def test_table_list_with_the_columns_kubectl_shows(gateway, preloaded):
    table = json.loads(raw(gateway, CM.format(ns=preloaded), TABLE).read())
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["columnDefinitions"][0]["format"] == "name"
    rows = {row["cells"][0]: row for row in table["rows"]}
    assert rows["one"]["cells"][1] == 2 and re.fullmatch(r"\d+[smhdy].*", rows["one"]["cells"][2])
    assert rows["one"]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"]


def test_table_include_object(gateway, preloaded):
    path = f"{CM.format(ns=preloaded)}/one"
    full = json.loads(raw(gateway, f"{path}?includeObject=Object", TABLE).read())
    assert full["rows"][0]["object"]["data"] == {"a": "1", "b": "2"}
    bare = json.loads(raw(gateway, f"{path}?includeObject=None", TABLE).read())
    assert "object" not in bare["rows"][0]
    assert len(bare["rows"]) == 1


def test_table_columns_of_other_resources(api, gateway, preloaded):
    code, made = api.post(f"/api/v1/namespaces/{preloaded}/secrets",
                          {"metadata": {"name": "s"}, "stringData": {"a": "b", "c": "d"}})
    assert code == 201, made
    secrets = json.loads(raw(gateway, f"/api/v1/namespaces/{preloaded}/secrets", TABLE).read())
    assert [c["name"] for c in secrets["columnDefinitions"]] == ["Name", "Type", "Data", "Age"]
    assert secrets["rows"][0]["cells"][1:3] == ["Opaque", 2]
    namespaces = json.loads(raw(gateway, f"/api/v1/namespaces/{preloaded}", TABLE).read())
    assert [c["name"] for c in namespaces["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert namespaces["rows"][0]["cells"][1] == "Active"


def test_table_watch_events(gateway, preloaded):
    response = raw(gateway, f"{CM.format(ns=preloaded)}?watch=1&resourceVersion=0", TABLE)
    try:
        events = [json.loads(response.readline()) for _ in range(3)]  # the three there are
    finally:
        response.close()
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "ADDED"]
    assert all(e["object"]["kind"] == "Table" for e in events)
    assert "columnDefinitions" in events[0]["object"]
    assert all("columnDefinitions" not in e["object"] for e in events[1:])
    assert {e["object"]["rows"][0]["cells"][0] for e in events} == {"one", "two", ROOT_CA}


def test_partial_object_metadata(api, gateway, preloaded):
    one = json.loads(raw(gateway, f"{CM.format(ns=preloaded)}/one", POM).read())
    assert one["kind"] == "PartialObjectMetadata" and "data" not in one
    assert one["metadata"]["labels"] == {"x": "y"}
    listed = json.loads(raw(gateway, CM.format(ns=preloaded), POML).read())
    assert listed["kind"] == "PartialObjectMetadataList"
    assert {i["metadata"]["name"] for i in listed["items"]} == {"one", "two", ROOT_CA}
    # a list cannot be one object's metadata, nor one object a list (kube names the internal
    # Go type it has in hand)
    expect_status(api.get(CM.format(ns=preloaded), Accept=POM), 406, "NotAcceptable",
                  message="you requested PartialObjectMetadata, but the requested object is a "
                          "list (*core.ConfigMapList)")
    expect_status(api.get(f"{CM.format(ns=preloaded)}/one", Accept=POML), 406, "NotAcceptable",
                  message="you requested PartialObjectMetadataList, but the requested object is "
                          "not a list (*core.ConfigMap)")


def test_legacy_discovery(api):
    _, versions = api.get("/api")
    assert versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    _, groups = api.get("/apis")
    assert groups["kind"] == "APIGroupList"
    by_name = {g["name"]: g for g in groups["groups"]}
    for name in ("coordination.k8s.io", "discovery.k8s.io", "admissionregistration.k8s.io"):
        assert by_name[name]["preferredVersion"] == {"groupVersion": f"{name}/v1",
                                                     "version": "v1"}
    _, group = api.get("/apis/coordination.k8s.io")
    assert group["kind"] == "APIGroup" and group["preferredVersion"]["version"] == "v1"
    _, resources = api.get("/api/v1")
    assert resources["kind"] == "APIResourceList" and resources["groupVersion"] == "v1"
    by_resource = {r["name"]: r for r in resources["resources"]}
    cm = by_resource["configmaps"]
    assert cm["verbs"] == sorted(cm["verbs"]) and cm["namespaced"] and cm["shortNames"] == ["cm"]
    assert cm["storageVersionHash"] and cm["singularName"] == "configmap"
    assert by_resource["namespaces/status"]["verbs"] == ["get", "patch", "update"]
    assert api.get("/apis/nothing.example.com")[0] == 404
    assert api.get("/apis/coordination.k8s.io/v9")[0] == 404


def test_aggregated_discovery_with_etag(gateway):
    response = raw(gateway, "/apis", AGGREGATED)
    assert response.headers["Content-Type"] == AGGREGATED
    etag = response.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    doc = json.loads(response.read())
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    groups = {item["metadata"]["name"]: item for item in doc["items"]}
    lease = groups["coordination.k8s.io"]["versions"][0]["resources"][0]
    assert lease["resource"] == "leases" and lease["scope"] == "Namespaced"
    assert lease["responseKind"] == {"group": "coordination.k8s.io", "version": "v1",
                                     "kind": "Lease"}
    core = json.loads(raw(gateway, "/api", AGGREGATED).read())
    assert [i["metadata"]["name"] for i in core["items"]] == [""]
    with pytest.raises(urllib.error.HTTPError) as err:
        raw(gateway, "/apis", AGGREGATED, **{"If-None-Match": etag})
    assert err.value.code == 304
    plain = raw(gateway, "/apis", "application/json")
    assert json.loads(plain.read())["kind"] == "APIGroupList"


def test_openapi_v2(api):
    code, doc = api.get("/openapi/v2")
    assert code == 200 and doc["swagger"] == "2.0"
    cm = doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]
    assert cm["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "ConfigMap",
                                                      "version": "v1"}]
    assert doc["definitions"]["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"][
        "x-kubernetes-patch-merge-key"] == "port"
    assert "/api/v1/namespaces/{namespace}/configmaps/{name}" in doc["paths"]


def test_openapi_v3_index_and_cacheable_documents(api, gateway):
    _, index = api.get("/openapi/v3")
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    assert "apis/coordination.k8s.io/v1" in index["paths"]
    response = gateway.open("GET", url)
    assert "immutable" in response.headers["Cache-Control"]
    doc = json.loads(response.read())
    assert doc["openapi"].startswith("3.")
    schemas = doc["components"]["schemas"]
    assert "io.k8s.api.core.v1.ConfigMap" in schemas
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    moved = gateway.open("GET", "/openapi/v3/api/v1?hash=OLD")  # an old hash is redirected
    assert moved.geturl().endswith(url)


def test_server_version(api):
    code, info = api.get("/version")
    assert code == 200
    assert re.fullmatch(r"\d+", info["major"]) and re.fullmatch(r"\d+", info["minor"])
    assert info["gitVersion"].startswith(f"v{info['major']}.{info['minor']}.")


def test_metrics(api, preloaded):
    assert api.get(f"{CM.format(ns=preloaded)}/one")[0] == 200
    code, text = api.get("/metrics")
    assert code == 200
    assert re.search(r'apiserver_request_total\{code="200",component="apiserver",dry_run="",'
                     r'group="",resource="configmaps",scope="resource",subresource="",'
                     r'verb="GET",version="v1"\} \d+', text)
    assert "apiserver_request_duration_seconds_bucket" in text
    assert "apiserver_current_inflight_requests" in text
    assert re.search(r'etcd_request_duration_seconds_count\{operation="get",type="configmaps"\}',
                     text)
