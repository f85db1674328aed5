"""core/v1 serviceaccounts, and their ``token`` subresource (TokenRequest), which mints bound
service-account tokens: what ``kubectl create token`` asks for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.context import request_user
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.auth.authn.serviceaccount import BoundObject, ServiceAccountTokens, UidLookup
from gateway.endpoints.negotiation import negotiate, respond
from gateway.endpoints.virtual import read_typed_body
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore, WriteOptions
from gateway.registry.strategy import Strategy
from gateway.registry.tables import AGE, NAME, Column

DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 2**32
BOUND_KINDS = ("Pod", "Secret", "Node")
TOKEN_REQUEST = "io.k8s.api.authentication.v1.TokenRequest"
TOKEN_REQUEST_KIND = {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}

SERVICEACCOUNTS = ResourceDef(
    group="", version="v1", kind="ServiceAccount", plural="serviceaccounts",
    singular="serviceaccount", namespaced=True, strategy=Strategy(), short_names=("sa",),
    columns=(NAME, Column("Secrets", "integer", "Number of secrets the account may use.",
                          lambda o: len(o.get("secrets") or [])), AGE),
    schema="io.k8s.api.core.v1.ServiceAccount", subresources=("token",),
)


def _invalid(field: str, message: str) -> status.StatusError:
    return status.invalid("TokenRequest", "", [status.Cause("FieldValueInvalid", message, field)],
                          group="authentication.k8s.io")


async def _bound(ref: dict | None, namespace: str, lookup: UidLookup) -> BoundObject | None:
    if not ref:
        return None
    kind, name = ref.get("kind", ""), ref.get("name", "")
    if kind not in BOUND_KINDS:
        raise _invalid("spec.boundObjectRef.kind", f'Unsupported value: "{kind}": supported '
                       'values: "Pod", "Node", "Secret"')
    uid = await lookup(kind, "" if kind == "Node" else namespace, name)
    if uid is None:
        raise status.not_found(f"{kind.lower()}s", name)
    if ref.get("uid") and ref["uid"] != uid:
        raise status.conflict(f"{kind.lower()}s", name, "the UID in the bound object reference "
                              f"({ref['uid']}) does not match the UID in record. The object "
                              "might have been deleted and then recreated")
    return BoundObject(kind, name, uid)


#: What the token subresource's route calls (a ResourceHandler of the server layer above).
TokenHandler = Callable[[web.BaseRequest, RequestInfo], Awaitable[web.StreamResponse]]


def token_request_handler(accounts: RESTStore, tokens: ServiceAccountTokens,
                          lookup: UidLookup) -> TokenHandler:
    """POST serviceaccounts/<name>/token."""

    async def handle(request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
        if info.verb != "create":
            raise status.method_not_allowed(info.verb, "serviceaccounts/token")
        media = negotiate(request, protobuf=True)
        token_request = await read_typed_body(request, "TokenRequest",
                                              "authentication.k8s.io/v1",
                                              {"$ref": TOKEN_REQUEST})
        account = await accounts.get(info.namespace, info.name)
        token_request = await accounts.admit_subresource_create(
            "token", info.namespace, info.name, token_request, TOKEN_REQUEST_KIND,
            WriteOptions(subresource="token", user=request_user(request)))
        spec = token_request.setdefault("spec", {})
        expiration = spec.get("expirationSeconds") or DEFAULT_EXPIRATION
        if expiration < MIN_EXPIRATION:
            raise _invalid("spec.expirationSeconds", f"Invalid value: {expiration}: may not "
                           "specify a duration less than 10 minutes")
        if expiration > MAX_EXPIRATION:
            raise _invalid("spec.expirationSeconds", f"Invalid value: {expiration}: may not "
                           "specify a duration larger than 2^32 seconds")
        audiences = list(spec.get("audiences") or tokens.audiences)
        bound = await _bound(spec.get("boundObjectRef"), info.namespace, lookup)
        token, expires = tokens.mint(info.namespace, info.name, account["metadata"]["uid"],
                                     audiences, expiration, bound)
        spec.update(audiences=audiences, expirationSeconds=expiration)
        token_request["metadata"] = {"name": info.name, "namespace": info.namespace,
                                     "creationTimestamp": now_rfc3339()}
        stamp = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        token_request["status"] = {"token": token, "expirationTimestamp": stamp}
        return respond(token_request, media, 201)

    return handle
