"""Schemas of authentication.k8s.io/v1: TokenReview, SelfSubjectReview, TokenRequest."""

from __future__ import annotations

from gateway.schema import meta as _meta  # noqa: F401
from gateway.schema.dsl import (
    array,
    boolean,
    define,
    define_kind,
    integer,
    map_of,
    meta_ref,
    obj,
    ref,
    string,
)

V1 = "io.k8s.api.authentication.v1"
GROUP = "authentication.k8s.io"

define(f"{V1}.UserInfo", obj(
    "Who a user is: name, uid, groups and extra attributes.",
    extra=map_of(array(string(), list_type="atomic"), "Extra attributes of the user."),
    groups=array(string(), "Groups the user is in.", list_type="atomic"),
    uid=string("A unique identifier of the user."),
    username=string("The user's name."),
))
define(f"{V1}.TokenReviewSpec", obj(
    "The token to check.",
    audiences=array(string(), "Audiences the token must be for; the server's by default.",
                    list_type="atomic"),
    token=string("The bearer token."),
))
define(f"{V1}.TokenReviewStatus", obj(
    "What the token says about its bearer.",
    audiences=array(string(), "Audiences the token was accepted for.", list_type="atomic"),
    authenticated=boolean("Whether the token is valid."),
    error=string("Why the token was not accepted."),
    user=ref(f"{V1}.UserInfo", "The user the token belongs to."),
))
define_kind(f"{V1}.TokenReview", GROUP, "v1", "TokenReview",
            "Asks the server whether a token is valid and whose it is.",
            required=("spec",),
            spec=ref(f"{V1}.TokenReviewSpec", "The token to review."),
            status=ref(f"{V1}.TokenReviewStatus", "Whether the token is valid, and whose."))
define(f"{V1}.SelfSubjectReviewStatus", obj(
    "Who the requester is.", userInfo=ref(f"{V1}.UserInfo", "The requester.")))
define_kind(f"{V1}.SelfSubjectReview", GROUP, "v1", "SelfSubjectReview",
            "Asks the server who the requester is (kubectl auth whoami).",
            status=ref(f"{V1}.SelfSubjectReviewStatus", "Who the requester is."))
define(f"{V1}.BoundObjectReference", obj(
    "The object a token is bound to: the token dies with it.",
    apiVersion=string("API version of the object."),
    kind=string("Pod, Secret or Node."),
    name=string("Name of the object."),
    uid=string("UID of the object."),
))
define(f"{V1}.TokenRequestSpec", obj(
    "What token to issue.",
    required=("audiences",),
    audiences=array(string(), "Audiences of the token.", list_type="atomic"),
    boundObjectRef=ref(f"{V1}.BoundObjectReference", "The object the token is bound to."),
    expirationSeconds=integer("How long the token is valid, in seconds.", format="int64"),
))
define(f"{V1}.TokenRequestStatus", obj(
    "The issued token.",
    required=("token", "expirationTimestamp"),
    expirationTimestamp=meta_ref("Time", "When the token expires."),
    token=string("The token."),
))
define_kind(f"{V1}.TokenRequest", GROUP, "v1", "TokenRequest",
            "Asks for a token for a service account.",
            required=("spec",),
            spec=ref(f"{V1}.TokenRequestSpec", "The token wanted."),
            status=ref(f"{V1}.TokenRequestStatus", "The token issued."))
