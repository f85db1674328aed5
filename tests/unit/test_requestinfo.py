"""Request classification follows kube's RequestInfoFactory."""

from __future__ import annotations

import pytest

from gateway.apimachinery.requestinfo import parse_request_info


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces", "", ("list", "", "v1", "", "namespaces", "", "")),
        ("GET", "/api/v1/namespaces/default", "",
         ("get", "", "v1", "default", "namespaces", "default", "")),
        ("GET", "/api/v1/namespaces/default/configmaps", "",
         ("list", "", "v1", "default", "configmaps", "", "")),
        ("GET", "/api/v1/namespaces/default/configmaps", "watch=true",
         ("watch", "", "v1", "default", "configmaps", "", "")),
        ("GET", "/api/v1/namespaces/default/configmaps", "watch=false",
         ("list", "", "v1", "default", "configmaps", "", "")),
        ("GET", "/api/v1/watch/namespaces/default/configmaps", "",
         ("watch", "", "v1", "default", "configmaps", "", "")),
        ("POST", "/api/v1/namespaces/default/configmaps", "",
         ("create", "", "v1", "default", "configmaps", "", "")),
        ("PUT", "/api/v1/namespaces/default/configmaps/x", "",
         ("update", "", "v1", "default", "configmaps", "x", "")),
        ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", "",
         ("patch", "coordination.k8s.io", "v1", "ns", "leases", "l", "")),
        ("DELETE", "/api/v1/namespaces/default/configmaps", "",
         ("deletecollection", "", "v1", "default", "configmaps", "", "")),
        ("DELETE", "/api/v1/namespaces/default/configmaps/x", "",
         ("delete", "", "v1", "default", "configmaps", "x", "")),
        ("PUT", "/api/v1/namespaces/ns/status", "",
         ("update", "", "v1", "ns", "namespaces", "ns", "status")),
        ("PUT", "/api/v1/namespaces/ns/finalize", "",
         ("update", "", "v1", "ns", "namespaces", "ns", "finalize")),
        ("GET", "/apis/apps/v1/namespaces/ns/deployments/d/scale", "",
         ("get", "apps", "v1", "ns", "deployments", "d", "scale")),
        ("GET", "/api/v1/configmaps", "fieldSelector=metadata.name%3Dx",
         ("list", "", "v1", "", "configmaps", "x", "")),
    ],
)
def test_resource_requests(method, path, query, expected):
    info = parse_request_info(method, path, query)
    assert info.is_resource_request
    got = (info.verb, info.api_group, info.api_version, info.namespace, info.resource,
           info.name, info.subresource)
    assert got == expected


@pytest.mark.parametrize("path", ["/healthz", "/api", "/api/v1", "/apis", "/apis/apps",
                                  "/apis/apps/v1", "/version", "/openapi/v2", "/"])
def test_non_resource_requests(path):
    info = parse_request_info("GET", path)
    assert not info.is_resource_request
    assert info.verb == "get"


def test_long_running_and_mutating():
    assert parse_request_info("GET", "/api/v1/pods", "watch=1").is_long_running
    assert not parse_request_info("GET", "/api/v1/pods").is_long_running
    assert parse_request_info("POST", "/api/v1/namespaces/a/pods").is_mutating
    assert not parse_request_info("GET", "/api/v1/pods").is_mutating
