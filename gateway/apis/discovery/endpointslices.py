"""discovery.k8s.io/v1 endpointslices."""

from __future__ import annotations

from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import required

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
MAX_ENDPOINTS = 1000
SHOWN = 3


class EndpointSliceStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        kind = obj.get("addressType")
        causes: list[Cause] = []
        if not kind:
            causes.append(required("addressType"))
        elif kind not in ADDRESS_TYPES:
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": '
                                'supported values: "FQDN", "IPv4", "IPv6"', "addressType"))
        endpoints = obj.get("endpoints") or []
        if len(endpoints) > MAX_ENDPOINTS:
            causes.append(Cause("FieldValueTooMany", f"Too many: {len(endpoints)}: must have "
                                f"at most {MAX_ENDPOINTS} items", "endpoints"))
        for i, endpoint in enumerate(endpoints):
            if not endpoint.get("addresses"):
                causes.append(required(f"endpoints[{i}].addresses"))
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        if new.get("addressType") != old.get("addressType"):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: '
                                f'"{new.get("addressType")}": field is immutable',
                                "addressType"))
        return causes


def _ports(obj: Object) -> str:
    ports = [str(p.get("port")) for p in obj.get("ports") or [] if p.get("port") is not None]
    return ",".join(ports) or "<unset>"


def _endpoints(obj: Object) -> str:
    addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
    if not addresses:
        return "<unset>"
    more = len(addresses) - SHOWN
    shown = ",".join(addresses[:SHOWN])
    return f"{shown} + {more} more..." if more > 0 else shown


ENDPOINTSLICES = ResourceDef(
    group="discovery.k8s.io", version="v1", kind="EndpointSlice", plural="endpointslices",
    singular="endpointslice", namespaced=True, strategy=EndpointSliceStrategy(),
    columns=(NAME, Column("AddressType", "string", "The type of the addresses.",
                          lambda o: o.get("addressType", "")),
             Column("Ports", "string", "Ports of the endpoints.", _ports),
             Column("Endpoints", "string", "Addresses of the endpoints.", _endpoints), AGE),
    schema="io.k8s.api.discovery.v1.EndpointSlice",
)
