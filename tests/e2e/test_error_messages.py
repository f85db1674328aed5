"""Errors in kube-apiserver's words, never Python's: a JSON patch whose test fails, bodies that
are not JSON (each patch type), OPTIONS without CORS, and admission webhooks that cannot be
called (refused, untrusted, too slow, a 500, an answer that is no AdmissionReview). Raw HTTPS
as the admin user; the webhooks are real HTTPS servers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from tests.support.api import API, CM, configmap, expect_status
from tests.support.gateway import GatewayProcess, free_port, send
from tests.support.webhook import WebhookServer

pytestmark = pytest.mark.slow

VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(tmp_path_factory.mktemp("gateway"), "--enable-aggregator-routing")
    with proc:
        yield proc


# -- JSON patch test operation --------------------------------------------------------------------


def test_a_failed_test_operation_is_kubes_generic_422(api, ns):
    path = CM.format(ns=ns)
    assert api.post(path, configmap("tested", a="1"))[0] == 201
    answer = api.patch(f"{path}/tested", [{"op": "test", "path": "/data/a", "value": "2"}],
                       "application/json-patch+json")
    # NewGenericServerResponse(422): its fixed words, an empty details object, the patch
    # library's own error left out
    assert answer == (422, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "reason": "Invalid", "details": {},
                            "message": "the server rejected our request due to an error in "
                                       "our request", "code": 422})


# -- bodies that are not JSON ---------------------------------------------------------------------


@pytest.mark.parametrize(("content_type", "query", "body", "message"), [
    ("application/json-patch+json", "", b'[{"op":"test",}]',
     "error decoding patch: invalid character '}' looking for beginning of object key string"),
    ("application/json-patch+json", "?fieldValidation=Ignore", b'[{"op":"test",}]',
     "invalid character '}' looking for beginning of object key string"),
    ("application/json-patch+json", "", b'{"op":"add"}',
     "error decoding patch: json: cannot unmarshal object into Go value of type "
     "[]handlers.jsonPatchOp"),
    ("application/json-patch+json", "?fieldValidation=Ignore", b'{"op":"add"}',
     "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
    ("application/merge-patch+json", "", b'{"data":',
     "error decoding patch: unexpected end of JSON input"),
    ("application/merge-patch+json", "?fieldValidation=Ignore", b'{"data":',
     "Invalid JSON Patch"),
    ("application/merge-patch+json", "", b"[1]",
     "error decoding patch: json: cannot unmarshal array into Go value of type "
     "map[string]interface {}"),
    ("application/strategic-merge-patch+json", "", b'{"data":x}',
     "invalid character 'x' looking for beginning of value"),
    ("application/strategic-merge-patch+json", "", b'"x"',
     "json: cannot unmarshal string into Go value of type map[string]interface {}"),
])
def test_patch_bodies_that_are_not_json(gateway, api, ns, content_type, query, body, message):
    path = CM.format(ns=ns)
    assert api.post(path, configmap("target", a="1"))[0] == 201
    expect_status(api.call("PATCH", f"{path}/target{query}", body,
                           {"Content-Type": content_type}), 400, "BadRequest", message=message)
    # kube reads the patch only to apply it to the object: a missing one is 404 first
    expect_status(api.call("PATCH", f"{path}/missing{query}", body,
                           {"Content-Type": content_type}), 404, "NotFound")


def test_apply_configurations_that_are_not_yaml_objects(api, ns):
    path = f"{CM.format(ns=ns)}/applied?fieldManager=me"
    yaml_type = {"Content-Type": "application/apply-patch+yaml"}
    status = expect_status(api.call("PATCH", path, b"a: [b", yaml_type), 400, "BadRequest")
    assert status["message"].startswith("error decoding YAML: error converting YAML to JSON: "
                                        "yaml: line 1: ")
    expect_status(api.call("PATCH", path, b"- a\n- b\n", yaml_type), 400, "BadRequest",
                  message="error decoding YAML: error unmarshaling JSON: while decoding JSON: "
                          "json: cannot unmarshal array into Go value of type "
                          "map[string]interface {}")


# -- OPTIONS --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/some-name"])
def test_options_without_cors_is_the_routers_405(gateway, ns, suffix):
    code, raw, headers = send(f"{gateway.url}{CM.format(ns=ns)}{suffix}", "OPTIONS",
                              gateway.ssl_context())
    assert code == 405
    assert headers["Content-Type"] == "application/json"
    assert "Allow" not in headers
    assert raw == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                   b'"message":"the server does not allow this method on the requested '
                   b'resource","reason":"MethodNotAllowed","details":{},"code":405}')


# -- admission webhooks that cannot be called -----------------------------------------------------


class OddWebhooks(WebhookServer):
    """The test webhook server, with answers no AdmissionReview decodes from."""

    async def _handle(self, request: web.Request) -> web.Response:
        behaviour = request.match_info["behaviour"]
        if behaviour == "boom":
            return web.Response(status=500, text="boom", content_type="text/plain")
        if behaviour == "not-json":
            return web.Response(status=200, text="nope", content_type="application/json")
        if behaviour == "empty":
            return web.Response(status=200, body=b"", content_type="application/json")
        return await super()._handle(request)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory, api: API) -> Iterator[OddWebhooks]:
    """The webhook server, published as Service webhooks/hooks with Endpoints 127.0.0.1."""
    with OddWebhooks(tmp_path_factory.mktemp("webhook")) as server:
        assert api.post("/api/v1/namespaces", {"metadata": {"name": "webhooks"}})[0] == 201
        assert api.post("/api/v1/namespaces/webhooks/services", {
            "metadata": {"name": "hooks"},
            "spec": {"ports": [{"name": "https", "port": 443,
                                "targetPort": server.port}]}})[0] == 201
        assert api.post("/api/v1/namespaces/webhooks/endpoints", {
            "metadata": {"name": "hooks"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                         "ports": [{"name": "https", "port": server.port}]}]})[0] == 201
        yield server


def hooked_namespace(api: API) -> str:
    """A namespace of the test's own, labelled so that only its webhook sees it."""
    name = f"wh-{uuid.uuid4().hex[:8]}"
    code, body = api.post("/api/v1/namespaces", {"metadata": {"name": name,
                                                               "labels": {"hooked": name}}})
    assert code == 201, body
    api.wait_for_defaults(name)  # the controllers' own writes come before any webhook
    return name


def fails_with(api: API, hooks: OddWebhooks, client_config: dict[str, Any], reason: str,
               **extra: Any) -> None:
    """Register one validating webhook for a fresh namespace; a create there must fail with
    kube's InternalError for a webhook it could not call, ``reason`` after the name."""
    namespace = hooked_namespace(api)
    name = f"{namespace}.webhooks.test"
    config = f"cfg-{namespace}"
    code, body = api.post(VALIDATING, {"metadata": {"name": config}, "webhooks": [{
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": client_config, **extra,
        "namespaceSelector": {"matchLabels": {"hooked": namespace}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"]}]}]})
    assert code == 201, body
    try:
        message = f'failed calling webhook "{name}": {reason}'
        expect_status(api.post(CM.format(ns=namespace), configmap("hooked")), 500,
                      "InternalError", message=f"Internal error occurred: {message}",
                      causes=[{"message": message}])
    finally:
        api.delete(f"{VALIDATING}/{config}")


def service(hooks: OddWebhooks, path: str, ca: bool = True) -> dict[str, Any]:
    config: dict[str, Any] = {"service": {"namespace": "webhooks", "name": "hooks",
                                          "path": path}}
    if ca:
        config["caBundle"] = hooks.ca_bundle
    return config


def test_connection_refused(api, hooks):
    port = free_port()
    url = f"https://127.0.0.1:{port}/allow"
    fails_with(api, hooks, {"url": url, "caBundle": hooks.ca_bundle},
               f'failed to call webhook: Post "{url}?timeout=10s": dial tcp 127.0.0.1:{port}: '
               "connect: connection refused")


def test_untrusted_certificate_is_gos_x509_error(api, hooks):
    fails_with(api, hooks, service(hooks, "/allow", ca=False),
               'failed to call webhook: Post "https://hooks.webhooks.svc:443/allow?timeout=10s":'
               " tls: failed to verify certificate: x509: certificate signed by unknown "
               "authority")
    assert hooks.received("/allow") == []


def test_timeout_names_the_service_url(api, hooks):
    fails_with(api, hooks, service(hooks, "/slow"),
               'failed to call webhook: Post "https://hooks.webhooks.svc:443/slow?timeout=1s": '
               "context deadline exceeded", timeoutSeconds=1)


def test_missing_service(api, hooks):
    config = service(hooks, "/allow")
    config["service"]["name"] = "nobody"
    fails_with(api, hooks, config, 'failed to call webhook: Post '
               '"https://nobody.webhooks.svc:443/allow?timeout=10s": service "nobody" not found')


@pytest.mark.parametrize(("path", "reason"), [
    ("/boom", 'an error on the server ("boom") has prevented the request from succeeding'),
    ("/not-json", "couldn't get version/kind; json parse error: invalid character 'o' in "
                  "literal null (expecting 'u')"),
    ("/empty", "0-length response with status code: 200 and content type: application/json"),
])
def test_answers_that_are_no_admission_review(api, hooks, path, reason):
    fails_with(api, hooks, service(hooks, path), f"failed to call webhook: {reason}")


def test_failure_policy_ignore_goes_on(gateway, api, hooks):
    namespace = hooked_namespace(api)
    code, body = api.post(VALIDATING, {"metadata": {"name": f"cfg-{namespace}"}, "webhooks": [{
        "name": "ignored.webhooks.test", "admissionReviewVersions": ["v1"],
        "sideEffects": "None", "failurePolicy": "Ignore",
        "clientConfig": service(hooks, "/boom"),
        "namespaceSelector": {"matchLabels": {"hooked": namespace}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"]}]}]})
    assert code == 201, body
    try:
        assert api.post(CM.format(ns=namespace), configmap("passed"))[0] == 201
        assert 'an error on the server (\\"boom\\")' in gateway.log() or \
            'an error on the server ("boom")' in gateway.log()
    finally:
        api.delete(f"{VALIDATING}/cfg-{namespace}")
