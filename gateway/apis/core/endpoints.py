"""core/v1 endpoints: the addresses behind a service (used by --enable-aggregator-routing)."""

from __future__ import annotations

import ipaddress

from gateway.endpoints.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid

SHOWN_ENDPOINTS = 3


class EndpointsStrategy(Strategy):
    allow_create_on_update = True

    def validate(self, obj: Object) -> list[Cause]:
        causes: list[Cause] = []
        for i, subset in enumerate(obj.get("subsets") or []):
            for field in ("addresses", "notReadyAddresses"):
                for j, address in enumerate(subset.get(field) or []):
                    ip = address.get("ip", "")
                    try:
                        ipaddress.ip_address(ip)
                    except ValueError:
                        causes.append(invalid(f"subsets[{i}].{field}[{j}].ip", ip,
                                              "must be a valid IP address"))
            for j, port in enumerate(subset.get("ports") or []):
                number = port.get("port")
                if not isinstance(number, int) or not 1 <= number <= 65535:
                    causes.append(invalid(f"subsets[{i}].ports[{j}].port", str(number),
                                          "must be between 1 and 65535, inclusive"))
        return causes


def endpoint_addresses(obj: Object) -> list[str]:
    """ip:port for every ready address, as kubectl shows them."""
    out = []
    for subset in obj.get("subsets") or []:
        ports = [p.get("port") for p in subset.get("ports") or []] or [None]
        for address in subset.get("addresses") or []:
            for port in ports:
                out.append(f"{address.get('ip')}:{port}" if port else address.get("ip", ""))
    return out


def _endpoints_cell(obj: Object) -> str:
    addresses = endpoint_addresses(obj)
    if not addresses:
        return "<none>"
    shown = ",".join(addresses[:SHOWN_ENDPOINTS])
    more = len(addresses) - SHOWN_ENDPOINTS
    return f"{shown} + {more} more..." if more > 0 else shown


ENDPOINTS = ResourceDef(
    group="", version="v1", kind="Endpoints", plural="endpoints", singular="endpoints",
    namespaced=True, strategy=EndpointsStrategy(), short_names=("ep",),
    columns=(NAME, Column("Endpoints", "string", "Ready addresses and ports.",
                          _endpoints_cell), AGE),
    schema="io.k8s.api.core.v1.Endpoints",
)
