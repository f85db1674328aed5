"""Schemas of apiregistration.k8s.io/v1: APIService, as kube-aggregator v1.32 publishes it."""

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

V1 = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1"
GROUP = "apiregistration.k8s.io"


def reg(name: str, description: str = "") -> Schema:
    """A reference to apiregistration/v1 definition ``name``."""
    return ref(f"{V1}.{name}", description)


define(f"{V1}.ServiceReference", obj(
    "The Service in front of the extension apiserver that serves an APIService.",
    name=string("Name of the Service."),
    namespace=string("Namespace of the Service."),
    port=integer("The port of the Service the apiserver listens behind; 443 when not "
                 "given. Must be a valid port number (1-65535)."),
))
define(f"{V1}.APIServiceSpec", obj(
    "Where an API group version is served, and how to reach and trust its server. Only "
    "HTTPS is spoken, though certificate verification can be turned off.",
    required=("groupPriorityMinimum", "versionPriority"),
    caBundle={**string("PEM-encoded CA bundle that signs the serving certificate of the "
                       "apiserver behind the Service; the system roots when empty.",
                       format="byte"), "x-kubernetes-list-type": "atomic"},
    group=string("The API group this APIService serves."),
    groupPriorityMinimum=integer(
        "The lowest priority this group may have: groups are listed to clients from the "
        "highest priority to the lowest (20 before 10), then by the name of the APIService "
        "(v1.bar before v1.foo). Other versions of the group may set a higher minimum and "
        "raise the whole group. *.k8s.io groups sit near 18000."),
    insecureSkipTLSVerify=boolean("Do not verify the serving certificate of the apiserver "
                                  "behind the Service. Strongly discouraged: use caBundle "
                                  "instead."),
    service=reg("ServiceReference", "The Service in front of the apiserver of this group "
                "version. When missing, the group version is served locally, by the "
                "aggregating server itself, down its delegation chain."),
    version=string('The API version this APIService serves, such as "v1".'),
    versionPriority=integer(
        "The order of this version within its group: from the highest priority to the "
        "lowest (20 before 10), then in Kubernetes version order (GA before beta before "
        "alpha, higher numbers first), then alphabetically. Must be greater than zero."),
))
define(f"{V1}.APIServiceCondition", obj(
    "One observed aspect of an APIService's state.",
    required=("type", "status"),
    lastTransitionTime=meta_ref("Time", "When the condition last changed its status."),
    message=string("Human-readable details of the last transition."),
    reason=string("A one-word, CamelCase reason for the last transition."),
    status=string("Whether the condition holds: True, False or Unknown."),
    type=string("Which aspect of the APIService this condition describes, such as "
                "Available."),
))
define(f"{V1}.APIServiceStatus", obj(
    "The observed state of an APIService.",
    conditions=array(reg("APIServiceCondition"), "The latest observations of the "
                     "APIService's state.", list_type="map", map_keys=["type"],
                     patch_strategy="merge", merge_key="type"),
))
define_kind(
    f"{V1}.APIService", GROUP, "v1", "APIService",
    "A group version of the API and the server that serves it: the aggregating server "
    "itself (local) or an extension apiserver behind a Service.",
    spec=reg("APIServiceSpec", "Where the group version is served, and how to reach it."),
    status=reg("APIServiceStatus", "Whether the group version can be reached; set by the "
               "system."),
)
