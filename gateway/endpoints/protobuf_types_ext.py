"""Field tables of the protobuf messages of the groups kube-apiserver's embedded extension
servers serve (v1.32): apiregistration.k8s.io (kube-aggregator's APIService) and
apiextensions.k8s.io (apiextensions-apiserver's CustomResourceDefinition), in the form of
protobuf_types (message, field number, JSON name, type, flag; OPTIONAL where Go has a pointer).

JSONSchemaProps has fields Go marshals to JSON by hand. ``JSON`` (default, example, enum) is
raw JSON text in its ``raw`` bytes: JSON_MESSAGE, written and read as the value's JSON.
The three ``JSONSchemaPropsOr*`` messages are one of two JSON shapes, told apart by the JSON
type (SHAPED_MESSAGES)."""

from __future__ import annotations

from gateway.endpoints.protobuf_flags import (
    APIEXTENSIONS,
    APIREGISTRATION,
    MAP,
    META,
    OPTIONAL,
    REPEATED,
)

APIEXT = APIEXTENSIONS + "v1."
APIREG = APIREGISTRATION + "v1."
#: apiextensions' ``JSON{Raw []byte}``: any JSON value (null when raw is empty).
JSON_MESSAGE = APIEXT + "JSON"
#: Messages whose JSON is a bool, a list or an object, each held by one field: JSON type ->
#: field. Go's MarshalJSON writes the list when it has items, else the object when set, else
#: the bool (OrBool; an object there comes with ``allows`` true, as its UnmarshalJSON sets
#: it), else null.
SHAPED_MESSAGES: dict[str, dict[str, str]] = {
    APIEXT + "JSONSchemaPropsOrArray": {"list": "jSONSchemas", "object": "schema"},
    APIEXT + "JSONSchemaPropsOrBool": {"object": "schema", "bool": "allows"},
    APIEXT + "JSONSchemaPropsOrStringArray": {"list": "property", "object": "schema"},
}

EXT_MESSAGES: dict[str, dict[int, tuple[str, ...]]] = {
    APIREG + "APIService": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", APIREG + "APIServiceSpec"),
        3: ("status", APIREG + "APIServiceStatus"),
    },
    APIREG + "APIServiceCondition": {
        1: ("type", "string"),
        2: ("status", "string"),
        3: ("lastTransitionTime", META + "Time"),
        4: ("reason", "string"),
        5: ("message", "string"),
    },
    APIREG + "APIServiceSpec": {
        1: ("service", APIREG + "ServiceReference", OPTIONAL),
        2: ("group", "string"),
        3: ("version", "string"),
        4: ("insecureSkipTLSVerify", "bool"),
        5: ("caBundle", "bytes"),
        7: ("groupPriorityMinimum", "int32"),
        8: ("versionPriority", "int32"),
    },
    APIREG + "APIServiceStatus": {
        1: ("conditions", APIREG + "APIServiceCondition", REPEATED),
    },
    APIREG + "ServiceReference": {
        1: ("namespace", "string"),
        2: ("name", "string"),
        3: ("port", "int32", OPTIONAL),
    },
    APIEXT + "CustomResourceColumnDefinition": {
        1: ("name", "string"),
        2: ("type", "string"),
        3: ("format", "string"),
        4: ("description", "string"),
        5: ("priority", "int32"),
        6: ("jsonPath", "string"),
    },
    APIEXT + "CustomResourceConversion": {
        1: ("strategy", "string"),
        2: ("webhook", APIEXT + "WebhookConversion", OPTIONAL),
    },
    APIEXT + "CustomResourceDefinition": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", APIEXT + "CustomResourceDefinitionSpec"),
        3: ("status", APIEXT + "CustomResourceDefinitionStatus"),
    },
    APIEXT + "CustomResourceDefinitionCondition": {
        1: ("type", "string"),
        2: ("status", "string"),
        3: ("lastTransitionTime", META + "Time"),
        4: ("reason", "string"),
        5: ("message", "string"),
    },
    APIEXT + "CustomResourceDefinitionNames": {
        1: ("plural", "string"),
        2: ("singular", "string"),
        3: ("shortNames", "string", REPEATED),
        4: ("kind", "string"),
        5: ("listKind", "string"),
        6: ("categories", "string", REPEATED),
    },
    APIEXT + "CustomResourceDefinitionSpec": {
        1: ("group", "string"),
        3: ("names", APIEXT + "CustomResourceDefinitionNames"),
        4: ("scope", "string"),
        7: ("versions", APIEXT + "CustomResourceDefinitionVersion", REPEATED),
        9: ("conversion", APIEXT + "CustomResourceConversion", OPTIONAL),
        10: ("preserveUnknownFields", "bool"),
    },
    APIEXT + "CustomResourceDefinitionStatus": {
        1: ("conditions", APIEXT + "CustomResourceDefinitionCondition", REPEATED),
        2: ("acceptedNames", APIEXT + "CustomResourceDefinitionNames"),
        3: ("storedVersions", "string", REPEATED),
    },
    APIEXT + "CustomResourceDefinitionVersion": {
        1: ("name", "string"),
        2: ("served", "bool"),
        3: ("storage", "bool"),
        4: ("schema", APIEXT + "CustomResourceValidation", OPTIONAL),
        5: ("subresources", APIEXT + "CustomResourceSubresources", OPTIONAL),
        6: ("additionalPrinterColumns", APIEXT + "CustomResourceColumnDefinition", REPEATED),
        7: ("deprecated", "bool"),
        8: ("deprecationWarning", "string", OPTIONAL),
        9: ("selectableFields", APIEXT + "SelectableField", REPEATED),
    },
    APIEXT + "CustomResourceSubresourceScale": {
        1: ("specReplicasPath", "string"),
        2: ("statusReplicasPath", "string"),
        3: ("labelSelectorPath", "string", OPTIONAL),
    },
    APIEXT + "CustomResourceSubresourceStatus": {},
    APIEXT + "CustomResourceSubresources": {
        1: ("status", APIEXT + "CustomResourceSubresourceStatus", OPTIONAL),
        2: ("scale", APIEXT + "CustomResourceSubresourceScale", OPTIONAL),
    },
    APIEXT + "CustomResourceValidation": {
        1: ("openAPIV3Schema", APIEXT + "JSONSchemaProps", OPTIONAL),
    },
    APIEXT + "ExternalDocumentation": {
        1: ("description", "string"),
        2: ("url", "string"),
    },
    APIEXT + "JSONSchemaProps": {
        1: ("id", "string"),
        2: ("$schema", "string"),
        3: ("$ref", "string", OPTIONAL),
        4: ("description", "string"),
        5: ("type", "string"),
        6: ("format", "string"),
        7: ("title", "string"),
        8: ("default", APIEXT + "JSON", OPTIONAL),
        9: ("maximum", "double", OPTIONAL),
        10: ("exclusiveMaximum", "bool"),
        11: ("minimum", "double", OPTIONAL),
        12: ("exclusiveMinimum", "bool"),
        13: ("maxLength", "int64", OPTIONAL),
        14: ("minLength", "int64", OPTIONAL),
        15: ("pattern", "string"),
        16: ("maxItems", "int64", OPTIONAL),
        17: ("minItems", "int64", OPTIONAL),
        18: ("uniqueItems", "bool"),
        19: ("multipleOf", "double", OPTIONAL),
        20: ("enum", APIEXT + "JSON", REPEATED),
        21: ("maxProperties", "int64", OPTIONAL),
        22: ("minProperties", "int64", OPTIONAL),
        23: ("required", "string", REPEATED),
        24: ("items", APIEXT + "JSONSchemaPropsOrArray", OPTIONAL),
        25: ("allOf", APIEXT + "JSONSchemaProps", REPEATED),
        26: ("oneOf", APIEXT + "JSONSchemaProps", REPEATED),
        27: ("anyOf", APIEXT + "JSONSchemaProps", REPEATED),
        28: ("not", APIEXT + "JSONSchemaProps", OPTIONAL),
        29: ("properties", MAP + APIEXT + "JSONSchemaProps"),
        30: ("additionalProperties", APIEXT + "JSONSchemaPropsOrBool", OPTIONAL),
        31: ("patternProperties", MAP + APIEXT + "JSONSchemaProps"),
        32: ("dependencies", MAP + APIEXT + "JSONSchemaPropsOrStringArray"),
        33: ("additionalItems", APIEXT + "JSONSchemaPropsOrBool", OPTIONAL),
        34: ("definitions", MAP + APIEXT + "JSONSchemaProps"),
        35: ("externalDocs", APIEXT + "ExternalDocumentation", OPTIONAL),
        36: ("example", APIEXT + "JSON", OPTIONAL),
        37: ("nullable", "bool"),
        38: ("x-kubernetes-preserve-unknown-fields", "bool", OPTIONAL),
        39: ("x-kubernetes-embedded-resource", "bool"),
        40: ("x-kubernetes-int-or-string", "bool"),
        41: ("x-kubernetes-list-map-keys", "string", REPEATED),
        42: ("x-kubernetes-list-type", "string", OPTIONAL),
        43: ("x-kubernetes-map-type", "string", OPTIONAL),
        44: ("x-kubernetes-validations", APIEXT + "ValidationRule", REPEATED),
    },
    APIEXT + "JSONSchemaPropsOrArray": {
        1: ("schema", APIEXT + "JSONSchemaProps", OPTIONAL),
        2: ("jSONSchemas", APIEXT + "JSONSchemaProps", REPEATED),
    },
    APIEXT + "JSONSchemaPropsOrBool": {
        1: ("allows", "bool"),
        2: ("schema", APIEXT + "JSONSchemaProps", OPTIONAL),
    },
    APIEXT + "JSONSchemaPropsOrStringArray": {
        1: ("schema", APIEXT + "JSONSchemaProps", OPTIONAL),
        2: ("property", "string", REPEATED),
    },
    APIEXT + "SelectableField": {
        1: ("jsonPath", "string"),
    },
    APIEXT + "ServiceReference": {
        1: ("namespace", "string"),
        2: ("name", "string"),
        3: ("path", "string", OPTIONAL),
        4: ("port", "int32", OPTIONAL),
    },
    APIEXT + "ValidationRule": {
        1: ("rule", "string"),
        2: ("message", "string"),
        3: ("messageExpression", "string"),
        4: ("reason", "string", OPTIONAL),
        5: ("fieldPath", "string"),
        6: ("optionalOldSelf", "bool", OPTIONAL),
    },
    APIEXT + "WebhookClientConfig": {
        1: ("service", APIEXT + "ServiceReference", OPTIONAL),
        2: ("caBundle", "bytes"),
        3: ("url", "string", OPTIONAL),
    },
    APIEXT + "WebhookConversion": {
        2: ("clientConfig", APIEXT + "WebhookClientConfig", OPTIONAL),
        3: ("conversionReviewVersions", "string", REPEATED),
    },
}

#: The kinds whose <Kind>List kube has.
EXT_LISTED_KINDS = (APIREG + "APIService", APIEXT + "CustomResourceDefinition")
