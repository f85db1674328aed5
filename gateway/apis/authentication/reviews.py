"""TokenReview (is this token valid, and whose is it?) and SelfSubjectReview (who am I?)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import request_user
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.auth.authn import AuthenticationError
from gateway.auth.authn.tokens import TokenAuthenticator, authenticate_token
from gateway.endpoints.virtual import CreateOnlyEndpoints
from gateway.registry.resource import ResourceDef

GROUP = "authentication.k8s.io"


def _virtual(kind: str, plural: str) -> ResourceDef:
    return ResourceDef(group=GROUP, version="v1", kind=kind, plural=plural,
                       singular=kind.lower(), namespaced=False, verbs=("create",),
                       schema=f"io.k8s.api.authentication.v1.{kind}")


TOKEN_REVIEWS = _virtual("TokenReview", "tokenreviews")
SELF_SUBJECT_REVIEWS = _virtual("SelfSubjectReview", "selfsubjectreviews")


def token_review(token_authenticators: list[TokenAuthenticator],
                 default_audiences: tuple[str, ...]) -> CreateOnlyEndpoints:
    async def compute(request: web.BaseRequest, info: RequestInfo,
                      review: dict[str, Any]) -> dict[str, Any]:
        spec = review.get("spec") or {}
        token = spec.get("token") or ""
        if not token:
            raise status.bad_request("token is required for TokenReview in authentication")
        wanted = tuple(spec.get("audiences") or ()) or default_audiences
        try:
            result = await authenticate_token(token_authenticators, token, wanted)
        except AuthenticationError as err:
            review["status"] = {"authenticated": False, "user": {}, "error": str(err)}
            return review
        user = result.user.with_authenticated_group()
        review["status"] = {"authenticated": True, "user": user.to_dict(),
                            "audiences": list(result.audiences or wanted)}
        return review

    return CreateOnlyEndpoints(TOKEN_REVIEWS, compute)


def self_subject_review() -> CreateOnlyEndpoints:
    async def compute(request: web.BaseRequest, info: RequestInfo,
                      review: dict[str, Any]) -> dict[str, Any]:
        review["status"] = {"userInfo": request_user(request).to_dict()}
        review["metadata"] = {"creationTimestamp": None}
        return review

    return CreateOnlyEndpoints(SELF_SUBJECT_REVIEWS, compute)
