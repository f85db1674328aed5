"""Schemas of coordination.k8s.io/v1: Lease, as kube-apiserver v1.32 publishes it."""

from __future__ import annotations

from gateway.schema import meta as _meta  # noqa: F401 - meta definitions must exist first
from gateway.schema.dsl import define, define_kind, integer, meta_ref, obj, ref, string

V1 = "io.k8s.api.coordination.v1"

define(f"{V1}.LeaseSpec", obj(
    "Who holds a lease, since when, and for how long.",
    acquireTime=meta_ref("MicroTime", "When the current holder acquired the lease."),
    holderIdentity=string("Identity of the current holder of the lease."),
    leaseDurationSeconds=integer("How many seconds a candidate must wait after the last "
                                 "renewal before it may take the lease over."),
    leaseTransitions=integer("How many times the lease has changed holders."),
    preferredHolder=string("The identity that should hold the lease next; used with a "
                           "coordinated election strategy."),
    renewTime=meta_ref("MicroTime", "When the current holder last renewed the lease."),
    strategy=string("How a coordinated election picks the next holder, such as "
                    "OldestEmulationVersion."),
))
define_kind(
    f"{V1}.Lease", "coordination.k8s.io", "v1", "Lease",
    "A time-limited claim, used for leader election and node heartbeats.",
    spec=ref(f"{V1}.LeaseSpec", "The holder and timing of the lease."),
)
