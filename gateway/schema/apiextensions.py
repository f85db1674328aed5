"""Schemas of apiextensions.k8s.io/v1: CustomResourceDefinition, as apiextensions-apiserver
v1.32 publishes it.

Field names, JSON types, ``required`` lists and list metadata follow kube's OpenAPI; the
descriptions are the gateway's own. The four "any JSON" helper types (JSON,
JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, JSONSchemaPropsOrStringArray) are published by
kube with a description and no type at all, because their Go types marshal to more than one
JSON type (``additionalProperties: true`` or a schema; ``default: 3`` or an object). A schema
without a type is one the field checker walks past, so such values are kept whatever they hold.
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
    map_of,
    meta_ref,
    obj,
    ref,
    string,
)

V1 = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1"
GROUP = "apiextensions.k8s.io"


def ext(name: str, description: str = "") -> Schema:
    """A reference to apiextensions/v1 definition ``name``."""
    return ref(f"{V1}.{name}", description)


def _struct(description: str, fields: dict[str, Schema], *,
            required: tuple[str, ...] = ()) -> Schema:
    """obj() for types with a field named description (obj's own first parameter)."""
    schema = obj(description, required=required)
    schema["properties"] = fields
    return schema


def _strings(description: str) -> Schema:
    return array(string(), description, list_type="atomic")


# -- JSON Schema --------------------------------------------------------------------------------

for _name, _doc in (
    ("JSON", "Any JSON value: an object, array, string, number, boolean or null."),
    ("JSONSchemaPropsOrArray", "Either one schema or a list of schemas (only the first form is "
                               "accepted in a custom resource definition)."),
    ("JSONSchemaPropsOrBool", "Either a schema or a boolean; true allows anything, false "
                              "nothing."),
    ("JSONSchemaPropsOrStringArray", "Either a schema or a list of property names."),
):
    define(f"{V1}.{_name}", {"description": _doc})

define(f"{V1}.ExternalDocumentation", _struct(
    "Where more documentation about a schema can be read.",
    {"description": string(), "url": string()},
))
define(f"{V1}.ValidationRule", obj(
    "A CEL expression a value must satisfy, with what to report when it does not.",
    required=("rule",),
    fieldPath=string("Where a failure is reported: a JSON path relative to the schema the rule "
                     "sits on, with no list indexes; the rule's own place when empty."),
    message=string("The failure message; a single line. 'failed rule: <rule>' when empty."),
    messageExpression=string("A CEL expression yielding the failure message; used instead of "
                             "message when it evaluates to a non-blank single line."),
    optionalOldSelf=boolean("Also run a transition rule on create and when there is no old "
                            "value; oldSelf is then a CEL optional."),
    reason=string("The reason of the cause reported on failure: FieldValueInvalid (the "
                  "default), FieldValueForbidden, FieldValueRequired or FieldValueDuplicate.",
                  enum=["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                        "FieldValueRequired"]),
    rule=string("The CEL expression; self is the value at the rule's place in the schema and, "
                "for transition rules, oldSelf its previous value."),
))

_PROPS = ext("JSONSchemaProps")
define(f"{V1}.JSONSchemaProps", _struct(
    "An OpenAPI v3 (JSON Schema draft 4) schema, with Kubernetes' own extensions.",
    {
        "$ref": string(),
        "$schema": string(),
        "additionalItems": ext("JSONSchemaPropsOrBool"),
        "additionalProperties": ext("JSONSchemaPropsOrBool"),
        "allOf": array(_PROPS, list_type="atomic"),
        "anyOf": array(_PROPS, list_type="atomic"),
        "default": ext("JSON", "The value an absent field is given; the schema must be "
                       "structural and the value must validate against it."),
        "definitions": map_of(_PROPS),
        "dependencies": map_of(ext("JSONSchemaPropsOrStringArray")),
        "description": string(),
        "enum": array(ext("JSON"), list_type="atomic"),
        "example": ext("JSON"),
        "exclusiveMaximum": boolean(),
        "exclusiveMinimum": boolean(),
        "externalDocs": ext("ExternalDocumentation"),
        "format": string("An OpenAPI format; the known ones (such as int32, date-time, uuid, "
                         "hostname, ipv4, cidr, byte, duration) are checked, others ignored."),
        "id": string(),
        "items": ext("JSONSchemaPropsOrArray"),
        "maxItems": integer(format="int64"),
        "maxLength": integer(format="int64"),
        "maxProperties": integer(format="int64"),
        "maximum": {"type": "number", "format": "double"},
        "minItems": integer(format="int64"),
        "minLength": integer(format="int64"),
        "minProperties": integer(format="int64"),
        "minimum": {"type": "number", "format": "double"},
        "multipleOf": {"type": "number", "format": "double"},
        "not": _PROPS,
        "nullable": boolean(),
        "oneOf": array(_PROPS, list_type="atomic"),
        "pattern": string(),
        "patternProperties": map_of(_PROPS),
        "properties": map_of(_PROPS),
        "required": _strings(""),
        "title": string(),
        "type": string(),
        "uniqueItems": boolean(),
        "x-kubernetes-embedded-resource": boolean(
            "The value is a whole Kubernetes object (apiVersion, kind, metadata are kept and "
            "checked); the type must be object."),
        "x-kubernetes-int-or-string": boolean(
            "The value is an integer or a string; type may then be left out, or given as "
            "anyOf integer/string."),
        "x-kubernetes-list-map-keys": _strings(
            "The item fields that identify an item of a list of type map; scalar fields that "
            "are required or defaulted."),
        "x-kubernetes-list-type": string(
            "How a list merges: atomic (replaced whole, the default), set (unique scalar or "
            "atomic items) or map (items keyed by x-kubernetes-list-map-keys)."),
        "x-kubernetes-map-type": string(
            "How an object merges: granular (field by field, the default) or atomic."),
        "x-kubernetes-preserve-unknown-fields": boolean(
            "Keep fields the schema does not list, here and below (until a nested schema lists "
            "properties again). Only true or absent."),
        "x-kubernetes-validations": array(
            ext("ValidationRule"), "CEL rules the value must satisfy.", list_type="map",
            map_keys=["rule"], patch_strategy="merge", merge_key="rule"),
    },
))

# -- conversion ---------------------------------------------------------------------------------

define(f"{V1}.ServiceReference", obj(
    "The Service in front of a conversion webhook.",
    required=("namespace", "name"),
    name=string("Name of the Service."),
    namespace=string("Namespace of the Service."),
    path=string("The URL path the webhook is called at."),
    port=integer("The port of the Service; 443 when not given. Must be 1-65535."),
))
define(f"{V1}.WebhookClientConfig", obj(
    "How to reach a webhook over TLS, and how to trust it.",
    caBundle=string("PEM-encoded CA certificates the webhook's serving certificate must chain "
                    "to; the system roots when empty.", format="byte"),
    service=ext("ServiceReference", "The in-cluster Service of the webhook; exactly one of "
                "service and url is given."),
    url=string("The webhook's https URL (https://host[:port][/path]), without user, query or "
               "fragment; for webhooks outside the cluster."),
))
define(f"{V1}.WebhookConversion", obj(
    "A conversion webhook and what it understands.",
    required=("conversionReviewVersions",),
    clientConfig=ext("WebhookClientConfig", "How to call the webhook."),
    conversionReviewVersions=_strings(
        "ConversionReview versions the webhook understands, most preferred first; the first "
        "the apiserver also knows is sent."),
))
define(f"{V1}.CustomResourceConversion", obj(
    "How custom resources are converted between versions.",
    required=("strategy",),
    strategy=string("None (only apiVersion changes) or Webhook (an external webhook converts; "
                    "needs spec.conversion.webhook and pruning)."),
    webhook=ext("WebhookConversion", "The webhook, when strategy is Webhook."),
))

# -- versions -----------------------------------------------------------------------------------

define(f"{V1}.CustomResourceColumnDefinition", _struct(
    "An extra column of the Table form of custom resources.",
    {
        "description": string("What the column shows, for people."),
        "format": string("An OpenAPI format refining type (the 'name' format marks the name "
                         "column)."),
        "jsonPath": string("A simple JSON path, evaluated in each custom resource, giving the "
                           "cell."),
        "name": string("The column's header."),
        "priority": integer("How important the column is: 0 is shown by default, higher "
                            "numbers only in wide output."),
        "type": string("integer, number, string, boolean or date."),
    },
    required=("name", "type", "jsonPath"),
))
define(f"{V1}.SelectableField", obj(
    "A field of custom resources that field selectors may name.",
    required=("jsonPath",),
    jsonPath=string("A simple JSON path (no list indexes) to a string, integer or boolean "
                    "field outside metadata."),
))
define(f"{V1}.CustomResourceSubresourceScale", obj(
    "Where the scale subresource finds replicas and the selector in a custom resource.",
    required=("specReplicasPath", "statusReplicasPath"),
    labelSelectorPath=string("JSON path, under .spec or .status, of the serialized label "
                             "selector that Scale status.selector shows."),
    specReplicasPath=string("JSON path, under .spec, of the desired replicas."),
    statusReplicasPath=string("JSON path, under .status, of the observed replicas."),
))
define(f"{V1}.CustomResourceSubresourceStatus", {
    "description": "Turns on the status subresource: the main endpoint then ignores status "
                   "changes and /status ignores everything else.",
    "type": "object",
})
define(f"{V1}.CustomResourceSubresources", obj(
    "The subresources custom resources of a version have.",
    scale=ext("CustomResourceSubresourceScale", "Serve /scale as an autoscaling/v1 Scale."),
    status=ext("CustomResourceSubresourceStatus", "Serve /status."),
))
define(f"{V1}.CustomResourceValidation", obj(
    "The schema of a version of custom resources.",
    openAPIV3Schema=ext("JSONSchemaProps", "The structural OpenAPI v3 schema used to "
                        "validate, prune and default custom resources."),
))
define(f"{V1}.CustomResourceDefinitionVersion", obj(
    "One version of a custom resource API.",
    required=("name", "served", "storage"),
    additionalPrinterColumns=array(
        ext("CustomResourceColumnDefinition"), "Extra Table columns; only Age when empty.",
        list_type="atomic"),
    deprecated=boolean("Warn clients that use this version."),
    deprecationWarning=string("The warning sent instead of the default one; only for "
                              "deprecated versions."),
    name=string("The version name, such as v1 or v2beta1, served at "
                "/apis/<group>/<version>/."),
    schema=ext("CustomResourceValidation", "The schema of this version."),
    selectableFields=array(ext("SelectableField"), "Fields that field selectors may use, "
                           "besides metadata.name and metadata.namespace.", list_type="atomic"),
    served=boolean("Serve this version over REST."),
    storage=boolean("Objects are stored in this version; exactly one version has it."),
    subresources=ext("CustomResourceSubresources", "The subresources of this version."),
))

# -- the definition -----------------------------------------------------------------------------

define(f"{V1}.CustomResourceDefinitionNames", obj(
    "The names a custom resource is served and known by.",
    required=("plural", "kind"),
    categories=_strings("Groups of resources this one belongs to (such as all), for "
                        "kubectl get <category>."),
    kind=string("The kind of the objects, normally CamelCase and singular."),
    listKind=string("The kind of lists of the objects; kind + 'List' when empty."),
    plural=string("The resource name in URLs, lowercase; the definition's name is "
                  "<plural>.<group>."),
    shortNames=_strings("Lowercase abbreviations clients may use for the resource."),
    singular=string("The lowercase singular name; the lowercase kind when empty."),
))
define(f"{V1}.CustomResourceDefinitionSpec", obj(
    "What custom resources are and how they are served.",
    required=("group", "names", "scope", "versions"),
    conversion=ext("CustomResourceConversion", "How objects change between versions."),
    group=string("The API group, a DNS subdomain with at least one dot, served at "
                 "/apis/<group>/."),
    names=ext("CustomResourceDefinitionNames", "The resource and kind names."),
    preserveUnknownFields=boolean("Deprecated: keep fields the schema does not list. Use "
                                  "x-kubernetes-preserve-unknown-fields in the schemas "
                                  "instead."),
    scope=string("Cluster or Namespaced."),
    versions=array(ext("CustomResourceDefinitionVersion"), "Every version of the API; their "
                   "order in discovery follows Kubernetes version ordering.",
                   list_type="atomic"),
))
define(f"{V1}.CustomResourceDefinitionCondition", obj(
    "One observed aspect of a CustomResourceDefinition's state.",
    required=("type", "status"),
    lastTransitionTime=meta_ref("Time", "When the condition last changed its status."),
    message=string("Human-readable details of the last transition."),
    reason=string("A one-word, CamelCase reason for the last transition."),
    status=string("True, False or Unknown."),
    type=string("Established, NamesAccepted, NonStructuralSchema, Terminating or "
                "KubernetesAPIApprovalPolicyConformant."),
))
define(f"{V1}.CustomResourceDefinitionStatus", obj(
    "The observed state of a CustomResourceDefinition.",
    acceptedNames=ext("CustomResourceDefinitionNames", "The names actually served; they may "
                      "differ from the spec's while they conflict with others."),
    conditions=array(ext("CustomResourceDefinitionCondition"), "The latest observations.",
                     list_type="map", map_keys=["type"]),
    storedVersions=_strings("Every version objects were ever stored in; a version leaves "
                            "spec.versions only after it leaves this list."),
))
define_kind(
    f"{V1}.CustomResourceDefinition", GROUP, "v1", "CustomResourceDefinition",
    "A resource served by the API server itself, with its schema; named "
    "<spec.names.plural>.<spec.group>.",
    required=("spec",),
    spec=ext("CustomResourceDefinitionSpec", "The resource's names, versions and schemas."),
    status=ext("CustomResourceDefinitionStatus", "The state of the definition, set by the "
               "system."),
)
