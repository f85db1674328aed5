"""Field numbers of the Kubernetes protobuf messages the gateway reads and writes (facts of the
v1.32 API: message, field number, JSON name, type, and a flag). Scalars are named by their
protobuf type; a message type by its full name; ``map:<value>`` is a map with string keys.
Every field of kube's generated.proto says ``optional`` (proto2), so OPTIONAL follows the Go
type in k8s.io/api and apimachinery types.go instead: it marks the fields that are pointers
(scalars and messages). Go's generated Marshal writes every other singular field even when it
is empty, a pointer only when it is set; the encoder does the same. The messages of
apiregistration.k8s.io and apiextensions.k8s.io are protobuf_types_ext's, merged in here."""

from __future__ import annotations

from gateway.endpoints.protobuf_flags import (
    AM,
    API,
    CORE,
    INLINE,
    MAP,
    META,
    META_V1BETA1,
    OPTIONAL,
    REPEATED,
)
from gateway.endpoints.protobuf_types_ext import (
    EXT_LISTED_KINDS,
    EXT_MESSAGES,
    JSON_MESSAGE,
    SHAPED_MESSAGES,
)

__all__ = ["AM", "API", "CORE", "INLINE", "JSON_MESSAGE", "LISTED_KINDS", "LIST_MESSAGES", "MAP",
           "MESSAGES", "META", "META_V1BETA1", "OPTIONAL", "REPEATED", "SHAPED_MESSAGES"]

#: Messages whose JSON is a bare list (Go's ``type ExtraValue []string``): their one field,
#: ``items``, is the list.
LIST_MESSAGES = frozenset({API + "authentication.v1.ExtraValue",
                           API + "authorization.v1.ExtraValue"})

MESSAGES: dict[str, dict[int, tuple[str, ...]]] = {
    API + "admissionregistration.v1.MatchCondition": {
        1: ("name", "string"),
        2: ("expression", "string"),
    },
    API + "admissionregistration.v1.MutatingWebhook": {
        1: ("name", "string"),
        2: ("clientConfig", API + "admissionregistration.v1.WebhookClientConfig"),
        3: ("rules", API + "admissionregistration.v1.RuleWithOperations", REPEATED),
        4: ("failurePolicy", "string", OPTIONAL),
        5: ("namespaceSelector", META + "LabelSelector", OPTIONAL),
        6: ("sideEffects", "string", OPTIONAL),
        7: ("timeoutSeconds", "int32", OPTIONAL),
        8: ("admissionReviewVersions", "string", REPEATED),
        9: ("matchPolicy", "string", OPTIONAL),
        10: ("reinvocationPolicy", "string", OPTIONAL),
        11: ("objectSelector", META + "LabelSelector", OPTIONAL),
        12: ("matchConditions", API + "admissionregistration.v1.MatchCondition", REPEATED),
    },
    API + "admissionregistration.v1.MutatingWebhookConfiguration": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("webhooks", API + "admissionregistration.v1.MutatingWebhook", REPEATED),
    },
    API + "admissionregistration.v1.Rule": {
        1: ("apiGroups", "string", REPEATED),
        2: ("apiVersions", "string", REPEATED),
        3: ("resources", "string", REPEATED),
        4: ("scope", "string", OPTIONAL),
    },
    API + "admissionregistration.v1.RuleWithOperations": {
        1: ("operations", "string", REPEATED),
        2: ("rule", API + "admissionregistration.v1.Rule", INLINE),
    },
    API + "admissionregistration.v1.ServiceReference": {
        1: ("namespace", "string"),
        2: ("name", "string"),
        3: ("path", "string", OPTIONAL),
        4: ("port", "int32", OPTIONAL),
    },
    API + "admissionregistration.v1.ValidatingWebhook": {
        1: ("name", "string"),
        2: ("clientConfig", API + "admissionregistration.v1.WebhookClientConfig"),
        3: ("rules", API + "admissionregistration.v1.RuleWithOperations", REPEATED),
        4: ("failurePolicy", "string", OPTIONAL),
        5: ("namespaceSelector", META + "LabelSelector", OPTIONAL),
        6: ("sideEffects", "string", OPTIONAL),
        7: ("timeoutSeconds", "int32", OPTIONAL),
        8: ("admissionReviewVersions", "string", REPEATED),
        9: ("matchPolicy", "string", OPTIONAL),
        10: ("objectSelector", META + "LabelSelector", OPTIONAL),
        11: ("matchConditions", API + "admissionregistration.v1.MatchCondition", REPEATED),
    },
    API + "admissionregistration.v1.ValidatingWebhookConfiguration": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("webhooks", API + "admissionregistration.v1.ValidatingWebhook", REPEATED),
    },
    API + "admissionregistration.v1.WebhookClientConfig": {
        1: ("service", API + "admissionregistration.v1.ServiceReference", OPTIONAL),
        2: ("caBundle", "bytes"),
        3: ("url", "string", OPTIONAL),
    },
    API + "admissionregistration.v1.AuditAnnotation": {
        1: ("key", "string"),
        2: ("valueExpression", "string"),
    },
    API + "admissionregistration.v1.ExpressionWarning": {
        2: ("fieldRef", "string"),
        3: ("warning", "string"),
    },
    API + "admissionregistration.v1.MatchResources": {
        1: ("namespaceSelector", META + "LabelSelector", OPTIONAL),
        2: ("objectSelector", META + "LabelSelector", OPTIONAL),
        3: ("resourceRules", API + "admissionregistration.v1.NamedRuleWithOperations", REPEATED),
        4: ("excludeResourceRules", API + "admissionregistration.v1.NamedRuleWithOperations",
            REPEATED),
        7: ("matchPolicy", "string", OPTIONAL),
    },
    API + "admissionregistration.v1.NamedRuleWithOperations": {
        1: ("resourceNames", "string", REPEATED),
        2: ("ruleWithOperations", API + "admissionregistration.v1.RuleWithOperations", INLINE),
    },
    API + "admissionregistration.v1.ParamKind": {
        1: ("apiVersion", "string"),
        2: ("kind", "string"),
    },
    API + "admissionregistration.v1.ParamRef": {
        1: ("name", "string"),
        2: ("namespace", "string"),
        3: ("selector", META + "LabelSelector", OPTIONAL),
        4: ("parameterNotFoundAction", "string", OPTIONAL),
    },
    API + "admissionregistration.v1.TypeChecking": {
        1: ("expressionWarnings", API + "admissionregistration.v1.ExpressionWarning", REPEATED),
    },
    API + "admissionregistration.v1.ValidatingAdmissionPolicy": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "admissionregistration.v1.ValidatingAdmissionPolicySpec"),
        3: ("status", API + "admissionregistration.v1.ValidatingAdmissionPolicyStatus"),
    },
    API + "admissionregistration.v1.ValidatingAdmissionPolicyBinding": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec"),
    },
    API + "admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": {
        1: ("policyName", "string"),
        2: ("paramRef", API + "admissionregistration.v1.ParamRef", OPTIONAL),
        3: ("matchResources", API + "admissionregistration.v1.MatchResources", OPTIONAL),
        4: ("validationActions", "string", REPEATED),
    },
    API + "admissionregistration.v1.ValidatingAdmissionPolicySpec": {
        1: ("paramKind", API + "admissionregistration.v1.ParamKind", OPTIONAL),
        2: ("matchConstraints", API + "admissionregistration.v1.MatchResources", OPTIONAL),
        3: ("validations", API + "admissionregistration.v1.Validation", REPEATED),
        4: ("failurePolicy", "string", OPTIONAL),
        5: ("auditAnnotations", API + "admissionregistration.v1.AuditAnnotation", REPEATED),
        6: ("matchConditions", API + "admissionregistration.v1.MatchCondition", REPEATED),
        7: ("variables", API + "admissionregistration.v1.Variable", REPEATED),
    },
    API + "admissionregistration.v1.ValidatingAdmissionPolicyStatus": {
        1: ("observedGeneration", "int64"),
        2: ("typeChecking", API + "admissionregistration.v1.TypeChecking", OPTIONAL),
        3: ("conditions", META + "Condition", REPEATED),
    },
    API + "admissionregistration.v1.Validation": {
        1: ("expression", "string"),
        2: ("message", "string"),
        3: ("reason", "string", OPTIONAL),
        4: ("messageExpression", "string"),
    },
    API + "admissionregistration.v1.Variable": {
        1: ("name", "string"),
        2: ("expression", "string"),
    },
    API + "authentication.v1.BoundObjectReference": {
        1: ("kind", "string"),
        2: ("apiVersion", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
    },
    API + "authentication.v1.ExtraValue": {
        1: ("items", "string", REPEATED),
    },
    API + "authentication.v1.SelfSubjectReview": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("status", API + "authentication.v1.SelfSubjectReviewStatus"),
    },
    API + "authentication.v1.SelfSubjectReviewStatus": {
        1: ("userInfo", API + "authentication.v1.UserInfo"),
    },
    API + "authentication.v1.TokenRequest": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "authentication.v1.TokenRequestSpec"),
        3: ("status", API + "authentication.v1.TokenRequestStatus"),
    },
    API + "authentication.v1.TokenRequestSpec": {
        1: ("audiences", "string", REPEATED),
        3: ("boundObjectRef", API + "authentication.v1.BoundObjectReference", OPTIONAL),
        4: ("expirationSeconds", "int64", OPTIONAL),
    },
    API + "authentication.v1.TokenRequestStatus": {
        1: ("token", "string"),
        2: ("expirationTimestamp", META + "Time"),
    },
    API + "authentication.v1.TokenReview": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "authentication.v1.TokenReviewSpec"),
        3: ("status", API + "authentication.v1.TokenReviewStatus"),
    },
    API + "authentication.v1.TokenReviewSpec": {
        1: ("token", "string"),
        2: ("audiences", "string", REPEATED),
    },
    API + "authentication.v1.TokenReviewStatus": {
        1: ("authenticated", "bool"),
        2: ("user", API + "authentication.v1.UserInfo"),
        3: ("error", "string"),
        4: ("audiences", "string", REPEATED),
    },
    API + "authentication.v1.UserInfo": {
        1: ("username", "string"),
        2: ("uid", "string"),
        3: ("groups", "string", REPEATED),
        4: ("extra", MAP + API + "authentication.v1.ExtraValue"),
    },
    API + "authorization.v1.ExtraValue": {
        1: ("items", "string", REPEATED),
    },
    API + "authorization.v1.FieldSelectorAttributes": {
        1: ("rawSelector", "string"),
        2: ("requirements", META + "FieldSelectorRequirement", REPEATED),
    },
    API + "authorization.v1.LabelSelectorAttributes": {
        1: ("rawSelector", "string"),
        2: ("requirements", META + "LabelSelectorRequirement", REPEATED),
    },
    API + "authorization.v1.LocalSubjectAccessReview": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "authorization.v1.SubjectAccessReviewSpec"),
        3: ("status", API + "authorization.v1.SubjectAccessReviewStatus"),
    },
    API + "authorization.v1.NonResourceAttributes": {
        1: ("path", "string"),
        2: ("verb", "string"),
    },
    API + "authorization.v1.NonResourceRule": {
        1: ("verbs", "string", REPEATED),
        2: ("nonResourceURLs", "string", REPEATED),
    },
    API + "authorization.v1.ResourceAttributes": {
        1: ("namespace", "string"),
        2: ("verb", "string"),
        3: ("group", "string"),
        4: ("version", "string"),
        5: ("resource", "string"),
        6: ("subresource", "string"),
        7: ("name", "string"),
        8: ("fieldSelector", API + "authorization.v1.FieldSelectorAttributes", OPTIONAL),
        9: ("labelSelector", API + "authorization.v1.LabelSelectorAttributes", OPTIONAL),
    },
    API + "authorization.v1.ResourceRule": {
        1: ("verbs", "string", REPEATED),
        2: ("apiGroups", "string", REPEATED),
        3: ("resources", "string", REPEATED),
        4: ("resourceNames", "string", REPEATED),
    },
    API + "authorization.v1.SelfSubjectAccessReview": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "authorization.v1.SelfSubjectAccessReviewSpec"),
        3: ("status", API + "authorization.v1.SubjectAccessReviewStatus"),
    },
    API + "authorization.v1.SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", API + "authorization.v1.ResourceAttributes", OPTIONAL),
        2: ("nonResourceAttributes", API + "authorization.v1.NonResourceAttributes", OPTIONAL),
    },
    API + "authorization.v1.SelfSubjectRulesReview": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "authorization.v1.SelfSubjectRulesReviewSpec"),
        3: ("status", API + "authorization.v1.SubjectRulesReviewStatus"),
    },
    API + "authorization.v1.SelfSubjectRulesReviewSpec": {
        1: ("namespace", "string"),
    },
    API + "authorization.v1.SubjectAccessReview": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "authorization.v1.SubjectAccessReviewSpec"),
        3: ("status", API + "authorization.v1.SubjectAccessReviewStatus"),
    },
    API + "authorization.v1.SubjectAccessReviewSpec": {
        1: ("resourceAttributes", API + "authorization.v1.ResourceAttributes", OPTIONAL),
        2: ("nonResourceAttributes", API + "authorization.v1.NonResourceAttributes", OPTIONAL),
        3: ("user", "string"),
        4: ("groups", "string", REPEATED),
        5: ("extra", MAP + API + "authorization.v1.ExtraValue"),
        6: ("uid", "string"),
    },
    API + "authorization.v1.SubjectAccessReviewStatus": {
        1: ("allowed", "bool"),
        2: ("reason", "string"),
        3: ("evaluationError", "string"),
        4: ("denied", "bool"),
    },
    API + "authorization.v1.SubjectRulesReviewStatus": {
        1: ("resourceRules", API + "authorization.v1.ResourceRule", REPEATED),
        2: ("nonResourceRules", API + "authorization.v1.NonResourceRule", REPEATED),
        3: ("incomplete", "bool"),
        4: ("evaluationError", "string"),
    },
    API + "autoscaling.v1.Scale": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "autoscaling.v1.ScaleSpec"),
        3: ("status", API + "autoscaling.v1.ScaleStatus"),
    },
    API + "autoscaling.v1.ScaleSpec": {
        1: ("replicas", "int32"),
    },
    API + "autoscaling.v1.ScaleStatus": {
        1: ("replicas", "int32"),
        2: ("selector", "string"),
    },
    API + "coordination.v1.Lease": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "coordination.v1.LeaseSpec"),
    },
    API + "coordination.v1.LeaseSpec": {
        1: ("holderIdentity", "string", OPTIONAL),
        2: ("leaseDurationSeconds", "int32", OPTIONAL),
        3: ("acquireTime", META + "MicroTime", OPTIONAL),
        4: ("renewTime", META + "MicroTime", OPTIONAL),
        5: ("leaseTransitions", "int32", OPTIONAL),
        6: ("strategy", "string", OPTIONAL),
        7: ("preferredHolder", "string", OPTIONAL),
    },
    CORE + "ClientIPConfig": {
        1: ("timeoutSeconds", "int32", OPTIONAL),
    },
    CORE + "ConfigMap": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("data", "map:string"),
        3: ("binaryData", "map:bytes"),
        4: ("immutable", "bool", OPTIONAL),
    },
    CORE + "EndpointAddress": {
        1: ("ip", "string"),
        2: ("targetRef", CORE + "ObjectReference", OPTIONAL),
        3: ("hostname", "string"),
        4: ("nodeName", "string", OPTIONAL),
    },
    CORE + "EndpointPort": {
        1: ("name", "string"),
        2: ("port", "int32"),
        3: ("protocol", "string"),
        4: ("appProtocol", "string", OPTIONAL),
    },
    CORE + "EndpointSubset": {
        1: ("addresses", CORE + "EndpointAddress", REPEATED),
        2: ("notReadyAddresses", CORE + "EndpointAddress", REPEATED),
        3: ("ports", CORE + "EndpointPort", REPEATED),
    },
    CORE + "Endpoints": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("subsets", CORE + "EndpointSubset", REPEATED),
    },
    CORE + "Event": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("involvedObject", CORE + "ObjectReference"),
        3: ("reason", "string"),
        4: ("message", "string"),
        5: ("source", CORE + "EventSource"),
        6: ("firstTimestamp", META + "Time"),
        7: ("lastTimestamp", META + "Time"),
        8: ("count", "int32"),
        9: ("type", "string"),
        10: ("eventTime", META + "MicroTime"),
        11: ("series", CORE + "EventSeries", OPTIONAL),
        12: ("action", "string"),
        13: ("related", CORE + "ObjectReference", OPTIONAL),
        14: ("reportingComponent", "string"),
        15: ("reportingInstance", "string"),
    },
    CORE + "EventSeries": {
        1: ("count", "int32"),
        2: ("lastObservedTime", META + "MicroTime"),
    },
    CORE + "EventSource": {
        1: ("component", "string"),
        2: ("host", "string"),
    },
    CORE + "LoadBalancerIngress": {
        1: ("ip", "string"),
        2: ("hostname", "string"),
        3: ("ipMode", "string", OPTIONAL),
        4: ("ports", CORE + "PortStatus", REPEATED),
    },
    CORE + "LoadBalancerStatus": {
        1: ("ingress", CORE + "LoadBalancerIngress", REPEATED),
    },
    CORE + "LocalObjectReference": {
        1: ("name", "string"),
    },
    CORE + "Namespace": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", CORE + "NamespaceSpec"),
        3: ("status", CORE + "NamespaceStatus"),
    },
    CORE + "NamespaceCondition": {
        1: ("type", "string"),
        2: ("status", "string"),
        4: ("lastTransitionTime", META + "Time"),
        5: ("reason", "string"),
        6: ("message", "string"),
    },
    CORE + "NamespaceSpec": {
        1: ("finalizers", "string", REPEATED),
    },
    CORE + "NamespaceStatus": {
        1: ("phase", "string"),
        2: ("conditions", CORE + "NamespaceCondition", REPEATED),
    },
    CORE + "ObjectReference": {
        1: ("kind", "string"),
        2: ("namespace", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("resourceVersion", "string"),
        7: ("fieldPath", "string"),
    },
    CORE + "PortStatus": {
        1: ("port", "int32"),
        2: ("protocol", "string"),
        3: ("error", "string", OPTIONAL),
    },
    CORE + "Secret": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("data", "map:bytes"),
        3: ("type", "string"),
        4: ("stringData", "map:string"),
        5: ("immutable", "bool", OPTIONAL),
    },
    CORE + "Service": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", CORE + "ServiceSpec"),
        3: ("status", CORE + "ServiceStatus"),
    },
    CORE + "ServiceAccount": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("secrets", CORE + "ObjectReference", REPEATED),
        3: ("imagePullSecrets", CORE + "LocalObjectReference", REPEATED),
        4: ("automountServiceAccountToken", "bool", OPTIONAL),
    },
    CORE + "ServicePort": {
        1: ("name", "string"),
        2: ("protocol", "string"),
        3: ("port", "int32"),
        4: ("targetPort", AM + "util.intstr.IntOrString"),
        5: ("nodePort", "int32"),
        6: ("appProtocol", "string", OPTIONAL),
    },
    CORE + "ServiceSpec": {
        1: ("ports", CORE + "ServicePort", REPEATED),
        2: ("selector", "map:string"),
        3: ("clusterIP", "string"),
        4: ("type", "string"),
        5: ("externalIPs", "string", REPEATED),
        7: ("sessionAffinity", "string"),
        8: ("loadBalancerIP", "string"),
        9: ("loadBalancerSourceRanges", "string", REPEATED),
        10: ("externalName", "string"),
        11: ("externalTrafficPolicy", "string"),
        12: ("healthCheckNodePort", "int32"),
        13: ("publishNotReadyAddresses", "bool"),
        14: ("sessionAffinityConfig", CORE + "SessionAffinityConfig", OPTIONAL),
        17: ("ipFamilyPolicy", "string", OPTIONAL),
        18: ("clusterIPs", "string", REPEATED),
        19: ("ipFamilies", "string", REPEATED),
        20: ("allocateLoadBalancerNodePorts", "bool", OPTIONAL),
        21: ("loadBalancerClass", "string", OPTIONAL),
        22: ("internalTrafficPolicy", "string", OPTIONAL),
        23: ("trafficDistribution", "string", OPTIONAL),
    },
    CORE + "ServiceStatus": {
        1: ("loadBalancer", CORE + "LoadBalancerStatus"),
        2: ("conditions", META + "Condition", REPEATED),
    },
    CORE + "SessionAffinityConfig": {
        1: ("clientIP", CORE + "ClientIPConfig", OPTIONAL),
    },
    API + "discovery.v1.Endpoint": {
        1: ("addresses", "string", REPEATED),
        2: ("conditions", API + "discovery.v1.EndpointConditions"),
        3: ("hostname", "string", OPTIONAL),
        4: ("targetRef", CORE + "ObjectReference", OPTIONAL),
        5: ("deprecatedTopology", "map:string"),
        6: ("nodeName", "string", OPTIONAL),
        7: ("zone", "string", OPTIONAL),
        8: ("hints", API + "discovery.v1.EndpointHints", OPTIONAL),
    },
    API + "discovery.v1.EndpointConditions": {
        1: ("ready", "bool", OPTIONAL),
        2: ("serving", "bool", OPTIONAL),
        3: ("terminating", "bool", OPTIONAL),
    },
    API + "discovery.v1.EndpointHints": {
        1: ("forZones", API + "discovery.v1.ForZone", REPEATED),
    },
    API + "discovery.v1.EndpointPort": {
        1: ("name", "string", OPTIONAL),
        2: ("protocol", "string", OPTIONAL),
        3: ("port", "int32", OPTIONAL),
        4: ("appProtocol", "string", OPTIONAL),
    },
    API + "discovery.v1.EndpointSlice": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("endpoints", API + "discovery.v1.Endpoint", REPEATED),
        3: ("ports", API + "discovery.v1.EndpointPort", REPEATED),
        4: ("addressType", "string"),
    },
    API + "discovery.v1.ForZone": {
        1: ("name", "string"),
    },
    API + "flowcontrol.v1.ExemptPriorityLevelConfiguration": {
        1: ("nominalConcurrencyShares", "int32", OPTIONAL),
        2: ("lendablePercent", "int32", OPTIONAL),
    },
    API + "flowcontrol.v1.FlowDistinguisherMethod": {
        1: ("type", "string"),
    },
    API + "flowcontrol.v1.FlowSchema": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "flowcontrol.v1.FlowSchemaSpec"),
        3: ("status", API + "flowcontrol.v1.FlowSchemaStatus"),
    },
    API + "flowcontrol.v1.FlowSchemaCondition": {
        1: ("type", "string"),
        2: ("status", "string"),
        3: ("lastTransitionTime", META + "Time"),
        4: ("reason", "string"),
        5: ("message", "string"),
    },
    API + "flowcontrol.v1.FlowSchemaSpec": {
        1: ("priorityLevelConfiguration",
            API + "flowcontrol.v1.PriorityLevelConfigurationReference"),
        2: ("matchingPrecedence", "int32"),
        3: ("distinguisherMethod", API + "flowcontrol.v1.FlowDistinguisherMethod", OPTIONAL),
        4: ("rules", API + "flowcontrol.v1.PolicyRulesWithSubjects", REPEATED),
    },
    API + "flowcontrol.v1.FlowSchemaStatus": {
        1: ("conditions", API + "flowcontrol.v1.FlowSchemaCondition", REPEATED),
    },
    API + "flowcontrol.v1.GroupSubject": {
        1: ("name", "string"),
    },
    API + "flowcontrol.v1.LimitResponse": {
        1: ("type", "string"),
        2: ("queuing", API + "flowcontrol.v1.QueuingConfiguration", OPTIONAL),
    },
    API + "flowcontrol.v1.LimitedPriorityLevelConfiguration": {
        1: ("nominalConcurrencyShares", "int32", OPTIONAL),
        2: ("limitResponse", API + "flowcontrol.v1.LimitResponse"),
        3: ("lendablePercent", "int32", OPTIONAL),
        4: ("borrowingLimitPercent", "int32", OPTIONAL),
    },
    API + "flowcontrol.v1.NonResourcePolicyRule": {
        1: ("verbs", "string", REPEATED),
        6: ("nonResourceURLs", "string", REPEATED),
    },
    API + "flowcontrol.v1.PolicyRulesWithSubjects": {
        1: ("subjects", API + "flowcontrol.v1.Subject", REPEATED),
        2: ("resourceRules", API + "flowcontrol.v1.ResourcePolicyRule", REPEATED),
        3: ("nonResourceRules", API + "flowcontrol.v1.NonResourcePolicyRule", REPEATED),
    },
    API + "flowcontrol.v1.PriorityLevelConfiguration": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("spec", API + "flowcontrol.v1.PriorityLevelConfigurationSpec"),
        3: ("status", API + "flowcontrol.v1.PriorityLevelConfigurationStatus"),
    },
    API + "flowcontrol.v1.PriorityLevelConfigurationCondition": {
        1: ("type", "string"),
        2: ("status", "string"),
        3: ("lastTransitionTime", META + "Time"),
        4: ("reason", "string"),
        5: ("message", "string"),
    },
    API + "flowcontrol.v1.PriorityLevelConfigurationReference": {
        1: ("name", "string"),
    },
    API + "flowcontrol.v1.PriorityLevelConfigurationSpec": {
        1: ("type", "string"),
        2: ("limited", API + "flowcontrol.v1.LimitedPriorityLevelConfiguration", OPTIONAL),
        3: ("exempt", API + "flowcontrol.v1.ExemptPriorityLevelConfiguration", OPTIONAL),
    },
    API + "flowcontrol.v1.PriorityLevelConfigurationStatus": {
        1: ("conditions", API + "flowcontrol.v1.PriorityLevelConfigurationCondition", REPEATED),
    },
    API + "flowcontrol.v1.QueuingConfiguration": {
        1: ("queues", "int32"),
        2: ("handSize", "int32"),
        3: ("queueLengthLimit", "int32"),
    },
    API + "flowcontrol.v1.ResourcePolicyRule": {
        1: ("verbs", "string", REPEATED),
        2: ("apiGroups", "string", REPEATED),
        3: ("resources", "string", REPEATED),
        4: ("clusterScope", "bool"),
        5: ("namespaces", "string", REPEATED),
    },
    API + "flowcontrol.v1.ServiceAccountSubject": {
        1: ("namespace", "string"),
        2: ("name", "string"),
    },
    API + "flowcontrol.v1.Subject": {
        1: ("kind", "string"),
        2: ("user", API + "flowcontrol.v1.UserSubject", OPTIONAL),
        3: ("group", API + "flowcontrol.v1.GroupSubject", OPTIONAL),
        4: ("serviceAccount", API + "flowcontrol.v1.ServiceAccountSubject", OPTIONAL),
    },
    API + "flowcontrol.v1.UserSubject": {
        1: ("name", "string"),
    },
    API + "rbac.v1.AggregationRule": {
        1: ("clusterRoleSelectors", META + "LabelSelector", REPEATED),
    },
    API + "rbac.v1.ClusterRole": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("rules", API + "rbac.v1.PolicyRule", REPEATED),
        3: ("aggregationRule", API + "rbac.v1.AggregationRule", OPTIONAL),
    },
    API + "rbac.v1.ClusterRoleBinding": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("subjects", API + "rbac.v1.Subject", REPEATED),
        3: ("roleRef", API + "rbac.v1.RoleRef"),
    },
    API + "rbac.v1.PolicyRule": {
        1: ("verbs", "string", REPEATED),
        2: ("apiGroups", "string", REPEATED),
        3: ("resources", "string", REPEATED),
        4: ("resourceNames", "string", REPEATED),
        5: ("nonResourceURLs", "string", REPEATED),
    },
    API + "rbac.v1.Role": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("rules", API + "rbac.v1.PolicyRule", REPEATED),
    },
    API + "rbac.v1.RoleBinding": {
        1: ("metadata", META + "ObjectMeta"),
        2: ("subjects", API + "rbac.v1.Subject", REPEATED),
        3: ("roleRef", API + "rbac.v1.RoleRef"),
    },
    API + "rbac.v1.RoleRef": {
        1: ("apiGroup", "string"),
        2: ("kind", "string"),
        3: ("name", "string"),
    },
    API + "rbac.v1.Subject": {
        1: ("kind", "string"),
        2: ("apiGroup", "string"),
        3: ("name", "string"),
        4: ("namespace", "string"),
    },
    META + "Condition": {
        1: ("type", "string"),
        2: ("status", "string"),
        3: ("observedGeneration", "int64"),
        4: ("lastTransitionTime", META + "Time"),
        5: ("reason", "string"),
        6: ("message", "string"),
    },
    META + "DeleteOptions": {
        1: ("gracePeriodSeconds", "int64", OPTIONAL),
        2: ("preconditions", META + "Preconditions", OPTIONAL),
        3: ("orphanDependents", "bool", OPTIONAL),
        4: ("propagationPolicy", "string", OPTIONAL),
        5: ("dryRun", "string", REPEATED),
        6: ("ignoreStoreReadErrorWithClusterBreakingPotential", "bool", OPTIONAL),
    },
    META + "FieldSelectorRequirement": {
        1: ("key", "string"),
        2: ("operator", "string"),
        3: ("values", "string", REPEATED),
    },
    META + "LabelSelector": {
        1: ("matchLabels", "map:string"),
        2: ("matchExpressions", META + "LabelSelectorRequirement", REPEATED),
    },
    META + "LabelSelectorRequirement": {
        1: ("key", "string"),
        2: ("operator", "string"),
        3: ("values", "string", REPEATED),
    },
    META + "ManagedFieldsEntry": {
        1: ("manager", "string"),
        2: ("operation", "string"),
        3: ("apiVersion", "string"),
        4: ("time", META + "Time", OPTIONAL),
        6: ("fieldsType", "string"),
        7: ("fieldsV1", META + "FieldsV1", OPTIONAL),
        8: ("subresource", "string"),
    },
    META + "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        4: ("selfLink", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int64"),
        8: ("creationTimestamp", META + "Time"),
        9: ("deletionTimestamp", META + "Time", OPTIONAL),
        10: ("deletionGracePeriodSeconds", "int64", OPTIONAL),
        11: ("labels", "map:string"),
        12: ("annotations", "map:string"),
        13: ("ownerReferences", META + "OwnerReference", REPEATED),
        14: ("finalizers", "string", REPEATED),
        17: ("managedFields", META + "ManagedFieldsEntry", REPEATED),
    },
    META + "OwnerReference": {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool", OPTIONAL),
        7: ("blockOwnerDeletion", "bool", OPTIONAL),
    },
    META + "Preconditions": {
        1: ("uid", "string", OPTIONAL),
        2: ("resourceVersion", "string", OPTIONAL),
    },
    META + "ListMeta": {
        1: ("selfLink", "string"),
        2: ("resourceVersion", "string"),
        3: ("continue", "string"),
        4: ("remainingItemCount", "int64", OPTIONAL),
    },
    META + "PartialObjectMetadata": {
        1: ("metadata", META + "ObjectMeta"),
    },
    META + "PartialObjectMetadataList": {
        1: ("metadata", META + "ListMeta"),
        2: ("items", META + "PartialObjectMetadata", REPEATED),
    },
    META_V1BETA1 + "PartialObjectMetadataList": {  # the older field order
        1: ("items", META + "PartialObjectMetadata", REPEATED),
        2: ("metadata", META + "ListMeta"),
    },
    META + "Status": {
        1: ("metadata", META + "ListMeta"),
        2: ("status", "string"),
        3: ("message", "string"),
        4: ("reason", "string"),
        5: ("details", META + "StatusDetails", OPTIONAL),
        6: ("code", "int32"),
    },
    META + "StatusCause": {
        1: ("reason", "string"),
        2: ("message", "string"),
        3: ("field", "string"),
    },
    META + "StatusDetails": {
        1: ("name", "string"),
        2: ("group", "string"),
        3: ("kind", "string"),
        4: ("causes", META + "StatusCause", REPEATED),
        5: ("retryAfterSeconds", "int32"),
        6: ("uid", "string"),
    },
}

#: The kinds whose <Kind>List kube has; every list is {metadata: ListMeta = 1, items = 2}.
LISTED_KINDS = (
    API + "admissionregistration.v1.MutatingWebhookConfiguration",
    API + "admissionregistration.v1.ValidatingWebhookConfiguration",
    API + "coordination.v1.Lease",
    CORE + "ConfigMap", CORE + "Endpoints", CORE + "Event", CORE + "Namespace", CORE + "Secret",
    CORE + "Service", CORE + "ServiceAccount",
    API + "discovery.v1.EndpointSlice",
    API + "rbac.v1.ClusterRole", API + "rbac.v1.ClusterRoleBinding", API + "rbac.v1.Role",
    API + "rbac.v1.RoleBinding",
    API + "admissionregistration.v1.ValidatingAdmissionPolicy",
    API + "admissionregistration.v1.ValidatingAdmissionPolicyBinding",
    API + "flowcontrol.v1.FlowSchema", API + "flowcontrol.v1.PriorityLevelConfiguration",
    *EXT_LISTED_KINDS,
)
MESSAGES.update(EXT_MESSAGES)
for _item in LISTED_KINDS:
    MESSAGES[_item + "List"] = {1: ("metadata", META + "ListMeta"), 2: ("items", _item, REPEATED)}
