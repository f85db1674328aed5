"""core/v1 services. No cluster IP is allocated (there is no cluster network behind the
gateway): spec.clusterIP stays what the client sent. ExternalName services are allowed."""

from __future__ import annotations

from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    invalid,
    not_supported,
    port_num_or_name_causes,
    port_number_causes,
)
from gateway.registry.validation import required as required_cause

TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("SCTP", "TCP", "UDP")


def protocol_causes(path: str, protocol: str) -> list[Cause]:
    """A port's protocol: required, and one of kube's three."""
    if not protocol:
        return [required_cause(path)]
    if protocol not in PROTOCOLS:
        return [not_supported(path, protocol, PROTOCOLS)]
    return []


class ServiceStrategy(Strategy):
    has_status = True
    allow_create_on_update = True
    name_is_label = True

    def prepare_for_create(self, obj: Object) -> None:
        _default(obj)

    def prepare_for_update(self, new: Object, old: Object) -> None:
        _default(new)

    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        kind = spec.get("type", "ClusterIP")
        causes: list[Cause] = []
        if kind not in TYPES:
            causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{kind}": '
                                'supported values: "ClusterIP", "ExternalName", '
                                '"LoadBalancer", "NodePort"', "spec.type"))
        if kind == "ExternalName":
            causes += _external_name_causes(spec)
        elif not spec.get("ports") and spec.get("clusterIP") != "None":
            causes.append(required_cause("spec.ports"))
        return causes + _port_causes(spec.get("ports") or [])


def _default(obj: Object) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    if spec["type"] != "ExternalName":
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, "") and "port" in port:
            port["targetPort"] = port["port"]


def _external_name_causes(spec: dict) -> list[Cause]:
    name = spec.get("externalName") or ""
    if not name:
        return [required_cause("spec.externalName")]
    causes = [invalid("spec.externalName", name, e) for e in dns1123_subdomain_errors(
        name.rstrip("."))]
    if spec.get("clusterIP") not in (None, "", "None"):
        causes.append(Cause("FieldValueForbidden", "Forbidden: may not be set for "
                            "ExternalName services", "spec.clusterIP"))
    return causes


def _port_causes(ports: list[dict]) -> list[Cause]:
    """validateServicePort for each port: name (required when there are several, a DNS-1123
    label, unique), port, protocol, targetPort."""
    causes: list[Cause] = []
    seen_names: set[str] = set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append(required_cause(f"{path}.name"))
        elif name:
            causes += [invalid(f"{path}.name", name, e) for e in dns1123_label_errors(name)]
            if name in seen_names:
                causes.append(duplicate(f"{path}.name", name))
            seen_names.add(name)
        causes += port_number_causes(f"{path}.port", port.get("port") or 0)
        causes += protocol_causes(f"{path}.protocol", port.get("protocol") or "")
        target = port.get("targetPort", 0)
        causes += port_num_or_name_causes(f"{path}.targetPort", target)
    return causes


def _external_ip(obj: Object) -> str:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    kind = spec.get("type", "ClusterIP")
    if kind == "ExternalName":
        return spec.get("externalName", "")
    ips = list(spec.get("externalIPs") or [])
    if kind == "LoadBalancer":
        ingress = (status.get("loadBalancer") or {}).get("ingress") or []
        ips += [i.get("ip") or i.get("hostname") for i in ingress]
        return ",".join(ips) if ips else "<pending>"
    return ",".join(ips) if ips else "<none>"


def _ports(obj: Object) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    if not ports:
        return "<none>"
    rendered = []
    for port in ports:
        node = f":{port['nodePort']}" if port.get("nodePort") else ""
        rendered.append(f"{port.get('port')}{node}/{port.get('protocol', 'TCP')}")
    return ",".join(rendered)


def _selector(obj: Object) -> str:
    selector = (obj.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"


SERVICES = ResourceDef(
    group="", version="v1", kind="Service", plural="services", singular="service",
    namespaced=True, strategy=ServiceStrategy(), short_names=("svc",), categories=("all",),
    columns=(
        NAME,
        Column("Type", "string", "The type of the service.",
               lambda o: (o.get("spec") or {}).get("type", "")),
        Column("Cluster-IP", "string", "The virtual IP of the service.",
               lambda o: (o.get("spec") or {}).get("clusterIP") or "<none>"),
        Column("External-IP", "string", "Addresses outside the cluster.", _external_ip),
        Column("Port(s)", "string", "Ports the service exposes.", _ports),
        AGE,
        Column("Selector", "string", "Labels of the backends.", _selector, priority=1),
    ),
    schema="io.k8s.api.core.v1.Service", subresources=("status",),
)
