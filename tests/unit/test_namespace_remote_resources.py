"""Which remote resources the namespace controller empties, and which group versions it
reports as failed: client-go's ServerPreferredNamespacedResources (over aggregated discovery,
stale versions failing) filtered to the delete verb, on the gateway's real discovery store."""

from __future__ import annotations

from typing import Any

from gateway.aggregator.namespaced import RemoteNamespacedResources
from gateway.aggregator.routes import Route, ServiceRef
from gateway.server.discovery import (
    AGGREGATOR_SOURCE,
    STALE,
    DiscoveryStore,
    VersionDocument,
)
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ResolveError, ServiceAddress

ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class NoResolver:
    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        raise ResolveError("not asked in these tests")


def resource(plural: str, scope: str = "Namespaced", verbs: list[str] | None = None
             ) -> dict[str, Any]:
    return {"resource": plural, "scope": scope, "verbs": ALL if verbs is None else verbs,
            "responseKind": {"group": "", "version": "", "kind": plural.title()}}


def remote_route(group: str, version: str, priority: int) -> Route:
    return Route(f"{version}.{group}", group, version, ServiceRef("ns", "svc"),
                 group_priority_minimum=1000, version_priority=priority, available=True)


def setup(remote: list[VersionDocument], local: list[VersionDocument] = ()
          ) -> RemoteNamespacedResources:
    routes = {(d.group, d.version): remote_route(d.group, d.version, d.version_priority or 0)
              for d in remote}
    routes.update({(d.group, d.version): Route(f"{d.version}.{d.group}", d.group, d.version,
                                               None, available=True) for d in local})
    store = DiscoveryStore()
    store.add_source("local", 100, lambda: list(local))
    store.add_source("aggregator", AGGREGATOR_SOURCE)
    for document in remote:
        store.put("aggregator", document)
    return RemoteNamespacedResources(store.merged, lambda g, v: routes.get((g, v)),
                                     ClientManager(), NoResolver())


def chosen(remote: RemoteNamespacedResources) -> list[tuple[str, str, str]]:
    return sorted((r.group, r.version, r.plural) for r in remote.discover().resources)


def test_each_group_resource_once_from_its_preferred_version():
    found = setup([
        VersionDocument("wardle.example.com", "v1", (resource("flunders"),),
                        version_priority=20),
        VersionDocument("wardle.example.com", "v1beta1",
                        (resource("flunders"), resource("fischers")), version_priority=10),
    ])
    assert chosen(found) == [("wardle.example.com", "v1", "flunders"),
                             ("wardle.example.com", "v1beta1", "fischers")]
    assert found.discover().failed == {}


def test_cluster_scoped_and_undeletable_resources_are_left_out():
    found = setup([VersionDocument("wardle.example.com", "v1", (
        resource("flunders"), resource("clusterflunders", scope="Cluster"),
        resource("reviews", verbs=["create"]),
        resource("readonly", verbs=["get", "list"])))])
    assert chosen(found) == [("wardle.example.com", "v1", "flunders")]
    [one] = found.discover().resources
    assert "deletecollection" in one.verbs


def test_a_stale_version_fails_and_the_next_fresh_one_is_used():
    found = setup([
        VersionDocument("wardle.example.com", "v1", (resource("flunders"),), STALE,
                        version_priority=20),
        VersionDocument("wardle.example.com", "v1beta1", (resource("flunders"),),
                        version_priority=10),
        VersionDocument("metrics.k8s.io", "v1beta1", (resource("pods"),), STALE),
    ])
    discovered = found.discover()
    assert discovered.failed == {
        "wardle.example.com/v1": "stale GroupVersion discovery: wardle.example.com/v1",
        "metrics.k8s.io/v1beta1": "stale GroupVersion discovery: metrics.k8s.io/v1beta1"}
    assert chosen(found) == [("wardle.example.com", "v1beta1", "flunders")]


def test_the_gateways_own_group_versions_are_not_remote():
    found = setup(
        [VersionDocument("example.com", "v1alpha1", (resource("widgets"), resource("gadgets")),
                         version_priority=5)],
        local=[VersionDocument("example.com", "v1", (resource("widgets"),),
                               version_priority=100),
               VersionDocument("", "v1", (resource("configmaps"),)),
               VersionDocument("apps", "v1", (resource("deployments"),))])
    # widgets are discovered in the local v1 first: that version is the one deleted (by the
    # controller's own stores), not the remote v1alpha1
    assert chosen(found) == [("example.com", "v1alpha1", "gadgets")]


def test_answers_become_client_gos_errors():
    """What the controller reports for a backend's (or the proxy's) answer."""
    from gateway.aggregator.namespaced import client_error
    from gateway.controllers.namespacecontent import is_method_not_supported, is_not_found

    status = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,'
              b'"reason":"Forbidden","message":"flunders is forbidden: no"}')
    err = client_error(403, "application/json", status)
    assert (err.code, err.reason, err.message) == (403, "Forbidden", "flunders is forbidden: no")
    err = client_error(503, "text/plain; charset=utf-8", b"service unavailable\n")
    assert err.message == "the server is currently unable to handle the request"
    err = client_error(500, "text/plain", b"unable to load root certificates: no PEM")
    assert err.message == ('an error on the server ("unable to load root certificates: no PEM")'
                           " has prevented the request from succeeding")
    assert is_not_found(client_error(404, "text/plain", b"404 page not found"))
    assert is_method_not_supported(client_error(405, "application/json", b"{}"))
    # a 405 whose Status gives another reason is not "method not supported" to client-go
    other = b'{"kind":"Status","status":"Failure","code":405,"reason":"BadRequest"}'
    assert not is_method_not_supported(client_error(405, "application/json", other))
