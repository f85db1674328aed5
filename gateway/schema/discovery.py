"""Schemas of discovery.k8s.io/v1: EndpointSlice, as kube-apiserver v1.32 publishes it."""

from __future__ import annotations

from gateway.schema import core as _core  # noqa: F401 - ObjectReference must exist first
from gateway.schema.dsl import (
    Schema,
    array,
    boolean,
    define,
    define_kind,
    integer,
    map_of,
    obj,
    ref,
    string,
)

V1 = "io.k8s.api.discovery.v1"
GROUP = "discovery.k8s.io"


def disc(name: str, description: str = "") -> Schema:
    """A reference to discovery/v1 definition ``name``."""
    return ref(f"{V1}.{name}", description)


define(f"{V1}.EndpointConditions", obj(
    "What an endpoint is currently able to do.",
    ready=boolean("Whether the endpoint should get new traffic; treat a missing value as "
                  "true."),
    serving=boolean("Whether the endpoint can take traffic, even while it is terminating; "
                    "treat a missing value as true."),
    terminating=boolean("Whether the endpoint is shutting down; treat a missing value as "
                        "false."),
))
define(f"{V1}.ForZone", obj(
    "A zone that should send its traffic to an endpoint.",
    required=("name",),
    name=string("Name of the zone."),
))
define(f"{V1}.EndpointHints", obj(
    "Hints that help consumers decide who should use an endpoint.",
    forZones=array(disc("ForZone"), "The zones whose clients should use this endpoint, for "
                   "topology aware routing (at most 8).", list_type="atomic"),
))
define(f"{V1}.Endpoint", obj(
    "One backend of a service.",
    required=("addresses",),
    addresses=array(string(), "Addresses of the backend, all of the slice's addressType "
                    "(1 to 100 of them; consumers look at the first).", list_type="set"),
    conditions=disc("EndpointConditions", "What the backend is currently able to do."),
    deprecatedTopology=map_of(string(), "Deprecated topology labels carried over from "
                              "v1beta1; writes through v1 are ignored."),
    hints=disc("EndpointHints", "Hints about who should use this backend."),
    hostname=string("Hostname of the backend, usable in DNS names; a lowercase DNS label."),
    nodeName=string("Name of the node the backend runs on."),
    targetRef=ref("io.k8s.api.core.v1.ObjectReference", "The object, usually a pod, that "
                  "the backend is."),
    zone=string("Name of the zone the backend runs in."),
))
define(f"{V1}.EndpointPort", obj(
    "A port that every endpoint of a slice serves.",
    appProtocol=string("The application protocol spoken on this port, such as an IANA "
                       "service name or a kubernetes.io/-prefixed name."),
    name=string("Name of the port, unique within the slice; matches the service port's "
                "name when the slice comes from a service."),
    port=integer("The port number; a missing port means all ports."),
    protocol=string("The IP protocol of the port: TCP, UDP or SCTP; TCP by default.",
                    enum=["SCTP", "TCP", "UDP"]),
    map_type="atomic",
))
define_kind(
    f"{V1}.EndpointSlice", GROUP, "v1", "EndpointSlice",
    "A part of the backends of a service, all with addresses of one type; a service's slices "
    "carry the kubernetes.io/service-name label.",
    required=("addressType", "endpoints"),
    addressType=string("The type of every address in the slice: IPv4, IPv6 or FQDN "
                       "(deprecated); cannot change after creation.",
                       enum=["FQDN", "IPv4", "IPv6"]),
    endpoints=array(disc("Endpoint"), "The distinct backends in this slice (at most 1000).",
                    list_type="atomic"),
    ports=array(disc("EndpointPort"), "The ports every backend of the slice serves (at most "
                "100).", list_type="atomic"),
)
