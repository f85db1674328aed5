"""Group versions installed and removed while the gateway serves (what CRDs will do).

A real ``Gateway`` (SQLite store, watch caches, post-start hooks, the whole handler chain over
TLS with the development PKI) serves; the test installs a resource of a new group on the
apiextensions server at run time and removes it again. Everything that depends on the served
group versions must follow: routing, the legacy and aggregated discovery documents, the
OpenAPI documents, and the local APIService (automanaged "true") of the group version.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.aggregator.autoregister import continuous_apiservice
from gateway.app.gateway import Gateway
from gateway.app.run import complete_with_dev_pki
from gateway.cli import build_parser
from gateway.options import ServeOptions
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.server.genericapiserver import GenericAPIServer
from gateway.server.tls import server_ssl_context
from tests.support.wait import eventually_async

GROUP = "widgets.example.com"
#: Any known definition does for the OpenAPI documents (a resource without one has no paths).
WIDGETS = ResourceDef(group=GROUP, version="v1", kind="Widget", plural="widgets",
                      singular="widget", namespaced=False, schema="io.k8s.api.core.v1.ConfigMap")
GADGETS = ResourceDef(group=GROUP, version="v1", kind="Gadget", plural="gadgets",
                      singular="gadget", namespaced=True)
APISERVICE = f"/apis/apiregistration.k8s.io/v1/apiservices/v1.{GROUP}"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


async def widgets_handler(request: web.BaseRequest, info: Any) -> web.StreamResponse:
    return web.json_response({"apiVersion": f"{GROUP}/v1", "kind": "WidgetList",
                              "metadata": {}, "items": []})


@dataclass
class Served:
    gateway: Gateway
    client: Any
    context: ssl.SSLContext

    async def get(self, path: str, accept: str = "application/json") -> tuple[int, Any]:
        response = await self.client.get(path, ssl=self.context, headers={"Accept": accept})
        body = await response.read()
        try:
            return response.status, await response.json(content_type=None)
        except ValueError:
            return response.status, body

    async def delete(self, path: str) -> int:
        response = await self.client.delete(path, ssl=self.context)
        return response.status

    async def post(self, path: str, obj: dict[str, Any]) -> tuple[int, Any]:
        response = await self.client.post(path, json=obj, ssl=self.context)
        return response.status, await response.json(content_type=None)

    # -- what the documents say about the group -----------------------------------------------

    async def legacy_groups(self) -> list[str]:
        code, body = await self.get("/apis")
        assert code == 200, body
        return [g["name"] for g in body["groups"]]

    async def legacy_resources(self) -> list[str] | None:
        code, body = await self.get(f"/apis/{GROUP}/v1")
        return [r["name"] for r in body["resources"]] if code == 200 else None

    async def aggregated(self) -> list[dict[str, Any]] | None:
        """The group's versions in the aggregated discovery document, None when absent."""
        code, body = await self.get("/apis", accept=AGGREGATED)
        assert code == 200, body
        for item in body["items"]:
            if item["metadata"]["name"] == GROUP:
                return item["versions"]
        return None

    async def openapi_lists_group(self) -> tuple[bool, bool]:
        """Whether the v3 index and the v2 document list the group version."""
        code, index = await self.get("/openapi/v3")
        assert code == 200, index
        code, v2 = await self.get("/openapi/v2")
        assert code == 200
        return (f"apis/{GROUP}/v1" in index["paths"],
                any(path.startswith(f"/apis/{GROUP}/v1/") for path in v2["paths"]))


@pytest.fixture
async def served(tmp_path: Path, aiohttp_raw_server, aiohttp_client) -> AsyncIterator[Served]:
    args = build_parser().parse_args([
        "serve", "--bind-address", "127.0.0.1", "--cert-dir", str(tmp_path / "certs"),
        "--data-dir", str(tmp_path / "data")])
    options = complete_with_dev_pki(ServeOptions.from_args(args))
    gateway = Gateway(options)
    assert options.tls_cert_file and options.tls_private_key_file
    assert options.client_ca_file and options.requestheader_client_ca_file
    tls = server_ssl_context(options.tls_cert_file, options.tls_private_key_file,
                             [options.client_ca_file, options.requestheader_client_ca_file])
    context = ssl.create_default_context(cafile=str(options.cert_dir / "ca.crt"))
    context.load_cert_chain(options.cert_dir / "admin.crt", options.cert_dir / "admin.key")
    client = await aiohttp_client(await aiohttp_raw_server(gateway.handler, ssl=tls))
    await gateway.start()
    gateway.begin_post_start()  # listening already
    try:
        await eventually_async(lambda: all(hook.healthy for hook in gateway.hooks.values()),
                               timeout=60, what="the post-start hooks")
        yield Served(gateway, client, context)
    finally:
        gateway.begin_shutdown()
        await gateway.stop()


def test_install_api_replaces_and_uninstall_removes_with_listeners_told() -> None:
    server = GenericAPIServer("test")
    told: list[list[str]] = []
    server.on_change(lambda: told.append([r.plural for r in server.api_resources]))
    server.install_api(WIDGETS, widgets_handler)
    server.install_api(GADGETS, widgets_handler)
    server.install_api(WIDGETS, widgets_handler)  # again: in place, not appended
    assert told == [["widgets"], ["widgets", "gadgets"], ["widgets", "gadgets"]]
    server.uninstall_api(WIDGETS)
    assert (GROUP, "v1", "widgets") not in server.resources
    assert told[-1] == ["gadgets"]
    server.uninstall_resource(GROUP, "v1", "gadgets")
    assert server.groups == {} and server.resources == {}
    assert told[-1] == []
    server.uninstall_api(GADGETS)  # nothing served: nobody told
    assert len(told) == 5


def test_a_continuous_apiservice_takes_kubes_priorities_or_the_crd_defaults() -> None:
    known = continuous_apiservice("apps", "v1")
    assert known["metadata"] == {"name": "v1.apps", "labels": {AUTOMANAGED: "true"}}
    assert known["spec"] == {"group": "apps", "version": "v1",
                             "groupPriorityMinimum": 17800, "versionPriority": 15}
    other = continuous_apiservice(GROUP, "v1beta1")
    assert other["metadata"]["name"] == f"v1beta1.{GROUP}"
    assert (other["spec"]["groupPriorityMinimum"], other["spec"]["versionPriority"]) == (1000, 100)


async def test_a_group_version_comes_and_goes_while_serving(served: Served) -> None:
    gateway = served.gateway
    assert (await served.get(f"/apis/{GROUP}/v1/widgets"))[0] == 404
    assert GROUP not in await served.legacy_groups()
    assert await served.aggregated() is None
    assert await served.openapi_lists_group() == (False, False)

    # installed while serving: routing, discovery, OpenAPI and the APIService follow
    gateway.apiextensions.server.install_api(WIDGETS, widgets_handler)
    code, body = await served.get(f"/apis/{GROUP}/v1/widgets")
    assert code == 200 and body["kind"] == "WidgetList", body
    assert await served.legacy_resources() == ["widgets"]
    assert await served.aggregated() is not None
    assert await served.openapi_lists_group() == (True, True)

    async def apiservice() -> dict[str, Any] | None:
        code, body = await served.get(APISERVICE)
        return body if code == 200 else None

    obj = await eventually_async(apiservice, what="the APIService created")
    assert obj["metadata"]["labels"] == {AUTOMANAGED: "true"}
    assert obj["spec"]["group"] == GROUP and obj["spec"]["version"] == "v1"
    assert (obj["spec"]["groupPriorityMinimum"], obj["spec"]["versionPriority"]) == (1000, 100)
    assert "service" not in obj["spec"] or obj["spec"]["service"] is None
    assert GROUP in await served.legacy_groups()

    # installed again: listed once
    gateway.apiextensions.server.install_api(WIDGETS, widgets_handler)
    assert await served.legacy_resources() == ["widgets"]
    versions = await served.aggregated()
    assert versions is not None and [v["version"] for v in versions] == ["v1"]
    assert [r["resource"] for r in versions[0]["resources"]] == ["widgets"]

    # someone deletes the APIService: it is created again, still "true"
    uid = obj["metadata"]["uid"]
    assert await served.delete(APISERVICE) == 200

    async def recreated() -> dict[str, Any] | None:
        current = await apiservice()
        return current if current and current["metadata"]["uid"] != uid else None

    obj = await eventually_async(recreated, what="the APIService created again")
    assert obj["metadata"]["labels"] == {AUTOMANAGED: "true"}

    # uninstalled: gone from everywhere, the APIService deleted
    gateway.apiextensions.server.uninstall_api(WIDGETS)
    code, body = await served.get(f"/apis/{GROUP}/v1/widgets")
    assert code == 404, body
    assert await served.legacy_resources() is None
    assert await served.aggregated() is None
    assert await served.openapi_lists_group() == (False, False)

    async def deleted() -> bool:
        return (await served.get(APISERVICE))[0] == 404

    await eventually_async(deleted, what="the APIService deleted")
    assert GROUP not in await served.legacy_groups()
    # built-in APIServices (onstart) are untouched
    code, body = await served.get(APISERVICE.replace(f"v1.{GROUP}", "v1.rbac.authorization.k8s.io"))
    assert code == 200 and body["metadata"]["labels"] == {AUTOMANAGED: "onstart"}, body


# -- a store built while serving is built as every other ---------------------------------------

GIZMOS = "gizmos.example.com"
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def _served_stores(gateway: Gateway) -> dict[str, RESTStore]:
    """Every store any server of the chain serves, by ``<plural>.<group>/<version>``."""
    stores = {}
    for server in gateway.generic.servers:
        for (group, version, plural), handler in server.resources.items():
            store = getattr(handler, "store", None)
            if isinstance(store, RESTStore):
                stores[f"{plural}.{group}/{version}"] = store
    return stores


async def test_a_store_built_while_serving_gets_the_admission_of_every_store(
        served: Served) -> None:
    """The hole of issue 18 cannot come back: a custom resource's store, built by the CRD
    controller long after the assembly, is admitted as the built-in ones are (the one
    admission chain, NamespaceLifecycle), seen both in what the stores hold and in what a
    client gets: a ValidatingAdmissionPolicy denies the custom resource's create."""
    gateway = served.gateway
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gizmos.{GIZMOS}"},
           "spec": {"group": GIZMOS, "scope": "Namespaced",
                    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}
    code, body = await served.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                   crd)
    assert code == 201, body
    gizmos = f"/apis/{GIZMOS}/v1/namespaces/default/gizmos"

    async def established() -> bool:
        return (await served.get(gizmos))[0] == 200

    await eventually_async(established, what="the custom resource served")

    stores = _served_stores(gateway)
    chain = gateway.admission.store_options.admission
    assert chain is not None and f"gizmos.{GIZMOS}/v1" in stores
    assert {"configmaps./v1", "apiservices.apiregistration.k8s.io/v1",
            "customresourcedefinitions.apiextensions.k8s.io/v1"} <= set(stores)
    for name, store in stores.items():
        assert store.admitter is chain, name
        lifecycle = [check for check in store.create_admission
                     if check.__qualname__.startswith("namespace_lifecycle.")]
        assert len(lifecycle) == (1 if store.resource.namespaced else 0), name

    # and as a client sees it: NamespaceLifecycle, then a policy of the chain
    gizmo = {"apiVersion": f"{GIZMOS}/v1", "kind": "Gizmo", "metadata": {"name": "denied"}}
    code, body = await served.post(f"/apis/{GIZMOS}/v1/namespaces/nowhere/gizmos", gizmo)
    assert code == 404 and body["message"] == 'namespaces "nowhere" not found', body
    policy = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "no-denied-gizmos"},
              "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [{
                  "apiGroups": [GIZMOS], "apiVersions": ["*"], "operations": ["CREATE"],
                  "resources": ["gizmos"]}]},
                  "validations": [{"expression": "object.metadata.name != 'denied'"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "no-denied-gizmos"},
               "spec": {"policyName": "no-denied-gizmos", "validationActions": ["Deny"]}}
    assert (await served.post(POLICIES, policy))[0] == 201
    assert (await served.post(BINDINGS, binding))[0] == 201
    code, body = await served.post(gizmos, gizmo)
    assert code == 422, body
    assert body["message"] == (
        f'gizmos.{GIZMOS} "denied" is forbidden: ValidatingAdmissionPolicy \'no-denied-gizmos\' '
        "with binding 'no-denied-gizmos' denied request: failed expression: "
        "object.metadata.name != 'denied'"), body
    code, body = await served.post(gizmos, {**gizmo, "metadata": {"name": "allowed"}})
    assert code == 201, body
