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
    _webhook_fields(),
    required=WEBHOOK_REQUIRED,
))
define(f"{V1}.MutatingWebhook", obj(
    "An admission webhook that may change objects before they are stored, and what it is "
    "called for.",
    {
        "reinvocationPolicy": string("Whether the webhook is called again when later "
                                     "admission plugins change the object: Never (the "
                                     "default) or IfNeeded.", enum=["IfNeeded", "Never"]),
        **_webhook_fields(),
    },
    required=WEBHOOK_REQUIRED,
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


# -- ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding ---------------------------


def _atomic(schema: Schema) -> Schema:
    """A struct that server-side apply replaces as a whole (+structType=atomic)."""
    schema["x-kubernetes-map-type"] = "atomic"
    return schema


define(f"{V1}.NamedRuleWithOperations", _atomic(obj(
    "Which operations on which resources (optionally which objects by name) a rule matches.",
    apiGroups=array(string(), "The API groups of the resources; '*' for all, '' for the "
                    "core group.", list_type="atomic"),
    apiVersions=array(string(), "The API versions of the resources; '*' for all.",
                      list_type="atomic"),
    operations=array(string(enum=["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]),
                     "The operations: CREATE, UPDATE, DELETE, CONNECT, or '*' for all.",
                     list_type="atomic"),
    resourceNames=array(string(), "Names of the objects the rule matches; all when empty.",
                        list_type="atomic"),
    resources=array(string(), "The resources, optionally with a subresource such as "
                    "'pods/status'; '*' and '*/*' match widely.", list_type="atomic"),
    scope=string("Which objects match by scope: Cluster, Namespaced, or '*' (the default).",
                 enum=["*", "Cluster", "Namespaced"]),
)))
define(f"{V1}.MatchResources", _atomic(obj(
    "Which requests a policy or binding applies to: by namespace and object labels and by "
    "resource rules, less the excluded ones.",
    excludeResourceRules=array(adm("NamedRuleWithOperations"), "Rules of requests the "
                               "policy must not apply to; exclusion wins over inclusion.",
                               list_type="atomic"),
    matchPolicy=string("Whether rules match only the exact group and version (Exact) or "
                       "also other versions of the same resource (Equivalent, the default).",
                       enum=["Equivalent", "Exact"]),
    namespaceSelector=meta_ref("LabelSelector", "Which namespaces' objects match, by the "
                               "namespace's labels; all when empty."),
    objectSelector=meta_ref("LabelSelector", "Which objects match, by their own labels; all "
                            "when empty."),
    resourceRules=array(adm("NamedRuleWithOperations"), "Rules of requests the policy "
                        "applies to; a request matching any rule matches.",
                        list_type="atomic"),
)))
define(f"{V1}.ParamKind", _atomic(obj(
    "The kind of the resource that parameterizes a policy.",
    apiVersion=string("The API group and version of the parameter resource, such as "
                      "app.example.com/v1."),
    kind=string("The kind of the parameter resource, such as ConfigMap."),
)))
define(f"{V1}.Validation", obj(
    "A CEL expression that a request must satisfy, and what to say when it does not.",
    required=("expression",),
    expression=string("The CEL expression; it sees object, oldObject, request, params, "
                      "namespaceObject, variables and authorizer, and must return a bool."),
    message=string("The message returned when the expression is false; one line."),
    messageExpression=string("A CEL expression whose string result is returned when the "
                             "validation fails; message is used when it fails."),
    reason=string("The reason returned with a failure: Unauthorized, Forbidden (the "
                  "default), Invalid or RequestEntityTooLarge."),
))
define(f"{V1}.AuditAnnotation", obj(
    "An audit annotation a policy adds to the request's audit event.",
    required=("key", "valueExpression"),
    key=string("The annotation key; combined with the policy name into "
               "<policy name>/<key>, which must be a qualified name."),
    valueExpression=string("A CEL expression whose string result is the annotation value; "
                           "no annotation when it is null."),
))
define(f"{V1}.Variable", _atomic(obj(
    "A named CEL expression whose result other expressions of the policy use as "
    "variables.<name>.",
    required=("name", "expression"),
    expression=string("The CEL expression computing the variable."),
    name=string("The variable's name: a CEL identifier, unique in the policy."),
)))
define(f"{V1}.ExpressionWarning", obj(
    "A type-checking warning about one expression of a policy.",
    required=("fieldRef", "warning"),
    fieldRef=string("The path to the expression's field, such as spec.validations[0]."
                    "expression."),
    warning=string("What type checking found."),
))
define(f"{V1}.TypeChecking", obj(
    "The results of type checking a policy's expressions.",
    expressionWarnings=array(adm("ExpressionWarning"), "The warnings, one per expression.",
                             list_type="atomic"),
))
define(f"{V1}.ValidatingAdmissionPolicySpec", obj(
    "What a policy checks and which requests it applies to.",
    auditAnnotations=array(adm("AuditAnnotation"), "Annotations added to the audit event of "
                           "a request the policy applies to (at most 20).",
                           list_type="atomic"),
    failurePolicy=string("What to do when the policy cannot be evaluated, or a binding "
                         "refers to a missing parameter: Fail (the default) or Ignore.",
                         enum=["Fail", "Ignore"]),
    matchConditions=array(adm("MatchCondition"), "CEL conditions that must all hold for a "
                          "request the constraints matched to be validated (at most 64).",
                          list_type="map", map_keys=["name"], patch_strategy="merge",
                          merge_key="name"),
    matchConstraints=adm("MatchResources", "The resources the policy validates; a binding "
                         "can only narrow them. resourceRules is required."),
    paramKind=adm("ParamKind", "The kind of resource that parameterizes the policy; no "
                  "parameters when left out."),
    validations=array(adm("Validation"), "The CEL validations; a request must pass all of "
                      "them.", list_type="atomic"),
    variables=array(adm("Variable"), "Variables the other expressions may use, evaluated "
                    "in order.", list_type="map", map_keys=["name"],
                    patch_strategy="merge", merge_key="name"),
))
define(f"{V1}.ValidatingAdmissionPolicyStatus", obj(
    "What the API server found about a policy.",
    conditions=array(meta_ref("Condition"), "The policy's conditions.", list_type="map",
                     map_keys=["type"]),
    observedGeneration=integer("The generation the status describes.", format="int64"),
    typeChecking=adm("TypeChecking", "The results of type checking the expressions."),
))
define_kind(
    f"{V1}.ValidatingAdmissionPolicy", GROUP, "v1", "ValidatingAdmissionPolicy",
    "A policy of CEL validations that requests must pass; it takes effect through its "
    "bindings.",
    spec=adm("ValidatingAdmissionPolicySpec", "What the policy checks."),
    status=adm("ValidatingAdmissionPolicyStatus", "What the API server found about the "
               "policy."),
)
define(f"{V1}.ParamRef", _atomic(obj(
    "Which parameter objects a binding gives its policy: one by name, or those a selector "
    "matches.",
    name=string("The name of the parameter object; exclusive with selector."),
    namespace=string("The namespace of the parameter objects; the request's namespace when "
                     "left out and the parameter kind is namespaced."),
    parameterNotFoundAction=string("What to do when no parameter object is found: Deny or "
                                   "Allow. Required.", enum=["Allow", "Deny"]),
    selector=meta_ref("LabelSelector", "The labels of the parameter objects; exclusive "
                      "with name. An empty selector matches every object."),
)))
define(f"{V1}.ValidatingAdmissionPolicyBindingSpec", obj(
    "Which policy a binding applies, with which parameters, to which requests, and how.",
    matchResources=adm("MatchResources", "Narrows the requests the policy applies to; the "
                       "policy's own constraints when left out."),
    paramRef=adm("ParamRef", "The parameter objects of the policy."),
    policyName=string("The name of the ValidatingAdmissionPolicy the binding applies. "
                      "Required."),
    validationActions=array(string(enum=["Audit", "Deny", "Warn"]), "What a failed "
                            "validation does: Deny, Warn and/or Audit; Deny and Warn "
                            "exclude each other. Required.", list_type="set"),
))
define_kind(
    f"{V1}.ValidatingAdmissionPolicyBinding", GROUP, "v1",
    "ValidatingAdmissionPolicyBinding",
    "Binds a ValidatingAdmissionPolicy to parameters and narrows the requests it applies to.",
    spec=adm("ValidatingAdmissionPolicyBindingSpec", "The policy, parameters and actions."),
)
