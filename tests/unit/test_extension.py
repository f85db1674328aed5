"""gateway.extension's parts on their own: declarations made into served resources, the
in-process conversion and strategy hooks, and delegated authentication and authorization's
decisions and caches (against a small HTTPS-less stand-in for the core server's review APIs;
the whole server behind a real gateway is tests/e2e/test_extension_wardle.py)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from examples.wardle import WARDLE, convert_flunder
from gateway.apiextensions.conversion import ConversionError
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.auth.authn import AuthenticationError
from gateway.auth.authorizer import Attributes, Decision
from gateway.extension import (
    APIGroup,
    ExtensionOptions,
    ExtensionServer,
    Resource,
    Strategy,
    Subresource,
    Version,
    invalid,
)
from gateway.extension.authn import AuthenticationInfo, CachedTokenReview, DelegatedAuthentication
from gateway.extension.authz import SubjectAccessReviewer, delegated_authorizer, review_spec
from gateway.extension.kubeclient import ClientConfig, KubeClient
from gateway.extension.resources import HookConverter, served_resources
from gateway.server.discovery import api_resource_list
from tests.support.certs import Issuer, pem

SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "size": {"type": "integer", "minimum": 1}}}}}


def test_wardle_is_served_in_kubes_version_order_with_its_declarations() -> None:
    served = list(served_resources(WARDLE))
    assert [(s.resource.version, s.resource.plural) for s in served] == [
        ("v1beta1", "flunders"), ("v1alpha1", "flunders"), ("v1alpha1", "fischers")]
    flunder = served[0].resource
    assert flunder.short_names == ("fl",) and flunder.categories == ("wardle",)
    assert flunder.subresources == ("status",) and flunder.namespaced
    assert flunder.storage_version == "v1alpha1"
    assert flunder.schema == "com.example.wardle.v1beta1.Flunder"
    assert [c.name for c in flunder.columns] == ["Name", "Reference-Type", "Flunder", "Fischer",
                                                 "Age"]
    assert [c.priority for c in flunder.columns] == [0, 0, 1, 1, 0]
    assert not served[2].resource.namespaced and served[2].resource.subresources == ()


def test_a_resource_needs_exactly_one_storage_version() -> None:
    group = APIGroup("example.com", [Resource("Widget", "widgets", [
        Version("v1", SCHEMA), Version("v2", SCHEMA)])])
    with pytest.raises(ValueError, match="exactly one version must be the storage version"):
        list(served_resources(group))


async def test_conversion_runs_the_declared_function_for_other_versions_only() -> None:
    converter = HookConverter(convert_flunder)
    alpha = {"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
             "metadata": {"name": "a", "labels": {"x": "y"}},
             "spec": {"reference": "f", "referenceType": "Flunder"}}
    beta = {**alpha, "apiVersion": "wardle.example.com/v1beta1", "spec": {}}
    out = await converter.convert([alpha, beta], "wardle.example.com/v1beta1")
    assert out[0] == {**alpha, "apiVersion": "wardle.example.com/v1beta1",
                      "spec": {"flunderReference": "f", "referenceType": "Flunder"}}
    assert out[1] is beta
    assert alpha["spec"] == {"reference": "f", "referenceType": "Flunder"}  # not changed

    def failing(obj: dict[str, Any], version: str) -> dict[str, Any]:
        raise ValueError("no way")

    with pytest.raises(ConversionError, match="no way"):
        await HookConverter(failing).convert([alpha], "wardle.example.com/v1beta1")


def test_the_strategy_runs_after_the_schema() -> None:
    seen: list[str] = []

    class Sized(Strategy):
        def prepare_for_create(self, obj: dict[str, Any]) -> None:
            obj["spec"].setdefault("size", 3)

        def validate(self, obj: dict[str, Any]) -> list[Any]:
            seen.append("hook")
            size = obj["spec"]["size"]
            return [invalid("spec.size", size, "must be odd")] if size % 2 == 0 else []

    group = APIGroup("example.com", [Resource("Widget", "widgets", strategy=Sized(),
                                              versions=[Version("v1", SCHEMA, storage=True)])])
    strategy = next(served_resources(group)).resource.strategy
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
           "spec": {}}
    strategy.prepare_for_create(obj)
    assert obj["spec"] == {"size": 3} and strategy.validate(obj) == []
    causes = strategy.validate({**obj, "spec": {"size": 0}})
    assert [c.field for c in causes] == ["spec.size"] and seen == ["hook"]  # schema first
    causes = strategy.validate({**obj, "spec": {"size": 4}})
    assert causes[0].message == 'Invalid value: 4: must be odd'


def test_the_authentication_configmap_is_read_as_kube_writes_it() -> None:
    ca = pem(Issuer.new("front-proxy-ca").cert).decode()
    info = AuthenticationInfo.from_configmap({"data": {
        "requestheader-client-ca-file": ca,
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'}})
    assert info.requestheader_ca == ca.encode() and info.client_ca == b""
    assert info.allowed_names == ("front-proxy-client",)
    assert info.front_proxy().username_headers == ("X-Remote-User",)


def test_a_changed_configmap_changes_the_ca_its_users_hold() -> None:
    """The verifier and the TLS context hold one content; a new bundle is a new generation
    of that same content, and new allowed names count; header names stay the start's."""
    first, second = (pem(Issuer.new(n).cert).decode() for n in ("one", "two"))
    authn = DelegatedAuthentication(None)
    authn._apply({"data": {"requestheader-client-ca-file": first,
                           "requestheader-allowed-names": '["a"]'}})
    authn.synced.set()
    held = authn.requestheader_ca
    assert held is not None and held.generation == 0
    authn._apply({"data": {"requestheader-client-ca-file": second,
                           "requestheader-allowed-names": '["b"]',
                           "requestheader-username-headers": '["X-Other"]'}})
    assert authn.requestheader_ca is held and held.generation == 1
    assert held.value.pem == second.encode()
    assert authn.front_proxy.allowed_names == ("b",)
    assert authn.front_proxy.username_headers == ("X-Remote-User",)


def _attributes(user: str = "viewer", **kwargs: Any) -> Attributes:
    defaults: dict[str, Any] = {"verb": "list", "resource_request": True,
                                "namespace": "default", "api_group": "wardle.example.com",
                                "api_version": "v1beta1", "resource": "flunders"}
    return Attributes(UserInfo(user, groups=("system:authenticated",)), **{**defaults,
                                                                          **kwargs})


def test_review_spec_is_kubes_subject_access_review() -> None:
    assert review_spec(_attributes(name="x")) == {
        "user": "viewer", "groups": ["system:authenticated"],
        "resourceAttributes": {"namespace": "default", "verb": "list",
                               "group": "wardle.example.com", "version": "v1beta1",
                               "resource": "flunders", "subresource": "", "name": "x"}}
    spec = review_spec(_attributes(resource_request=False, path="/metrics", verb="get"))
    assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}


class CoreServer:
    """The core server's review APIs as a test sets their answers, counting the calls."""

    def __init__(self) -> None:
        self.allowed: set[str] = set()
        self.tokens: dict[str, str] = {}
        self.calls: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        spec = review["spec"]
        self.calls.append(request.path)
        if review["kind"] == "TokenReview":
            user = self.tokens.get(spec["token"])
            status: dict[str, Any] = {"authenticated": user is not None}
            if user:
                status["user"] = {"username": user, "groups": ["system:authenticated"]}
            return web.json_response({**review, "status": status})
        allowed = spec["user"] in self.allowed
        return web.json_response({**review, "status": {"allowed": allowed}})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def core(aiohttp_server: Any) -> tuple[CoreServer, KubeClient]:
    server = CoreServer()
    app = web.Application()
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", server.handle)
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", server.handle)
    running = await aiohttp_server(app)
    client = KubeClient(ClientConfig(str(running.make_url("")).rstrip("/"),
                                     ssl.create_default_context()))
    yield server, client
    await client.close()


async def test_subject_access_reviews_are_kept_for_their_ttl(core: Any) -> None:
    server, client = core
    clock = Clock()
    reviewer = SubjectAccessReviewer(client, allow_ttl=10, deny_ttl=5, clock=clock)
    authorize = delegated_authorizer(reviewer)
    assert (await authorize(_attributes()))[0] is Decision.NO_OPINION
    server.allowed.add("viewer")
    clock.now += 4.9
    assert (await authorize(_attributes()))[0] is Decision.NO_OPINION  # the denial kept
    clock.now += 0.2
    assert (await authorize(_attributes()))[0] is Decision.ALLOW
    server.allowed.clear()
    clock.now += 9.9
    assert (await authorize(_attributes()))[0] is Decision.ALLOW  # the allowance kept
    assert len(server.calls) == 2
    # never asked: the always-allowed paths and system:masters
    assert (await authorize(_attributes(resource_request=False, path="/livez",
                                        verb="get")))[0] is Decision.ALLOW
    masters = Attributes(UserInfo("root", groups=("system:masters",)), "create", True)
    assert (await authorize(masters))[0] is Decision.ALLOW
    assert len(server.calls) == 2


async def test_token_reviews_are_kept_for_their_ttl_refusals_too(core: Any) -> None:
    server, client = core
    clock = Clock()
    tokens = CachedTokenReview(client, 10, clock=clock)
    with pytest.raises(AuthenticationError):
        await tokens.authenticate("t")
    server.tokens["t"] = "alice"
    with pytest.raises(AuthenticationError):
        await tokens.authenticate("t")  # the refusal kept
    clock.now += 10.1
    assert (await tokens.authenticate("t")).user.name == "alice"
    del server.tokens["t"]
    assert (await tokens.authenticate("t")).user.name == "alice"
    assert len(server.calls) == 2


async def test_a_declared_subresource_is_routed_to_its_handler_and_listed(
        tmp_path: Path) -> None:
    """Built (no call out yet: the kubeconfig's server is never dialled), the server routes
    ``widgets/<name>/echo`` to the declared handler with the resource's store, and lists it
    in discovery beside the status subresource."""
    seen: list[tuple[str, str, str]] = []

    async def echo(request: Any, info: Any, store: Any) -> web.Response:
        seen.append((info.name, info.subresource, store.resource.plural))
        return web.json_response({"name": info.name})

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:9"}}]}))
    group = APIGroup("example.com", [Resource(
        "Widget", "widgets", status=True, versions=[Version("v1", SCHEMA, storage=True)],
        subresources={"echo": Subresource(echo)})])
    server = ExtensionServer([group], ExtensionOptions(
        authentication_kubeconfig=kubeconfig, authorization_kubeconfig=kubeconfig,
        cert_dir=tmp_path / "certs", data_dir=tmp_path / "data"))
    try:
        endpoints = server.server.resources[("example.com", "v1", "widgets")]
        info = RequestInfo(is_resource_request=True, path="/apis/example.com/v1/namespaces/"
                           "default/widgets/w/echo", verb="get", api_prefix="apis",
                           api_group="example.com", api_version="v1", namespace="default",
                           resource="widgets", subresource="echo", name="w")
        response = await endpoints(make_mocked_request("GET", info.path), info)
        assert response.status == 200 and seen == [("w", "echo", "widgets")]
        listed = api_resource_list(server.server.groups["example.com"], "v1")["resources"]
        assert [(r["name"], r["verbs"]) for r in listed[1:]] == [
            ("widgets/status", ["get", "patch", "update"]), ("widgets/echo", ["get"])]
    finally:
        await server.stop()
