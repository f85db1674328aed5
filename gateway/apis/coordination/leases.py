"""coordination.k8s.io/v1 leases: leader election and heartbeats."""

from __future__ import annotations

from gateway.endpoints.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid


class LeaseStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes = []
        for field in ("leaseDurationSeconds", "leaseTransitions"):
            value = spec.get(field)
            if value is not None and (not isinstance(value, int) or value < 0 or (
                    field == "leaseDurationSeconds" and value == 0)):
                causes.append(invalid(f"spec.{field}", str(value),
                                      "must be greater than 0" if field ==
                                      "leaseDurationSeconds" else "must be non-negative"))
        return causes


LEASES = ResourceDef(
    group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
    singular="lease", namespaced=True, strategy=LeaseStrategy(),
    columns=(NAME, Column("Holder", "string", "Who holds the lease.",
                          lambda o: (o.get("spec") or {}).get("holderIdentity", "")), AGE),
    schema="io.k8s.api.coordination.v1.Lease",
)
