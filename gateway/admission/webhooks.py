"""Admission webhooks: every write is sent to the webhooks whose configuration matches it.

Mutating webhooks are called one after another, configurations in name order, each seeing the
object as the ones before it left it, and may answer with a JSON patch. Validating webhooks are
then called all at once and may only allow or deny. Each call is an AdmissionReview (v1, or
v1beta1 for a webhook that only speaks that) posted over HTTPS to ``clientConfig.url`` or to the
Service ``clientConfig.service`` (through the ServiceResolver it is given), verified against
``clientConfig.caBundle``, within ``timeoutSeconds``. A webhook that cannot be called, or answers
nonsense, fails the write with 500 under ``failurePolicy: Fail`` and is skipped under ``Ignore``;
a denial becomes the Status the webhook gave (at least 400), as kube words it.

``matchConditions`` (CEL, see conditions) are evaluated after the rules and selectors: one that
is false skips the webhook.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
import uuid
from typing import Any

import jsonpatch
import orjson
import structlog

from gateway.admission.attributes import admission_request, at_version, cel_data
from gateway.admission.conditions import ConditionError, evaluate, webhook_condition
from gateway.admission.expressions import Activation
from gateway.admission.matching import (
    labels_of,
    matched_version,
    namespace_selector_matches,
    object_selector_matches,
    request_namespace,
)
from gateway.apimachinery import status
from gateway.apimachinery.gowords import (
    TYPE_META_STRUCT,
    go_quote,
    json_kind,
    json_patch_shape_error,
    json_syntax_error,
)
from gateway.cel import authz
from gateway.registry.admission import Attributes
from gateway.registry.lister import Lister
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ServiceResolver
from gateway.transport.webhook import CallFailed, http_error, post, target

log = structlog.get_logger(__name__)

Object = dict[str, Any]
REVIEW_VERSIONS = ("v1", "v1beta1")
#: kube's admission webhook client's request headers (rest client defaults).
_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, */*",
            "User-Agent": "kube-apiserver-admission"}


class CallError(Exception):
    """The webhook could not be called or gave no usable answer (failurePolicy decides)."""


class WebhookAdmission:
    """The mutating and validating webhook phases of admission, for every REST store."""

    def __init__(self, mutating: Lister, validating: Lister, namespaces: Lister,
                 resolver: ServiceResolver, clients: ClientManager,
                 authorize: authz.Authorize | None = None) -> None:
        self.mutating = mutating
        self.validating = validating
        self.namespaces = namespaces
        self.resolver = resolver
        #: Answers the ``authorizer`` of matchConditions (none given: every check fails).
        self.authorize = authorize
        #: The gateway's one outgoing client (TLS contexts and pooled connections), shared
        #: with the proxy and the aggregator's downloads and checks; closed by its owner.
        self.clients = clients

    @property
    def configured(self) -> bool:
        """Whether any webhook configuration exists (most writes need nothing more)."""
        return bool(self.mutating.objects() or self.validating.objects())

    # -- the two phases (the chain calls mutate first, and validate after the policies) ------

    async def mutate(self, attrs: Attributes) -> Object | None:
        """The object after every matching mutating webhook (None when none changed it).

        A webhook with ``reinvocationPolicy: IfNeeded`` is called once more, after the others,
        when a webhook after it changed the object."""
        webhooks = await self._matching(self.mutating, attrs)
        original = attrs.obj
        again: set[int] = set()
        for index, (webhook, version) in enumerate(webhooks):
            if await self._mutate_one(webhook, version, attrs):
                again |= {i for i in range(index)
                          if webhooks[i][0].get("reinvocationPolicy") == "IfNeeded"}
        for index in sorted(again):
            await self._mutate_one(*webhooks[index], attrs)
        return attrs.obj if attrs.obj is not original else None

    async def _mutate_one(self, webhook: Object, version: str, attrs: Attributes) -> bool:
        """Call one mutating webhook at ``version``; whether its patch changed the object
        (which is then converted back to the request's version)."""
        seen = await at_version(attrs, version)
        response = await self._admit_one(webhook, seen, mutating=True)
        if response is None or not response.get("patch") or attrs.operation == "DELETE":
            return False
        patched = _patched(webhook["name"], seen.obj, response["patch"])
        if patched == seen.obj:
            return False
        if seen is not attrs:
            assert attrs.convert is not None
            patched = await attrs.convert(patched, attrs.resource.api_version)
        attrs.obj = patched
        return True

    async def validate(self, attrs: Attributes) -> None:
        """Call every matching validating webhook at once; the first denial (in order) wins."""
        webhooks = await self._matching(self.validating, attrs)
        if not webhooks:
            return
        results = await asyncio.gather(
            *(self._validate_one(webhook, version, attrs) for webhook, version in webhooks),
            return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _validate_one(self, webhook: Object, version: str, attrs: Attributes) -> None:
        await self._admit_one(webhook, await at_version(attrs, version), mutating=False)

    # -- which webhooks ---------------------------------------------------------------------

    async def _matching(self, configurations: Lister,
                        attrs: Attributes) -> list[tuple[Object, str]]:
        """The webhooks to call, each with the version it is called at."""
        if attrs.exempt:
            return []
        configs = sorted(configurations.objects(), key=lambda c: c["metadata"]["name"])
        candidates = [(w, version) for c in configs for w in c.get("webhooks") or []
                      if (version := matched_version(w, attrs)) is not None
                      and object_selector_matches(w, attrs)]
        if not candidates:
            return []
        labels = labels_of(await request_namespace(self.namespaces, attrs))
        return [(w, version) for w, version in candidates
                if namespace_selector_matches(w, attrs, labels)]

    # -- one call -----------------------------------------------------------------------------

    async def _admit_one(self, webhook: Object, attrs: Attributes, *,
                         mutating: bool) -> Object | None:
        """The webhook's AdmissionResponse (None when it failed and may be ignored)."""
        name = webhook.get("name", "")
        try:
            if not await self._conditions_hold(webhook, attrs):
                return None
            response = await self._call(webhook, attrs, mutating=mutating)
        except CallError as err:
            if webhook.get("failurePolicy", "Fail") == "Ignore":
                log.warning("admission webhook failed; ignored by its failurePolicy",
                            webhook=name, error=str(err))
                return None
            raise status.internal_error(f'failed calling webhook "{name}": {err}') from None
        for warning in response.get("warnings") or []:
            attrs.warnings.append(str(warning))
        if not response.get("allowed"):
            raise denied(name, response.get("status"))
        return response

    async def _conditions_hold(self, webhook: Object, attrs: Attributes) -> bool:
        conditions = webhook.get("matchConditions") or []
        if not conditions:
            return True
        compiled = [(c.get("name", ""), webhook_condition(c.get("expression", "")))
                    for c in conditions]
        checks = authz.Checks(self.authorize) if self.authorize is not None else None
        try:
            match = await evaluate(compiled, Activation(cel_data(attrs), checks))
        except ConditionError as err:
            raise CallError(f"failed evaluating match conditions: {err}") from None
        return match.matches

    async def _call(self, webhook: Object, attrs: Attributes, *, mutating: bool) -> Object:
        versions = [v for v in webhook.get("admissionReviewVersions") or []
                    if v in REVIEW_VERSIONS]
        version = versions[0] if versions else "v1"
        uid = str(uuid.uuid4())
        body = review_request(uid, attrs, version)
        reply = await self._post(webhook, body)
        return review_response(reply, uid, version, mutating=mutating)

    async def _post(self, webhook: Object, body: Object) -> Any:
        """POST the review as kube's webhook client does; CallError in kube's words (Go's
        for the call itself, client-go's for the answer)."""
        config = webhook.get("clientConfig") or {}
        timeout = int(webhook.get("timeoutSeconds") or 10)
        try:
            context = self._context(config.get("caBundle") or "")
        except (ValueError, ssl.SSLError):  # client-go refuses the bundle
            raise CallError("could not get REST client: unable to load root certificates: "
                            "unable to parse bytes as PEM block") from None
        try:
            where = await target(config, self.resolver, timeout)
            code, content_type, data = await post(self.clients, where, json.dumps(body).encode(),
                                                  context, timeout, _HEADERS)
        except CallFailed as err:
            raise CallError(f"failed to call webhook: {err}") from None
        if not 200 <= code <= 206:
            raise CallError(f"failed to call webhook: {http_error(code, content_type, data)}")
        return _decoded(code, content_type, data)

    def _context(self, ca_bundle: str) -> ssl.SSLContext:
        """TLS trusting ``caBundle`` (base64 PEM), or the system's roots without one; no
        client certificate (kube's webhooks present one only when the admission
        configuration names one)."""
        try:
            pem = base64.b64decode(ca_bundle) if ca_bundle else b""
        except (binascii.Error, ValueError) as err:
            raise ValueError(f"invalid caBundle: {err}") from None
        return self.clients.context(pem)


# -- AdmissionReview ------------------------------------------------------------------------------


def _decoded(code: int, content_type: str, data: bytes) -> Any:
    """The answer's JSON, as client-go's decoder reads it (its errors when it cannot)."""
    if not data:
        raise CallError(f"failed to call webhook: 0-length response with status code: {code} "
                        f"and content type: {content_type or 'application/json'}")
    try:
        review = orjson.loads(data)
    except orjson.JSONDecodeError:
        syntax = json_syntax_error(data)
        if syntax:
            raise CallError("failed to call webhook: couldn't get version/kind; json parse "
                            f"error: {syntax}") from None
        review = json.loads(data.decode("utf-8", "replace"))
    if review is not None and not isinstance(review, dict):
        raise CallError("failed to call webhook: couldn't get version/kind; json parse error: "
                        f"json: cannot unmarshal {json_kind(review)} into Go value of type "
                        f"{TYPE_META_STRUCT}")
    return review or {}


def _group_version_kind(review: Object) -> str:
    """schema.GroupVersionKind's String() of what the answer says it is."""
    api_version = v if isinstance(v := review.get("apiVersion"), str) else ""
    group, _, version = api_version.rpartition("/")
    kind = review.get("kind") if isinstance(review.get("kind"), str) else ""
    return f"{group}/{version}, Kind={kind}"


def review_request(uid: str, attrs: Attributes, version: str) -> Object:
    request = admission_request(uid, attrs)
    request["object"], request["oldObject"] = attrs.obj, attrs.old  # serialized at once
    return {"apiVersion": f"admission.k8s.io/{version}", "kind": "AdmissionReview",
            "request": request}


def review_response(review: Any, uid: str, version: str, *, mutating: bool) -> Object:
    """The response of a webhook's AdmissionReview, checked as kube checks it."""
    if not isinstance(review, dict):
        review = {}
    if review.get("apiVersion") != f"admission.k8s.io/{version}" or \
            review.get("kind") != "AdmissionReview":
        raise CallError(f"received invalid webhook response: expected webhook response of "
                        f"admission.k8s.io/{version}, Kind=AdmissionReview, got "
                        f"{_group_version_kind(review)}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise CallError("received invalid webhook response: webhook response was absent")
    if response.get("uid") != uid:
        got = v if isinstance(v := response.get("uid"), str) else ""
        raise CallError(f"received invalid webhook response: expected response.uid="
                        f"{go_quote(uid)}, got {go_quote(got)}")
    if response.get("patch"):
        if not mutating:
            raise CallError("received invalid webhook response: validating webhooks may not "
                            "return patches")
        if response.get("patchType") != "JSONPatch":
            patch_type = response.get("patchType")
            raise CallError("received invalid webhook response: webhook returned invalid "
                            f"response.patchType of "
                            f"{go_quote(patch_type if isinstance(patch_type, str) else '')}")
    return response


def _patched(name: str, obj: Object | None, patch: str) -> Object:
    """The object with a mutating webhook's JSON patch applied; a patch that does not apply
    is kube's InternalError with evanphx/json-patch's words for the operation that failed."""
    try:
        data = base64.b64decode(patch)
    except (binascii.Error, ValueError):
        data = b""
    try:
        operations = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise status.internal_error(json_syntax_error(data) or "unexpected end of JSON input") \
            from None
    shape = json_patch_shape_error(operations)
    if shape:
        raise status.internal_error(shape)
    doc: Any = obj or {}
    for operation in operations:
        try:
            doc = jsonpatch.JsonPatch([operation]).apply(doc)  # a patched copy
        except (ValueError, TypeError, KeyError, IndexError, jsonpatch.JsonPatchException,
                jsonpatch.JsonPointerException):
            raise status.internal_error(_operation_failed(operation)) from None
    return doc


def _operation_failed(operation: Object) -> str:
    """evanphx/json-patch's error for an operation that does not apply."""
    kind = v if isinstance(v := operation.get("op"), str) else "unknown"
    path = v if isinstance(v := operation.get("path"), str) else ""
    source = v if isinstance(v := operation.get("from"), str) else ""
    if kind == "test":
        return f"testing value {path} failed: test failed"
    if kind in ("add", "remove"):
        return f"{kind} operation does not apply: doc is missing path: {go_quote(path)}: " \
               "missing value"
    if kind == "replace":
        return f"replace operation does not apply: doc is missing key: {path}: missing value"
    if kind in ("move", "copy"):
        return f"{kind} operation does not apply: doc is missing from path: {source}: " \
               "missing value"
    return f"Unexpected kind: {kind}"


def denied(name: str, result: Any) -> status.StatusError:
    """A denial as kube reports it: the webhook's code (at least 400) and its message."""
    result = result if isinstance(result, dict) else {}
    prefix = f'admission webhook "{name}" denied the request'
    code = result.get("code") if isinstance(result.get("code"), int) else 0
    reason = str(result.get("reason") or "")
    if result.get("message"):
        message = f"{prefix}: {result['message']}"
    elif reason:
        message = f"{prefix}: {reason}"
    else:
        message = f"{prefix} without explanation"
    return status.StatusError(max(code, 400), reason, message)
