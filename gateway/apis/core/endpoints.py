"""core/v1 endpoints: the addresses behind a service (used by --enable-aggregator-routing)."""

from __future__ import annotations

from gateway.apimachinery.status import Cause
from gateway.apis.core.services import protocol_causes
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    invalid,
    ip_causes,
    name_causes,
    parse_ip,
    port_number_causes,
    required,
)

SHOWN_ENDPOINTS = 3




class EndpointsStrategy(Strategy):
    allow_create_on_update = True

    def prepare_for_create(self, obj: Object) -> None:
        _default(obj)

    def prepare_for_update(self, new: Object, old: Object) -> None:
        _default(new)

    def validate(self, obj: Object) -> list[Cause]:
        """validateEndpointSubsets: each subset needs an address; then its addresses, its
        not-ready addresses and its ports, in that order."""
        causes: list[Cause] = []
        for i, subset in enumerate(obj.get("subsets") or []):
            path = f"subsets[{i}]"
            if not subset.get("addresses") and not subset.get("notReadyAddresses"):
                causes.append(required(path, "must specify `addresses` or "
                                             "`notReadyAddresses`"))
            for field in ("addresses", "notReadyAddresses"):
                for j, address in enumerate(subset.get(field) or []):
                    causes += _address_causes(f"{path}.{field}[{j}]", address)
            ports = subset.get("ports") or []
            for j, port in enumerate(ports):
                causes += _port_causes(f"{path}.ports[{j}]", port, len(ports) > 1)
        return causes


def _default(obj: Object) -> None:
    """SetDefaults_EndpointPort: a port without a protocol is TCP."""
    for subset in obj.get("subsets") or []:
        for port in subset.get("ports") or []:
            if isinstance(port, dict) and not port.get("protocol"):
                port["protocol"] = "TCP"


def _address_causes(path: str, address: dict) -> list[Cause]:
    """validateEndpointAddress: the IP's format, the hostname, the node name, then the IP's
    range (which repeats a format error in its own words)."""
    ip = address.get("ip") or ""
    causes = ip_causes(f"{path}.ip", ip)
    hostname = address.get("hostname") or ""
    if hostname:
        causes += name_causes(hostname, label=True, path=f"{path}.hostname")
    node = address.get("nodeName")
    if node is not None:
        causes += name_causes(node, label=False, path=f"{path}.nodeName")
    # kube then runs ValidateNonSpecialIP, which repeats a format error in its own words and
    # refuses unspecified, loopback and link-local addresses. Only its format error is kept:
    # the gateway publishes its webhook test servers as Endpoints on 127.0.0.1, which the range
    # rules (non_special_ip_causes) would refuse.
    if parse_ip(ip) is None:
        causes.append(invalid(f"{path}.ip", ip, "must be a valid IP address"))
    return causes


def _port_causes(path: str, port: dict, name_required: bool) -> list[Cause]:
    """validateEndpointPort: name (required when there are several), number, protocol."""
    causes: list[Cause] = []
    name = port.get("name") or ""
    if name_required and not name:
        causes.append(required(f"{path}.name"))
    elif name:
        causes += name_causes(name, label=True, path=f"{path}.name")
    causes += port_number_causes(f"{path}.port", port.get("port") or 0)
    causes += protocol_causes(f"{path}.protocol", port.get("protocol") or "")
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
