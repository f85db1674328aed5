"""Schemas of admissionregistration.k8s.io/v1: validating and mutating webhook configurations.

Field names, JSON types, ``required`` lists, enums and list metadata follow kube-apiserver
v1.32's OpenAPI for these types; the descriptions are the gateway's own.
"""

from __future__ import annotations

from gateway.schema import meta as _meta  # noqa: F401 - meta definitions must exist first
from gateway.schema.dsl import (
    Schema,
    array,
    define,
    define_kind,
    integer,
    meta_ref,
    obj,
    ref,
    string,
)

V1 = "io.k8s.api.admissionregistration.v1"
GROUP = "admissionregistration.k8s.io"
WEBHOOK_REQUIRED = ("name", "clientConfig", "sideEffects", "admissionReviewVersions")


def adm(name: str, description: str = "") -> Schema:
    """A reference to admissionregistration/v1 definition ``name``."""
    return ref(f"{V1}.{name}", description)


define(f"{V1}.ServiceReference", obj(
    "A Service in the cluster that serves a webhook.",
    required=("namespace", "name"),
    name=string("Name of the service."),
    namespace=string("Namespace of the service."),
    path=string("URL path that requests to the service are sent to."),
    port=integer("Port of the service to call; 443 by default (1 to 65535)."),
))
define(f"{V1}.WebhookClientConfig", obj(
    "How the API server reaches a webhook over TLS: by URL or by Service, and which CA to "
    "trust; exactly one of url and service is set.",
    caBundle=string("PEM-encoded CA certificates that verify the webhook's serving "
                    "certificate; the system trust roots when left out.", format="byte"),
    service=adm("ServiceReference", "The in-cluster Service that serves the webhook."),
    url=string("The https URL of the webhook, with no user, query or fragment."),
))
define(f"{V1}.RuleWithOperations", obj(
    "Which operations on which resources a webhook is called for.",
    apiGroups=array(string(), "The API groups of the resources; '*' for all, '' for the "
                    "core group.", list_type="atomic"),
    apiVersions=array(string(), "The API versions of the resources; '*' for all.",
                      list_type="atomic"),
    operations=array(string(enum=["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]),
                     "The operations: CREATE, UPDATE, DELETE, CONNECT, or '*' for all.",
                     list_type="atomic"),
    resources=array(string(), "The resources, optionally with a subresource such as "
                    "'pods/status'; '*' and '*/*' match widely.", list_type="atomic"),
    scope=string("Which objects match by scope: Cluster, Namespaced, or '*' (the default).",
                 enum=["*", "Cluster", "Namespaced"]),
))
define(f"{V1}.MatchCondition", obj(
    "A named CEL expression that a request must satisfy for a webhook to be called.",
    required=("name", "expression"),
    expression=string("The CEL expression; it sees object, oldObject, request and "
                      "authorizer and must return a bool."),
    name=string("Name of the condition, unique in the webhook; a qualified name."),
))


def _webhook_fields() -> dict[str, Schema]:
    """The fields ValidatingWebhook and MutatingWebhook share (fresh dicts for each)."""
    return {
        "admissionReviewVersions": array(string(), "The AdmissionReview versions the webhook "
                                         "accepts, most preferred first; the API server uses "
                                         "the first one it supports.", list_type="atomic"),
        "clientConfig": adm("WebhookClientConfig", "How to reach the webhook."),
        "failurePolicy": string("What to do when calling the webhook fails: Fail (the "
                                "default) rejects the request, Ignore lets it through.",
                                enum=["Fail", "Ignore"]),
        "matchConditions": array(adm("MatchCondition"), "CEL conditions that must all hold "
                                 "for a request the rules matched to be sent (at most 64).",
                                 list_type="map", map_keys=["name"],
                                 patch_strategy="merge", merge_key="name"),
        "matchPolicy": string("Whether rules match only the exact group and version "
                              "(Exact) or also other versions of the same resource "
                              "(Equivalent, the default).", enum=["Equivalent", "Exact"]),
        "name": string("Fully qualified name of the webhook, such as "
                       "policy.example.com; unique in the configuration."),
        "namespaceSelector": meta_ref("LabelSelector", "Which namespaces' objects are sent, "
                                      "by the namespace's labels; all when left out."),
        "objectSelector": meta_ref("LabelSelector", "Which objects are sent, by their own "
                                   "labels; all when left out."),
        "rules": array(adm("RuleWithOperations"), "The operations and resources the webhook "
                       "is called for; a request matching any rule is sent.",
                       list_type="atomic"),
        "sideEffects": string("Whether calling the webhook changes anything elsewhere: None "
                              "or NoneOnDryRun (Some and Unknown are refused in v1).",
                              enum=["None", "NoneOnDryRun", "Some", "Unknown"]),
        "timeoutSeconds": integer("How many seconds to wait for the webhook before applying "
                                  "the failure policy (1 to 30; 10 by default)."),
    }


define(f"{V1}.ValidatingWebhook", obj(
    "An admission webhook that may reject requests, and what it is called for.",
    required=WEBHOOK_REQUIRED,
    **_webhook_fields(),
))
define(f"{V1}.MutatingWebhook", obj(
    "An admission webhook that may change objects before they are stored, and what it is "
    "called for.",
    required=WEBHOOK_REQUIRED,
    reinvocationPolicy=string("Whether the webhook is called again when later admission "
                              "plugins change the object: Never (the default) or IfNeeded.",
                              enum=["IfNeeded", "Never"]),
    **_webhook_fields(),
))
define_kind(
    f"{V1}.ValidatingWebhookConfiguration", GROUP, "v1", "ValidatingWebhookConfiguration",
    "A set of admission webhooks that accept or reject requests.",
    webhooks=array(adm("ValidatingWebhook"), "The webhooks, each with the requests it is "
                   "called for.", list_type="map", map_keys=["name"],
                   patch_strategy="merge", merge_key="name"),
)
define_kind(
    f"{V1}.MutatingWebhookConfiguration", GROUP, "v1", "MutatingWebhookConfiguration",
    "A set of admission webhooks that may change objects, and accept or reject requests.",
    webhooks=array(adm("MutatingWebhook"), "The webhooks, each with the requests it is "
                   "called for.", list_type="map", map_keys=["name"],
                   patch_strategy="merge", merge_key="name"),
)
