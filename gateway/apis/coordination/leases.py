"""coordination.k8s.io/v1 leases: leader election and heartbeats."""

from __future__ import annotations

from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid


class LeaseStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        """ValidateLeaseSpec's bounds on the two counters."""
        spec = obj.get("spec") or {}
        causes = []
        duration, transitions = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
        if duration is not None and duration <= 0:
            causes.append(invalid("spec.leaseDurationSeconds", duration,
                                  "must be greater than 0"))
        if transitions is not None and transitions < 0:
            causes.append(invalid("spec.leaseTransitions", transitions,
                                  "must be greater than or equal to 0"))
        return causes


LEASES = ResourceDef(
    group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
    singular="lease", namespaced=True, strategy=LeaseStrategy(),
    columns=(NAME, Column("Holder", "string", "Who holds the lease.",
                          lambda o: (o.get("spec") or {}).get("holderIdentity", "")), AGE),
    schema="io.k8s.api.coordination.v1.Lease",
)
