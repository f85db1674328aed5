"""Access reviews (would this be allowed?) and rules reviews (what may I do here?)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import request_user
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.auth.authorizer import Attributes, Authorizer, Decision
from gateway.auth.rbac.authorizer import RBAC
from gateway.endpoints.virtual import CreateOnlyEndpoints
from gateway.registry.resource import ResourceDef

GROUP = "authorization.k8s.io"
META_GROUP = "meta.k8s.io"


def _virtual(kind: str, plural: str, namespaced: bool = False) -> ResourceDef:
    return ResourceDef(group=GROUP, version="v1", kind=kind, plural=plural,
                       singular=kind.lower(), namespaced=namespaced, verbs=("create",),
                       schema=f"io.k8s.api.authorization.v1.{kind}")


SUBJECT_ACCESS_REVIEWS = _virtual("SubjectAccessReview", "subjectaccessreviews")
SELF_SUBJECT_ACCESS_REVIEWS = _virtual("SelfSubjectAccessReview", "selfsubjectaccessreviews")
LOCAL_SUBJECT_ACCESS_REVIEWS = _virtual("LocalSubjectAccessReview",
                                        "localsubjectaccessreviews", namespaced=True)
SELF_SUBJECT_RULES_REVIEWS = _virtual("SelfSubjectRulesReview", "selfsubjectrulesreviews")


def _invalid(kind: str, message: str, field: str) -> status.StatusError:
    return status.invalid(kind, "", [status.Cause("FieldValueInvalid", message, field)],
                          group=GROUP)


def attributes_of(kind: str, spec: dict[str, Any], user: UserInfo) -> Attributes:
    """What a review asks about; exactly one of resourceAttributes and
    nonResourceAttributes (422 otherwise)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        raise _invalid(kind, "Invalid value: exactly one of nonResourceAttributes or "
                       "resourceAttributes must be specified", "spec")
    if non_resource:
        return Attributes(user, non_resource.get("verb", ""), False,
                          path=non_resource.get("path", ""))
    assert resource  # exactly one of the two is given (checked above)
    return Attributes(user, resource.get("verb", ""), True, resource.get("namespace", ""),
                      resource.get("group", ""), resource.get("version", ""),
                      resource.get("resource", ""), resource.get("subresource", ""),
                      resource.get("name", ""))


async def _decide(authorize: Authorizer, attributes: Attributes) -> dict[str, Any]:
    decision, reason = await authorize(attributes)
    result: dict[str, Any] = {"allowed": decision is Decision.ALLOW}
    if decision is Decision.DENY:
        result["denied"] = True
    if reason:
        result["reason"] = reason
    return result


def _spec_user(spec: dict[str, Any]) -> UserInfo:
    extra = {k: tuple(v) for k, v in (spec.get("extra") or {}).items()}
    return UserInfo(spec.get("user", ""), spec.get("uid", ""),
                    tuple(spec.get("groups") or ()), extra)


def subject_access_review(authorize: Authorizer) -> CreateOnlyEndpoints:
    async def compute(request: web.BaseRequest, info: RequestInfo,
                      review: dict[str, Any]) -> dict[str, Any]:
        spec = review.get("spec") or {}
        if not spec.get("user") and not spec.get("groups"):
            raise _invalid("SubjectAccessReview", "Invalid value: at least one of user or "
                           "group must be specified", "spec.user")
        attributes = attributes_of("SubjectAccessReview", spec, _spec_user(spec))
        review["status"] = await _decide(authorize, attributes)
        return review

    return CreateOnlyEndpoints(SUBJECT_ACCESS_REVIEWS, compute)


def local_subject_access_review(authorize: Authorizer) -> CreateOnlyEndpoints:
    async def compute(request: web.BaseRequest, info: RequestInfo,
                      review: dict[str, Any]) -> dict[str, Any]:
        spec = review.get("spec") or {}
        kind = "LocalSubjectAccessReview"
        if spec.get("nonResourceAttributes"):
            raise _invalid(kind, "Invalid value: disallowed on this kind of request",
                           "spec.nonResourceAttributes")
        resource = spec.get("resourceAttributes") or {}
        if resource.get("namespace") and resource["namespace"] != info.namespace:
            raise _invalid(kind, "Invalid value: must match metadata.namespace",
                           "spec.resourceAttributes.namespace")
        resource["namespace"] = info.namespace
        if not spec.get("user") and not spec.get("groups"):
            raise _invalid(kind, "Invalid value: at least one of user or group must be "
                           "specified", "spec.user")
        attributes = attributes_of(kind, spec, _spec_user(spec))
        review["status"] = await _decide(authorize, attributes)
        return review

    return CreateOnlyEndpoints(LOCAL_SUBJECT_ACCESS_REVIEWS, compute)


def self_subject_access_review(authorize: Authorizer) -> CreateOnlyEndpoints:
    async def compute(request: web.BaseRequest, info: RequestInfo,
                      review: dict[str, Any]) -> dict[str, Any]:
        spec = review.get("spec") or {}
        attributes = attributes_of("SelfSubjectAccessReview", spec, request_user(request))
        review["status"] = await _decide(authorize, attributes)
        return review

    return CreateOnlyEndpoints(SELF_SUBJECT_ACCESS_REVIEWS, compute)


def self_subject_rules_review(rbac: RBAC | None, always_allow: bool) -> CreateOnlyEndpoints:
    async def compute(request: web.BaseRequest, info: RequestInfo,
                      review: dict[str, Any]) -> dict[str, Any]:
        namespace = (review.get("spec") or {}).get("namespace", "")
        if always_allow:
            rules = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                     {"verbs": ["*"], "nonResourceURLs": ["*"]}]
        else:
            rules = rbac.rules_for(request_user(request), namespace) if rbac else []
        resource_rules, url_rules = [], []
        for rule in rules:
            if rule.get("nonResourceURLs"):
                url_rules.append({"verbs": rule.get("verbs") or [],
                                  "nonResourceURLs": rule["nonResourceURLs"]})
            else:
                entry = {"verbs": rule.get("verbs") or [],
                         "apiGroups": rule.get("apiGroups") or [],
                         "resources": rule.get("resources") or []}
                if rule.get("resourceNames"):
                    entry["resourceNames"] = rule["resourceNames"]
                resource_rules.append(entry)
        review["status"] = {"resourceRules": resource_rules, "nonResourceRules": url_rules,
                            "incomplete": False}
        return review

    return CreateOnlyEndpoints(SELF_SUBJECT_RULES_REVIEWS, compute)
