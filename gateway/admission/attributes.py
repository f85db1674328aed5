"""What the admission plugins make of a write's Attributes: the AdmissionRequest (kube's
CreateAdmissionRequest, the same for webhooks' reviews and for CEL's ``request``), the write
as seen at another version of its resource (matchPolicy Equivalent), and what CEL expressions
are bound to, the authorizer included.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.admission.expressions import (
    AUTHORIZER,
    NAMESPACE,
    OBJECT,
    OLD_OBJECT,
    PARAMS,
    REQUEST,
    REQUEST_RESOURCE,
)
from gateway.apimachinery.user import UserInfo
from gateway.auth.authorizer import Attributes as AuthzAttributes
from gateway.auth.authorizer import Authorizer, Decision
from gateway.cel import authz
from gateway.registry.admission import Attributes

Object = dict[str, Any]


def admission_request(uid: str, attrs: Attributes) -> Object:
    """The AdmissionRequest without its objects: kind and resource at the version the write is
    seen at, requestKind and requestResource at the request's."""
    res = attrs.resource
    version = attrs.matched_version or res.version
    kind = attrs.kind or {"group": res.group, "version": version, "kind": res.kind}
    resource = {"group": res.group, "version": version, "resource": res.plural}
    request_kind = attrs.kind or {"group": res.group, "version": res.version, "kind": res.kind}
    request_resource = {"group": res.group, "version": res.version, "resource": res.plural}
    request: Object = {
        "uid": uid, "kind": kind, "resource": resource,
        "requestKind": request_kind, "requestResource": request_resource,
        "name": attrs.name, "operation": attrs.operation,
        "userInfo": attrs.user.to_dict() if attrs.user is not None else {},
        "dryRun": attrs.dry_run, "options": attrs.options,
    }
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    return request


async def at_version(attrs: Attributes, version: str) -> Attributes:
    """The write as seen at another version of its resource: its objects converted there
    (a subresource's own kind, a Scale, is the same at every version)."""
    if version == attrs.resource.version:
        return attrs
    if attrs.kind is not None or attrs.convert is None:
        return dataclasses.replace(attrs, matched_version=version)
    api_version = f"{attrs.resource.group}/{version}"
    obj = await attrs.convert(attrs.obj, api_version) if attrs.obj is not None else None
    old = await attrs.convert(attrs.old, api_version) if attrs.old is not None else None
    return dataclasses.replace(attrs, obj=obj, old=old, matched_version=version)


def cel_data(attrs: Attributes, *, namespace: Object | None = None,
             params: Object | None = None) -> dict[str, Any]:
    """What admission expressions are bound to (kube's newActivation)."""
    user = attrs.user.to_dict() if attrs.user is not None else {}
    res = attrs.resource
    return {
        OBJECT: attrs.obj, OLD_OBJECT: attrs.old, PARAMS: params,
        REQUEST: admission_request("", attrs), NAMESPACE: namespace,
        AUTHORIZER: authz.authorizer_value(user),
        REQUEST_RESOURCE: authz.request_resource_value(
            user, res.group, res.plural, attrs.subresource, attrs.namespace, attrs.name),
    }


def cel_authorizer(authorize: Authorizer) -> authz.Authorize:
    """The CEL authorizer library's checks, answered by the gateway's authorizer."""

    async def answer(check: authz.CheckRequest) -> authz.Answer:
        user = check.user
        extra = {k: tuple(v) for k, v in (user.get("extra") or {}).items()}
        info = UserInfo(user.get("username", ""), user.get("uid", ""),
                        tuple(user.get("groups") or ()), extra)
        decision, reason = await authorize(AuthzAttributes(
            info, check.verb, check.resource_request, check.namespace, check.group,
            check.version, check.resource, check.subresource, check.name, check.path))
        return authz.Answer(decision is Decision.ALLOW, reason)

    return answer
