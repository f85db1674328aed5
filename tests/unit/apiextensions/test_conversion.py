"""The CRD conversion webhook client against a real HTTPS webhook: the ConversionReview it
sends, the URL and Service client configs, and every way kube refuses a call or an answer,
in kube's words."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.apiextensions.conversion import (
    ConversionError,
    NoneConverter,
    WebhookConverter,
    as_status,
    converter_for,
    go_duration,
)
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ResolveError, ServiceAddress
from tests.support.certs import SERVER_AUTH, Issuer, issue_pair, pem

SERVICE = "conv.hooks.svc"
GROUP = "stable.example.com"
GVK = f"{GROUP}/v1beta1, Kind=CronTab"
Answer = Callable[[dict[str, Any]], web.StreamResponse | Any]


def crontab(name: str, version: str = "v1beta1", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "CronTab",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "resourceVersion": "7", **meta},
            "spec": {"cronSpec": "* * * * *"}}


def converted(review: dict[str, Any]) -> list[dict[str, Any]]:
    """What a correct webhook answers: each object at the desired version, spec renamed."""
    request = review["request"]
    out = []
    for obj in request["objects"]:
        obj = {**obj, "apiVersion": request["desiredAPIVersion"]}
        obj["spec"] = {"schedule": obj["spec"]["cronSpec"]}
        out.append(obj)
    return out


def success(review: dict[str, Any], objects: list[Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": review["request"]["uid"], "result": {"status": "Success"},
                         "convertedObjects": converted(review) if objects is None else objects}}


class Webhook:
    """An HTTPS conversion webhook on 127.0.0.1 whose answer each test sets; it keeps every
    request (body, path, query and headers)."""

    def __init__(self, workdir: Path) -> None:
        self.ca = Issuer.new("conversion-webhook-ca")
        pair = issue_pair(workdir, "webhook", SERVICE, self.ca, usages=(SERVER_AUTH,),
                          sans=(SERVICE, "127.0.0.1"))
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(pair.cert, pair.key)
        self.ca_bundle = base64.b64encode(pem(self.ca.cert)).decode()
        self.answer: Answer = success
        self.received: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> Webhook:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        review = await request.json()
        self.received.append({"review": review, "path": request.path,
                              "query": dict(request.query), "headers": dict(request.headers)})
        answer = self.answer(review)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer if isinstance(answer, web.StreamResponse) else web.json_response(answer)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/convert"


class Resolver:
    """A test ServiceResolver: the Service hooks/conv is the webhook, on any port asked."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.asked: list[tuple[str, str, int]] = []

    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        self.asked.append((namespace, name, port))
        if (namespace, name) != ("hooks", "conv"):
            raise ResolveError(f'service "{name}" not found')
        return ServiceAddress("127.0.0.1", self.port, SERVICE)


def crd(client_config: dict[str, Any], versions: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"crontabs.{GROUP}"},
            "spec": {"group": GROUP, "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": client_config,
                "conversionReviewVersions": versions or ["v1"]}}}}


@pytest.fixture
async def webhook(tmp_path: Path):
    server = await Webhook(tmp_path).start()
    yield server
    await server.stop()


@pytest.fixture
async def clients():
    manager = ClientManager()
    yield manager
    await manager.close()


@pytest.fixture
def converter(webhook: Webhook, clients: ClientManager) -> WebhookConverter:
    config = {"url": webhook.url, "caBundle": webhook.ca_bundle}
    return WebhookConverter(crd(config), clients, Resolver(webhook.port), timeout=5)


async def failure(converter: WebhookConverter, *objects: dict[str, Any],
                  to: str = f"{GROUP}/v1") -> str:
    with pytest.raises(ConversionError) as caught:
        await converter.convert(list(objects) or [crontab("a")], to)
    return caught.value.message


# -- success --------------------------------------------------------------------------------------


async def test_converts_in_one_review_and_skips_objects_already_there(
        converter: WebhookConverter, webhook: Webhook) -> None:
    a, b, c = crontab("a"), crontab("b", "v1"), crontab("c")
    out = await converter.convert([a, b, c], f"{GROUP}/v1")
    assert [o["metadata"]["name"] for o in out] == ["a", "b", "c"]
    assert out[1] is b  # already at v1: neither sent nor copied
    assert out[0]["apiVersion"] == f"{GROUP}/v1" and out[0]["spec"] == {"schedule": "* * * * *"}
    assert out[0]["metadata"] == a["metadata"]
    assert a["apiVersion"] == f"{GROUP}/v1beta1" and "cronSpec" in a["spec"]  # inputs intact
    assert len(webhook.received) == 1
    request = webhook.received[0]["review"]["request"]
    assert [o["metadata"]["name"] for o in request["objects"]] == ["a", "c"]


async def test_the_review_sent(converter: WebhookConverter, webhook: Webhook) -> None:
    await converter.convert([crontab("a")], f"{GROUP}/v1")
    sent = webhook.received[0]
    review = sent["review"]
    assert review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["kind"] == "ConversionReview"
    assert review["request"]["desiredAPIVersion"] == f"{GROUP}/v1"
    assert review["request"]["objects"] == [crontab("a")]
    assert len(review["request"]["uid"]) == 36
    assert sent["path"] == "/convert" and sent["query"] == {"timeout": "5s"}
    assert sent["headers"]["Content-Type"] == "application/json"
    assert sent["headers"]["User-Agent"] == "kube-apiserver-admission"


async def test_nothing_to_convert_calls_nobody(converter: WebhookConverter,
                                               webhook: Webhook) -> None:
    objects = [crontab("a", "v1"), {"apiVersion": f"{GROUP}/v1beta1", "kind": "CronTab"}]
    out = await converter.convert(objects, f"{GROUP}/v1")
    assert out[0] is objects[0]
    assert out[1] == {"apiVersion": f"{GROUP}/v1", "kind": "CronTab"}  # kube's empty-object case
    assert webhook.received == []


async def test_review_version_is_the_first_understood(webhook: Webhook,
                                                      clients: ClientManager) -> None:
    config = {"url": webhook.url, "caBundle": webhook.ca_bundle}
    converter = WebhookConverter(crd(config, ["v2", "v1beta1", "v1"]), clients,
                                 Resolver(webhook.port))
    webhook.answer = lambda review: {"response": success(review)["response"]}  # no GVK: fine
    await converter.convert([crontab("a")], f"{GROUP}/v1")
    assert webhook.received[0]["review"]["apiVersion"] == "apiextensions.k8s.io/v1beta1"
    assert webhook.received[0]["query"] == {"timeout": "30s"}  # kube's default


async def test_no_understood_review_version(webhook: Webhook, clients: ClientManager) -> None:
    converter = WebhookConverter(crd({"url": webhook.url}, ["v2"]), clients,
                                 Resolver(webhook.port))
    assert await failure(converter) == "no supported conversion review versions"


async def test_service_client_config(webhook: Webhook, clients: ClientManager) -> None:
    config = {"service": {"namespace": "hooks", "name": "conv", "path": "/convert/",
                          "port": 8443}, "caBundle": webhook.ca_bundle}
    resolver = Resolver(webhook.port)
    converter = WebhookConverter(crd(config), clients, resolver)
    out = await converter.convert([crontab("a")], f"{GROUP}/v1")
    assert out[0]["apiVersion"] == f"{GROUP}/v1"
    assert resolver.asked == [("hooks", "conv", 8443)]
    sent = webhook.received[0]
    assert sent["path"] == "/convert"
    assert sent["headers"]["Host"] == f"{SERVICE}:8443"


async def test_service_that_does_not_resolve(webhook: Webhook, clients: ClientManager) -> None:
    config = {"service": {"namespace": "hooks", "name": "gone", "port": 443},
              "caBundle": webhook.ca_bundle}
    converter = WebhookConverter(crd(config), clients, Resolver(webhook.port))
    assert await failure(converter) == (
        f'conversion webhook for {GVK} failed: Post "https://gone.hooks.svc:443/?timeout=30s": '
        'service "gone" not found')


async def test_changed_labels_and_annotations_are_kept(converter: WebhookConverter,
                                                       webhook: Webhook) -> None:
    def relabel(review: dict[str, Any]) -> dict[str, Any]:
        objects = converted(review)
        objects[0]["metadata"]["labels"] = {"converted": "yes"}
        objects[0]["metadata"]["annotations"] = {"example.com/from": "v1beta1"}
        objects[0]["metadata"]["resourceVersion"] = "999"  # not the webhook's to change
        return success(review, objects)

    webhook.answer = relabel
    original = crontab("a", labels={"old": "x"})
    out = await converter.convert([original], f"{GROUP}/v1")
    meta = out[0]["metadata"]
    assert meta["labels"] == {"converted": "yes"}
    assert meta["annotations"] == {"example.com/from": "v1beta1"}
    assert meta["resourceVersion"] == "7"
    assert original["metadata"]["labels"] == {"old": "x"}


async def test_dropped_labels_are_dropped(converter: WebhookConverter, webhook: Webhook) -> None:
    def unlabel(review: dict[str, Any]) -> dict[str, Any]:
        objects = converted(review)
        del objects[0]["metadata"]["labels"]
        return success(review, objects)

    webhook.answer = unlabel
    out = await converter.convert([crontab("a", labels={"old": "x"})], f"{GROUP}/v1")
    assert "labels" not in out[0]["metadata"]


async def test_none_converter_only_changes_api_version() -> None:
    a, b = crontab("a"), crontab("b", "v1")
    out = await NoneConverter().convert([a, b], f"{GROUP}/v1")
    assert out[0] == {**a, "apiVersion": f"{GROUP}/v1"} and out[0] is not a
    assert out[1] is b and a["apiVersion"] == f"{GROUP}/v1beta1"


def test_converter_for(clients: ClientManager) -> None:
    assert isinstance(converter_for({"spec": {}}, clients, Resolver(1)), NoneConverter)
    webhook_crd = crd({"url": "https://example.com/convert"})
    assert isinstance(converter_for(webhook_crd, clients, Resolver(1)), WebhookConverter)


def test_an_unloadable_ca_bundle_is_an_internal_error(clients: ClientManager) -> None:
    bad = base64.b64encode(b"not a certificate").decode()
    with pytest.raises(ConversionError) as caught:
        converter_for(crd({"url": "https://example.com/", "caBundle": bad}), clients, Resolver(1))
    assert caught.value.message == ("unable to load root certificates: unable to parse bytes "
                                    "as PEM block")
    assert as_status(caught.value).reason == "InternalError"


def test_go_duration() -> None:
    assert [go_duration(s) for s in (30, 0.2, 90, 1.5, 3600)] == [
        "30s", "200ms", "1m30s", "1.5s", "1h0m0s"]


# -- failing calls --------------------------------------------------------------------------------


async def test_wrong_ca(webhook: Webhook, clients: ClientManager, tmp_path: Path) -> None:
    other = base64.b64encode(pem(Issuer.new("other-ca").cert)).decode()
    converter = WebhookConverter(crd({"url": webhook.url, "caBundle": other}), clients,
                                 Resolver(webhook.port))
    assert await failure(converter) == (
        f'conversion webhook for {GVK} failed: Post "{webhook.url}?timeout=30s": tls: failed '
        "to verify certificate: x509: certificate signed by unknown authority")


async def test_webhook_down(clients: ClientManager) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"https://127.0.0.1:{port}/convert"
    converter = WebhookConverter(crd({"url": url}), clients, Resolver(port))
    assert await failure(converter) == (
        f'conversion webhook for {GVK} failed: Post "{url}?timeout=30s": dial tcp '
        f"127.0.0.1:{port}: connect: connection refused")


async def test_timeout(webhook: Webhook, clients: ClientManager) -> None:
    async def slow(review: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(2)
        return success(review)

    webhook.answer = slow
    config = {"url": webhook.url, "caBundle": webhook.ca_bundle}
    converter = WebhookConverter(crd(config), clients, Resolver(webhook.port), timeout=0.2)
    assert await failure(converter) == (
        f'conversion webhook for {GVK} failed: Post "{webhook.url}?timeout=200ms": context '
        "deadline exceeded")


async def test_server_error(converter: WebhookConverter, webhook: Webhook) -> None:
    webhook.answer = lambda review: web.Response(status=500, text="boom\n")
    assert await failure(converter) == (
        f'conversion webhook for {GVK} failed: an error on the server ("boom") has prevented '
        "the request from succeeding")
    webhook.answer = lambda review: web.json_response({"oops": True}, status=500)
    assert await failure(converter) == (
        f'conversion webhook for {GVK} failed: an error on the server ("unknown") has '
        "prevented the request from succeeding")
    webhook.answer = lambda review: web.json_response(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "no way"},
        status=403)
    assert await failure(converter) == f"conversion webhook for {GVK} failed: no way"
    webhook.answer = lambda review: web.Response(status=404)
    assert await failure(converter) == (
        f"conversion webhook for {GVK} failed: the server could not find the requested resource")


async def test_bad_json(converter: WebhookConverter, webhook: Webhook) -> None:
    webhook.answer = lambda review: web.Response(text="<html>", content_type="text/html")
    assert await failure(converter) == (
        f"conversion webhook for {GVK} failed: couldn't get version/kind; json parse error: "
        "invalid character '<' looking for beginning of value")
    webhook.answer = lambda review: web.Response(body=b"", content_type="application/json")
    assert await failure(converter) == (
        f"conversion webhook for {GVK} failed: 0-length response with status code: 200 and "
        "content type: application/json")


async def test_wrong_review_kind(converter: WebhookConverter, webhook: Webhook) -> None:
    webhook.answer = lambda review: {"response": success(review)["response"]}
    assert await failure(converter) == (
        f"conversion webhook for {GVK} failed: expected webhook response of "
        "apiextensions.k8s.io/v1, Kind=ConversionReview, got /, Kind=")


async def test_uid_mismatch(converter: WebhookConverter, webhook: Webhook) -> None:
    def other_uid(review: dict[str, Any]) -> dict[str, Any]:
        answer = success(review)
        answer["response"]["uid"] = "other"
        return answer

    webhook.answer = other_uid
    message = await failure(converter)
    uid = webhook.received[0]["review"]["request"]["uid"]
    assert message == (f'conversion webhook for {GVK} failed: expected response.uid="{uid}", '
                       'got "other"')


async def test_failure_result(converter: WebhookConverter, webhook: Webhook) -> None:
    def failed(message: str) -> Answer:
        def answer(review: dict[str, Any]) -> dict[str, Any]:
            return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                    "response": {"uid": review["request"]["uid"],
                                 "result": {"status": "Failure", "message": message}}}
        return answer

    webhook.answer = failed("cronSpec is not a schedule")
    assert await failure(converter) == (
        f"conversion webhook for {GVK} failed: cronSpec is not a schedule")
    webhook.answer = failed("")
    assert await failure(converter) == (
        f"conversion webhook for {GVK} failed: response.result.status was 'Failure', not "
        "'Success'")


async def test_wrong_count(converter: WebhookConverter, webhook: Webhook) -> None:
    webhook.answer = lambda review: success(review, converted(review)[:1])
    assert await failure(converter, crontab("a"), crontab("b")) == (
        f"conversion webhook for {GVK} returned 1 objects, expected 2")


async def test_wrong_api_version(converter: WebhookConverter, webhook: Webhook) -> None:
    def stays(review: dict[str, Any]) -> dict[str, Any]:
        return success(review, review["request"]["objects"])

    webhook.answer = stays
    assert await failure(converter) == (
        f"conversion webhook for {GVK} returned invalid object at index 0: invalid "
        f"groupVersion (expected {GROUP}/v1, received {GROUP}/v1beta1)")
    assert await failure(converter, crontab("a"), crontab("b")) == (
        f"conversion webhook for {GVK} returned invalid converted object at index 0: invalid "
        f"groupVersion (expected {GROUP}/v1, received {GROUP}/v1beta1)")


def _changing(key: str, value: str) -> Answer:
    def answer(review: dict[str, Any]) -> dict[str, Any]:
        objects = converted(review)
        objects[-1]["metadata"][key] = value
        return success(review, objects)
    return answer


async def test_changed_name_or_uid(converter: WebhookConverter, webhook: Webhook) -> None:
    webhook.answer = _changing("name", "renamed")
    assert await failure(converter) == (
        f"conversion webhook for {GVK} returned invalid object: must have the same name: "
        "a != renamed")
    webhook.answer = _changing("uid", "other")
    assert await failure(converter, crontab("a"), crontab("b")) == (
        f"conversion webhook for {GVK} returned invalid converted object at index 1: must "
        "have the same UID: uid-b != other")


async def test_invalid_labels(converter: WebhookConverter, webhook: Webhook) -> None:
    def bad_labels(review: dict[str, Any]) -> dict[str, Any]:
        objects = converted(review)
        objects[0]["metadata"]["labels"] = {"ok": "bad value!"}
        return success(review, objects)

    webhook.answer = bad_labels
    message = await failure(converter)
    assert message.startswith(f"conversion webhook for {GVK} returned invalid metadata: "
                              'metadata.labels: Invalid value: "bad value!": ')
    webhook.answer = lambda review: success(review, [
        {**o, "metadata": {**o["metadata"], "labels": {"n": 1}}} for o in converted(review)])
    assert await failure(converter) == (
        f"conversion webhook for {GVK} returned invalid metadata: metadata.labels[n] must be a "
        "string, but is int64 in converted object")


async def test_status_for_a_failed_conversion(converter: WebhookConverter,
                                              webhook: Webhook) -> None:
    webhook.answer = lambda review: web.Response(status=500, text="boom")
    with pytest.raises(ConversionError) as caught:
        await converter.convert([crontab("a")], f"{GROUP}/v1")
    stored = as_status(caught.value).to_status()
    assert stored["code"] == 500 and "reason" not in stored
    assert stored["message"].startswith(f"conversion webhook for {GVK} failed: ")
    admitted = as_status(caught.value, admission=True).to_status()
    assert admitted["reason"] == "InternalError"
    assert admitted["message"] == "Internal error occurred: " + caught.value.message
    assert json.dumps(admitted)


def _review(response: Any, **fields: Any) -> Answer:
    """An answer made of ``response`` (called with the review when callable)."""
    def answer(review: dict[str, Any]) -> dict[str, Any]:
        body = response(review) if callable(response) else response
        return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                "response": body, **fields}
    return answer


def _ok(objects: Callable[[dict[str, Any]], list[Any]]) -> Callable[[dict[str, Any]], Any]:
    return lambda review: {"uid": review["request"]["uid"], "result": {"status": "Success"},
                           "convertedObjects": objects(review)}


@pytest.mark.parametrize(("answer", "expected"), [
    (lambda review: [1], "failed: couldn't get version/kind; json parse error: json: cannot "
     'unmarshal array into Go value of type struct { APIVersion string "json:\\"apiVersion,'
     'omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'),
    (_review(None), "failed: no response provided"),
    (_review("yes"), "failed: json: cannot unmarshal string into Go struct field "
     "ConversionReview.response of type v1.ConversionResponse"),
    (lambda review: {"kind": "Status", "apiVersion": "v1", "status": "Failure"},
     "failed: converting (k8s.io/apimachinery/pkg/apis/meta/v1) Status to "
     "(k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1) ConversionReview: unknown "
     "conversion"),
    (_review(_ok(lambda review: [None])), "unexpected end of JSON input"),
    (_review(_ok(lambda review: [{"apiVersion": f"{GROUP}/v1", "metadata": {}}])),
     f"""Object 'Kind' is missing in '{{"apiVersion":"{GROUP}/v1","metadata":{{}}}}'"""),
    (_review(_ok(lambda review: [{**o, "kind": "Other"} for o in converted(review)])),
     "returned invalid object at index 0: invalid kind (expected CronTab, received Other)"),
    (_review(_ok(lambda review: [{k: v for k, v in o.items() if k != "metadata"}
                                 for o in converted(review)])),
     "returned invalid object: must have the same name: a != "),
    (_review(_ok(lambda review: [{**o, "metadata": {**o["metadata"], "annotations": {"a b": ""}}}
                                 for o in converted(review)])),
     'returned invalid metadata: metadata.annotation: Invalid value: "a b": name part must '
     "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
     "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
])
async def test_bad_answers(converter: WebhookConverter, webhook: Webhook, answer: Answer,
                           expected: str) -> None:
    webhook.answer = answer
    message = await failure(converter)
    assert message == expected or message == f"conversion webhook for {GVK} {expected}"


async def test_v1beta1_reviews_are_not_held_to_a_uid(webhook: Webhook,
                                                     clients: ClientManager) -> None:
    config = {"url": webhook.url, "caBundle": webhook.ca_bundle}
    converter = WebhookConverter(crd(config, ["v1beta1"]), clients, Resolver(webhook.port))
    webhook.answer = _review(lambda review: {**_ok(converted)(review), "uid": "whatever"})
    out = await converter.convert([crontab("a")], f"{GROUP}/v1")
    assert out[0]["spec"] == {"schedule": "* * * * *"}


async def test_plain_http_webhook(clients: ClientManager) -> None:
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        url = f"https://127.0.0.1:{port}/convert"
        converter = WebhookConverter(crd({"url": url}), clients, Resolver(port))
        assert await failure(converter) == (
            f'conversion webhook for {GVK} failed: Post "{url}?timeout=30s": http: server gave '
            "HTTP response to HTTPS client")
    finally:
        await runner.cleanup()
