"""Schemas of flowcontrol.apiserver.k8s.io/v1: FlowSchema and PriorityLevelConfiguration.

Field names, JSON types, ``required`` lists, unions and list metadata follow kube-apiserver
v1.32's OpenAPI for these types; the descriptions are the gateway's own.
"""

from __future__ import annotations

from gateway.schema import meta as _meta  # noqa: F401 - meta definitions must exist first
from gateway.schema.dsl import (
    Schema,
    array,
    boolean,
    define,
    define_kind,
    integer,
    meta_ref,
    obj,
    ref,
    string,
)

V1 = "io.k8s.api.flowcontrol.v1"
GROUP = "flowcontrol.apiserver.k8s.io"


def fc(name: str, description: str = "") -> Schema:
    """A reference to flowcontrol/v1 definition ``name``."""
    return ref(f"{V1}.{name}", description)


def _union(schema: Schema, discriminator: str, fields: dict[str, str]) -> Schema:
    """A +union struct: which member goes with which discriminator value."""
    schema["x-kubernetes-unions"] = [{"discriminator": discriminator,
                                      "fields-to-discriminateBy": fields}]
    return schema


def _condition(kind: str) -> Schema:
    return obj(
        f"A condition of a {kind}.",
        lastTransitionTime=meta_ref("Time", "When the condition last changed status."),
        message=string("A human-readable explanation of the last transition."),
        reason=string("A one-word CamelCase reason for the last transition."),
        status=string("True, False or Unknown."),
        type=string("The condition's type, such as Dangling."),
    )


# -- FlowSchema ---------------------------------------------------------------------------

define(f"{V1}.PriorityLevelConfigurationReference", obj(
    "The priority level a FlowSchema's requests go to.",
    required=("name",),
    name=string("The name of the PriorityLevelConfiguration. Required."),
))
define(f"{V1}.FlowDistinguisherMethod", obj(
    "How the requests of a FlowSchema are divided into flows.",
    required=("type",),
    type=string("ByUser or ByNamespace. Required."),
))
define(f"{V1}.UserSubject", obj(
    "A user, by name.", required=("name",),
    name=string("The user's name, or '*' for all users. Required."),
))
define(f"{V1}.GroupSubject", obj(
    "A group of users, by name.", required=("name",),
    name=string("The group's name, or '*' for all groups; system:authenticated and "
                "system:unauthenticated cover every request. Required."),
))
define(f"{V1}.ServiceAccountSubject", obj(
    "A service account, by namespace and name.", required=("namespace", "name"),
    name=string("The service account's name, or '*' for all in the namespace. Required."),
    namespace=string("The service account's namespace. Required."),
))
define(f"{V1}.Subject", _union(obj(
    "Who a request comes from: a user, a group or a service account.",
    required=("kind",),
    group=fc("GroupSubject", "The group, when kind is Group."),
    kind=string("User, Group or ServiceAccount. Required."),
    serviceAccount=fc("ServiceAccountSubject", "The service account, when kind is "
                      "ServiceAccount."),
    user=fc("UserSubject", "The user, when kind is User."),
), "kind", {"group": "Group", "serviceAccount": "ServiceAccount", "user": "User"}))
define(f"{V1}.ResourcePolicyRule", obj(
    "Which resource requests a rule matches: by verb, API group, resource and namespace.",
    required=("verbs", "apiGroups", "resources"),
    apiGroups=array(string(), "The API groups, or '*' for all. Required.", list_type="set"),
    clusterScope=boolean("Whether requests without a namespace match."),
    namespaces=array(string(), "The namespaces, or '*' for every namespace (not for "
                     "requests without one).", list_type="set"),
    resources=array(string(), "The resources (with subresource, such as pods/log), or "
                    "'*' for all. Required.", list_type="set"),
    verbs=array(string(), "The verbs, or '*' for all. Required.", list_type="set"),
))
define(f"{V1}.NonResourcePolicyRule", obj(
    "Which non-resource requests a rule matches: by verb and URL path.",
    required=("verbs", "nonResourceURLs"),
    nonResourceURLs=array(string(), "The URL paths, such as /healthz or /apis/*; '*' for "
                          "all. Required.", list_type="set"),
    verbs=array(string(), "The verbs, or '*' for all. Required.", list_type="set"),
))
define(f"{V1}.PolicyRulesWithSubjects", obj(
    "Who (subjects) makes which requests (rules); a request matches when both match.",
    required=("subjects",),
    nonResourceRules=array(fc("NonResourcePolicyRule"), "The non-resource rules.",
                           list_type="atomic"),
    resourceRules=array(fc("ResourcePolicyRule"), "The resource rules.",
                        list_type="atomic"),
    subjects=array(fc("Subject"), "Who makes the requests; at least one. Required.",
                   list_type="atomic"),
))
define(f"{V1}.FlowSchemaSpec", obj(
    "Which requests a FlowSchema matches and which priority level serves them.",
    required=("priorityLevelConfiguration",),
    distinguisherMethod=fc("FlowDistinguisherMethod", "How matching requests are divided "
                           "into flows; one flow when left out."),
    matchingPrecedence=integer("The order in which FlowSchemas are tried, lowest first "
                               "(1 to 10000; 1000 by default)."),
    priorityLevelConfiguration=fc("PriorityLevelConfigurationReference", "The priority "
                                  "level of matching requests. Required."),
    rules=array(fc("PolicyRulesWithSubjects"), "The rules; a request matching any of them "
                "matches the FlowSchema.", list_type="atomic"),
))
define(f"{V1}.FlowSchemaCondition", _condition("FlowSchema"))
define(f"{V1}.FlowSchemaStatus", obj(
    "The current state of a FlowSchema.",
    conditions=array(fc("FlowSchemaCondition"), "The FlowSchema's conditions.",
                     list_type="map", map_keys=["type"], patch_strategy="merge",
                     merge_key="type"),
))
define_kind(
    f"{V1}.FlowSchema", GROUP, "v1", "FlowSchema",
    "A class of requests, and the priority level that serves them (API Priority and "
    "Fairness).",
    spec=fc("FlowSchemaSpec", "Which requests match, and where they go."),
    status=fc("FlowSchemaStatus", "The current state of the FlowSchema."),
)

# -- PriorityLevelConfiguration -------------------------------------------------------------

define(f"{V1}.QueuingConfiguration", obj(
    "How requests over a priority level's limit wait in queues.",
    handSize=integer("How many queues a flow is shuffle-sharded over (8 by default)."),
    queueLengthLimit=integer("How many requests may wait in one queue (50 by default)."),
    queues=integer("How many queues the priority level has (64 by default)."),
))
define(f"{V1}.LimitResponse", _union(obj(
    "What happens to a request over a priority level's limit: it queues or is rejected.",
    required=("type",),
    queuing=fc("QueuingConfiguration", "The queues, when type is Queue."),
    type=string("Queue or Reject. Required."),
), "type", {"queuing": "Queuing"}))
define(f"{V1}.LimitedPriorityLevelConfiguration", obj(
    "A priority level whose requests share a limited part of the server's concurrency.",
    borrowingLimitPercent=integer("How much concurrency the level may borrow from others, "
                                  "as a percentage of its nominal limit; no limit when "
                                  "left out."),
    lendablePercent=integer("How much of its nominal concurrency other levels may borrow "
                            "(0 to 100)."),
    limitResponse=fc("LimitResponse", "What happens to requests over the limit."),
    nominalConcurrencyShares=integer("The level's share of the server's concurrency "
                                     "(30 by default)."),
))
define(f"{V1}.ExemptPriorityLevelConfiguration", obj(
    "A priority level whose requests are not limited; its numbers only count in the "
    "division of concurrency.",
    lendablePercent=integer("How much of its nominal concurrency other levels may borrow "
                            "(0 to 100)."),
    nominalConcurrencyShares=integer("The level's share of the server's concurrency "
                                     "(0 by default)."),
))
define(f"{V1}.PriorityLevelConfigurationSpec", _union(obj(
    "Whether a priority level is exempt from limits or limited, and how.",
    required=("type",),
    exempt=fc("ExemptPriorityLevelConfiguration", "The numbers of an exempt level; only "
              "with type Exempt."),
    limited=fc("LimitedPriorityLevelConfiguration", "The limits; required with type "
               "Limited."),
    type=string("Exempt or Limited. Required."),
), "type", {"exempt": "Exempt", "limited": "Limited"}))
define(f"{V1}.PriorityLevelConfigurationCondition", _condition("PriorityLevelConfiguration"))
define(f"{V1}.PriorityLevelConfigurationStatus", obj(
    "The current state of a priority level.",
    conditions=array(fc("PriorityLevelConfigurationCondition"), "The level's conditions.",
                     list_type="map", map_keys=["type"], patch_strategy="merge",
                     merge_key="type"),
))
define_kind(
    f"{V1}.PriorityLevelConfiguration", GROUP, "v1", "PriorityLevelConfiguration",
    "A priority level of API Priority and Fairness: its share of the server's concurrency "
    "and what happens to requests over it.",
    spec=fc("PriorityLevelConfigurationSpec", "The level's limits."),
    status=fc("PriorityLevelConfigurationStatus", "The current state of the level."),
)
