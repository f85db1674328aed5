"""Schemas of authorization.k8s.io/v1: access reviews and rules reviews."""

from __future__ import annotations

from gateway.schema import meta as _meta  # noqa: F401
from gateway.schema.dsl import (
    array,
    boolean,
    define,
    define_kind,
    map_of,
    obj,
    ref,
    string,
)

V1 = "io.k8s.api.authorization.v1"
GROUP = "authorization.k8s.io"


def authz(name: str, description: str = "") -> dict:
    return ref(f"{V1}.{name}", description)


define(f"{V1}.ResourceAttributes", obj(
    "A request on a resource, to be checked.",
    group=string("API group of the resource; '*' for all."),
    name=string("Name of the object; empty for all."),
    namespace=string("Namespace; empty for all (or for cluster-scoped resources)."),
    resource=string("The resource; '*' for all."),
    subresource=string("The subresource, if any."),
    verb=string("The verb: get, list, create, ..., or '*'."),
    version=string("API version of the resource; '*' for all."),
))
define(f"{V1}.NonResourceAttributes", obj(
    "A request on a path outside the API, to be checked.",
    path=string("The URL path."),
    verb=string("The HTTP verb in lower case."),
))
define(f"{V1}.SubjectAccessReviewSpec", obj(
    "Who asks to do what.",
    extra=map_of(array(string(), list_type="atomic"), "Extra attributes of the user."),
    groups=array(string(), "Groups of the user.", list_type="atomic"),
    nonResourceAttributes=authz("NonResourceAttributes", "The path and verb to check."),
    resourceAttributes=authz("ResourceAttributes", "The resource request to check."),
    uid=string("UID of the user."),
    user=string("The user."),
))
define(f"{V1}.SelfSubjectAccessReviewSpec", obj(
    "What the requester asks to do.",
    nonResourceAttributes=authz("NonResourceAttributes", "The path and verb to check."),
    resourceAttributes=authz("ResourceAttributes", "The resource request to check."),
))
define(f"{V1}.SubjectAccessReviewStatus", obj(
    "The answer.",
    required=("allowed",),
    allowed=boolean("Whether the action is allowed."),
    denied=boolean("Whether the action is explicitly denied."),
    evaluationError=string("What went wrong while deciding, if anything."),
    reason=string("Why it was decided so."),
))
for kind, spec, namespaced in (("SubjectAccessReview", "SubjectAccessReviewSpec", False),
                               ("LocalSubjectAccessReview", "SubjectAccessReviewSpec", True),
                               ("SelfSubjectAccessReview", "SelfSubjectAccessReviewSpec",
                                False)):
    define_kind(f"{V1}.{kind}", GROUP, "v1", kind, f"Asks whether a request would be "
                f"allowed ({'in one namespace' if namespaced else 'anywhere'}).",
                required=("spec",), spec=authz(spec, "The request to check."),
                status=authz("SubjectAccessReviewStatus", "Whether it is allowed."))
define(f"{V1}.ResourceRule", obj(
    "Actions the requester may take on resources.",
    required=("verbs",),
    apiGroups=array(string(), "API groups.", list_type="atomic"),
    resourceNames=array(string(), "Object names, or empty for all.", list_type="atomic"),
    resources=array(string(), "Resources.", list_type="atomic"),
    verbs=array(string(), "Verbs.", list_type="atomic"),
))
define(f"{V1}.NonResourceRule", obj(
    "Actions the requester may take on non-resource paths.",
    required=("verbs",),
    nonResourceURLs=array(string(), "Paths.", list_type="atomic"),
    verbs=array(string(), "Verbs.", list_type="atomic"),
))
define(f"{V1}.SelfSubjectRulesReviewSpec", obj(
    "Which namespace to list the rules for.", namespace=string("The namespace.")))
define(f"{V1}.SubjectRulesReviewStatus", obj(
    "Everything the requester may do in the namespace.",
    required=("resourceRules", "nonResourceRules", "incomplete"),
    evaluationError=string("What went wrong, if the list may be incomplete."),
    incomplete=boolean("Whether some rules could not be listed."),
    nonResourceRules=array(authz("NonResourceRule"), "Rules on non-resource paths.",
                           list_type="atomic"),
    resourceRules=array(authz("ResourceRule"), "Rules on resources.", list_type="atomic"),
))
define_kind(f"{V1}.SelfSubjectRulesReview", GROUP, "v1", "SelfSubjectRulesReview",
            "Asks what the requester may do in a namespace (kubectl auth can-i --list).",
            required=("spec",),
            spec=authz("SelfSubjectRulesReviewSpec", "The namespace to list rules in."),
            status=authz("SubjectRulesReviewStatus", "The requester's rules there."))
