"""Schemas of the core ("") group, version v1, that the gateway serves.

Field names, JSON types, ``required`` lists, enums and list/map metadata follow kube-apiserver
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
    int_or_string,
    integer,
    map_of,
    meta_ref,
    obj,
    ref,
    string,
)

V1 = "io.k8s.api.core.v1"

#: kube's Protocol enum (non-list fields of that type carry it).
PROTOCOLS = ["SCTP", "TCP", "UDP"]


def core(name: str, description: str = "") -> Schema:
    """A reference to core/v1 definition ``name``."""
    return ref(f"{V1}.{name}", description)


def atomic(schema: Schema) -> Schema:
    """Mark a map (or struct) schema atomic for server-side apply: replaced whole, not merged."""
    schema["x-kubernetes-map-type"] = "atomic"
    return schema


# -- references -------------------------------------------------------------------------------

define(f"{V1}.ObjectReference", obj(
    "Points at another API object by kind, namespace and name, optionally at a field in it.",
    apiVersion=string("API version of the object pointed at."),
    fieldPath=string("When the reference is to part of the object, the path of that part "
                     "(for example spec.containers{app})."),
    kind=string("Kind of the object pointed at."),
    name=string("Name of the object pointed at."),
    namespace=string("Namespace of the object pointed at."),
    resourceVersion=string("The resourceVersion of the object this reference was taken at, "
                           "if any."),
    uid=string("UID of the object pointed at."),
    map_type="atomic",
))
define(f"{V1}.LocalObjectReference", obj(
    "Names another object in the referrer's own namespace.",
    name=string("Name of the object; an empty name refers to nothing.", default=""),
    map_type="atomic",
))

# -- ConfigMap ----------------------------------------------------------------------------------

define_kind(
    f"{V1}.ConfigMap", "", "v1", "ConfigMap",
    "Non-secret configuration, as key-value pairs that workloads read.",
    binaryData=map_of(string(format="byte"), "Binary values by key, base64 encoded in JSON; "
                      "its keys may not also appear in data."),
    data=map_of(string(), "UTF-8 text values by key; keys are letters, digits, '-', '_' and "
                "'.'."),
    immutable=boolean("Once true, data and binaryData can no longer change; the object must "
                      "be deleted and created again to change them."),
)

# -- Secret -------------------------------------------------------------------------------------

define_kind(
    f"{V1}.Secret", "", "v1", "Secret",
    "Sensitive values, such as passwords, tokens or keys, stored by key.",
    data=map_of(string(format="byte"), "Secret values by key, base64 encoded in JSON."),
    immutable=boolean("Once true, data can no longer change; the object must be deleted "
                      "and created again to change it."),
    stringData=map_of(string(), "A write-only convenience: plain-text values that the server "
                      "moves into data (winning over the same keys there) and never returns."),
    type=string("What kind of secret this is, which decides the keys it must hold "
                "(Opaque, kubernetes.io/tls, kubernetes.io/dockerconfigjson, ...)."),
)

# -- Namespace ----------------------------------------------------------------------------------

define(f"{V1}.NamespaceSpec", obj(
    "The desired state of a namespace.",
    finalizers=array(string(), "Names of the components that must finish cleaning "
                     "up before the namespace can be removed from storage.",
                     list_type="atomic"),
))
define(f"{V1}.NamespaceCondition", obj(
    "One aspect of a namespace's observed state.",
    required=("type", "status"),
    lastTransitionTime=meta_ref("Time", "When the condition last changed its status."),
    message=string("Human-readable details of the last transition."),
    reason=string("A one-word, CamelCase reason for the last transition."),
    status=string("Whether the condition holds: True, False or Unknown."),
    type=string("Which aspect of the namespace this condition describes."),
))
define(f"{V1}.NamespaceStatus", obj(
    "The observed state of a namespace.",
    conditions=array(core("NamespaceCondition"), "The latest observations of the namespace's "
                     "state.", list_type="map", map_keys=["type"], patch_strategy="merge",
                     merge_key="type"),
    phase=string("Active while the namespace is in use; Terminating once its deletion has "
                 "begun.", enum=["Active", "Terminating"]),
))
define_kind(
    f"{V1}.Namespace", "", "v1", "Namespace",
    "A scope for names: objects in different namespaces may have the same name.",
    spec=core("NamespaceSpec", "What the namespace should be."),
    status=core("NamespaceStatus", "What the namespace currently is; set by the system."),
)

# -- ServiceAccount -----------------------------------------------------------------------------

define_kind(
    f"{V1}.ServiceAccount", "", "v1", "ServiceAccount",
    "An identity that processes in pods use to authenticate to the API server.",
    automountServiceAccountToken=boolean("Whether pods running as this account get an API "
                                         "token mounted unless the pod says otherwise."),
    imagePullSecrets=array(core("LocalObjectReference"), "Secrets in the same namespace that "
                           "pods running as this account use to pull their images.",
                           list_type="atomic"),
    secrets=array(core("ObjectReference"), "Secrets that pods running as this account may "
                  "use; legacy, no longer used for token secrets.", list_type="map",
                  map_keys=["name"], patch_strategy="merge", merge_key="name"),
)

# -- Service ------------------------------------------------------------------------------------

define(f"{V1}.ServicePort", obj(
    "One port that a service exposes, and where its traffic goes.",
    required=("port",),
    appProtocol=string("The application protocol spoken on this port, such as an IANA "
                       "service name or a kubernetes.io/-prefixed name."),
    name=string("Name of the port within the service; must be set, and unique, when the "
                "service has more than one port."),
    nodePort=integer("The port opened on every node for NodePort and LoadBalancer services; "
                     "allocated when left out."),
    port=integer("The port number the service exposes."),
    protocol=string("The IP protocol of the port: TCP, UDP or SCTP.", enum=PROTOCOLS,
                    default="TCP"),
    targetPort=int_or_string("The number or named port on the backing pods that traffic is "
                             "sent to; the same as port when left out."),
))
define(f"{V1}.ClientIPConfig", obj(
    "Settings of session affinity by client IP.",
    timeoutSeconds=integer("How many seconds a ClientIP session sticks (1 to 86400; 10800 "
                           "by default)."),
))
define(f"{V1}.SessionAffinityConfig", obj(
    "Settings of session affinity.",
    clientIP=core("ClientIPConfig", "Settings used when sessionAffinity is ClientIP."),
))
define(f"{V1}.ServiceSpec", obj(
    "The desired state of a service.",
    allocateLoadBalancerNodePorts=boolean("Whether a LoadBalancer service gets node ports "
                                          "allocated; true by default."),
    clusterIP=string("The service's virtual IP, allocated when left empty; \"None\" makes "
                     "a headless service."),
    clusterIPs=array(string(), "The service's virtual IPs, at most one per IP "
                     "family; the first equals clusterIP.", list_type="atomic"),
    externalIPs=array(string(), "Extra IPs, not managed by Kubernetes, on which "
                      "nodes also accept traffic for this service.", list_type="atomic"),
    externalName=string("The DNS name that an ExternalName service is an alias for."),
    externalTrafficPolicy=string("How traffic arriving on node ports, external IPs and load "
                                 "balancer IPs is routed: to every endpoint (Cluster) or only "
                                 "to endpoints on the receiving node (Local).",
                                 enum=["Cluster", "Local"]),
    healthCheckNodePort=integer("The node port answering health checks when a LoadBalancer "
                                "service has externalTrafficPolicy Local."),
    internalTrafficPolicy=string("How traffic sent to the cluster IP is routed: to every "
                                 "endpoint (Cluster) or only to endpoints on the sending "
                                 "node (Local).", enum=["Cluster", "Local"]),
    ipFamilies=array(string(enum=["", "IPv4", "IPv6"]), "The IP families (IPv4, "
                     "IPv6) of the service, in the order of its clusterIPs.",
                     list_type="atomic"),
    ipFamilyPolicy=string("Whether the service gets one IP family or two; SingleStack when "
                          "left out.",
                          enum=["PreferDualStack", "RequireDualStack", "SingleStack"]),
    loadBalancerClass=string("Which load balancer implementation should handle this "
                             "LoadBalancer service; the default one when left out."),
    loadBalancerIP=string("Deprecated: an IP requested from the load balancer, honoured "
                          "only by some implementations."),
    loadBalancerSourceRanges=array(string(), "Client CIDRs that the load balancer "
                                   "lets through, where the platform supports it.",
                                   list_type="atomic"),
    ports=array(core("ServicePort"), "The ports the service exposes.", list_type="map",
                map_keys=["port", "protocol"], patch_strategy="merge", merge_key="port"),
    publishNotReadyAddresses=boolean("Whether endpoints of the service include addresses "
                                     "whose pods are not ready yet."),
    selector=atomic(map_of(string(), "Labels selecting the pods that back the service; "
                           "when empty, its endpoints are managed by something else.")),
    sessionAffinity=string("ClientIP to send a client's connections to the same endpoint, "
                           "or None.", enum=["ClientIP", "None"]),
    sessionAffinityConfig=core("SessionAffinityConfig", "Settings of session affinity."),
    trafficDistribution=string("A preference for how traffic is spread over the service's "
                               "endpoints, such as PreferClose."),
    type=string("How the service is exposed: ClusterIP (the default), NodePort, "
                "LoadBalancer or ExternalName.",
                enum=["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]),
))
define(f"{V1}.PortStatus", obj(
    "The state of one port of a load balancer entry point.",
    required=("port", "protocol"),
    error=string("Why the port is in error, as a CamelCase reason, when it is."),
    port=integer("The port number."),
    protocol=string("The IP protocol of the port: TCP, UDP or SCTP.", enum=PROTOCOLS),
))
define(f"{V1}.LoadBalancerIngress", obj(
    "An entry point through which traffic reaches a load balancer.",
    hostname=string("DNS name of the entry point, for load balancers that use names."),
    ip=string("IP address of the entry point, for load balancers that use IPs."),
    ipMode=string("How traffic for the IP reaches the node: VIP (addressed to the IP) or "
                  "Proxy (addressed to the node or pod)."),
    ports=array(core("PortStatus"), "The state of each of the service's ports here.",
                list_type="atomic"),
))
define(f"{V1}.LoadBalancerStatus", obj(
    "The state of a load balancer.",
    ingress=array(core("LoadBalancerIngress"), "The entry points of the load balancer.",
                  list_type="atomic"),
))
define(f"{V1}.ServiceStatus", obj(
    "The observed state of a service.",
    conditions=array(meta_ref("Condition"), "The latest observations of the service's "
                     "state.", list_type="map", map_keys=["type"], patch_strategy="merge",
                     merge_key="type"),
    loadBalancer=core("LoadBalancerStatus", "The state of the service's load balancer, if "
                      "it has one."),
))
define_kind(
    f"{V1}.Service", "", "v1", "Service",
    "A named, stable front for a set of backends: a virtual IP and ports, a load balancer, or "
    "a DNS alias.",
    spec=core("ServiceSpec", "What the service should be."),
    status=core("ServiceStatus", "What the service currently is; set by the system."),
)

# -- Endpoints ----------------------------------------------------------------------------------

define(f"{V1}.EndpointAddress", obj(
    "One address of a backend of a service.",
    required=("ip",),
    hostname=string("Hostname of the backend."),
    ip=string("IP address of the backend."),
    nodeName=string("Name of the node the backend runs on."),
    targetRef=core("ObjectReference", "The object, usually a pod, that the backend is."),
    map_type="atomic",
))
define(f"{V1}.EndpointPort", obj(
    "One port that a set of backend addresses serve.",
    required=("port",),
    appProtocol=string("The application protocol spoken on this port."),
    name=string("Name of the port, matching the name of the service's port."),
    port=integer("The port number."),
    protocol=string("The IP protocol of the port: TCP, UDP or SCTP; TCP by default.",
                    enum=PROTOCOLS),
    map_type="atomic",
))
define(f"{V1}.EndpointSubset", obj(
    "A group of addresses that all serve the same ports.",
    addresses=array(core("EndpointAddress"), "Addresses that are ready to take traffic.",
                    list_type="atomic"),
    notReadyAddresses=array(core("EndpointAddress"), "Addresses that are not ready yet, or "
                            "failed a readiness check.", list_type="atomic"),
    ports=array(core("EndpointPort"), "The ports that every address of the subset serves.",
                list_type="atomic"),
))
define_kind(
    f"{V1}.Endpoints", "", "v1", "Endpoints",
    "The addresses and ports of the backends of a service (superseded by EndpointSlice).",
    subsets=array(core("EndpointSubset"), "The backends, grouped by the ports they serve.",
                  list_type="atomic"),
)

# -- Event --------------------------------------------------------------------------------------

define(f"{V1}.EventSource", obj(
    "Which component, on which host, reported an event.",
    component=string("The component that reported the event."),
    host=string("The node the reporting component ran on."),
))
define(f"{V1}.EventSeries", obj(
    "A run of repetitions of the same event.",
    count=integer("How many times the event has happened in this series so far."),
    lastObservedTime=meta_ref("MicroTime", "When the event was last seen in this series."),
))
define_kind(
    f"{V1}.Event", "", "v1", "Event",
    "A report of something that happened to an object, such as a state change or an error.",
    required=("metadata", "involvedObject"),
    action=string("What was done, or failed to be done, about the involved object."),
    count=integer("How many times the event has happened."),
    eventTime=meta_ref("MicroTime", "When the event first happened, with microseconds."),
    firstTimestamp=meta_ref("Time", "When the event was first recorded."),
    involvedObject=core("ObjectReference", "The object the event is about."),
    lastTimestamp=meta_ref("Time", "When the event was most recently recorded."),
    message=string("A human-readable account of what happened."),
    reason=string("A short, CamelCase, machine-readable reason for the event."),
    related=core("ObjectReference", "A second object involved, if any."),
    reportingComponent=string("Name of the controller that emitted the event, such as "
                              "kubernetes.io/kubelet."),
    reportingInstance=string("Which instance of that controller emitted the event."),
    series=core("EventSeries", "Data about the run of repetitions this event belongs to, "
                "if any."),
    source=core("EventSource", "The component that reported the event."),
    type=string("The type of the event: Normal or Warning (new types may appear)."),
)
