"""core/v1 services: kube's defaults, validation and the clusterIP fields' bookkeeping
(pkg/apis/core/v1 defaults, pkg/apis/core/validation, pkg/registry/core/service).

What needs the cluster's configuration (IP families, allocating addresses from
--service-cluster-ip-range) happens in gateway.apis.core.serviceips, after the rules here.
"""

from __future__ import annotations

from typing import Any

from gateway.apimachinery.netutil import IPV4, IPV6, canonical_ip
from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    forbidden,
    invalid,
    ip_causes,
    non_special_ip_causes,
    not_supported,
    port_num_or_name_causes,
    port_number_causes,
)
from gateway.registry.validation import required as required_cause

TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
PROTOCOLS = ("SCTP", "TCP", "UDP")
IP_FAMILIES = (IPV4, IPV6)
IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
SESSION_AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
NONE = "None"
#: kube's DefaultClientIPServiceAffinitySeconds (3 hours).
CLIENT_IP_TIMEOUT = 10800
CLIENT_IP_TIMEOUT_MAX = 86400


def protocol_causes(path: str, protocol: str) -> list[Cause]:
    """A port's protocol: required, and one of kube's three."""
    if not protocol:
        return [required_cause(path)]
    if protocol not in PROTOCOLS:
        return [not_supported(path, protocol, PROTOCOLS)]
    return []


# -- Go's renderings of the values kube puts in these errors ------------------------------------


def go_strings(values: list[Any] | None, type_name: str = "string") -> str:
    """%#v of a []string (or a slice of a named string type): nil is ``[]string(nil)``."""
    if values is None:
        return f"[]{type_name}(nil)"
    return f"[]{type_name}{{" + ", ".join(f'"{v}"' for v in values) + "}"


def invalid_list(path: str, values: list[Any] | None, detail: str,
                 type_name: str = "string") -> Cause:
    return Cause("FieldValueInvalid",
                 f"Invalid value: {go_strings(values, type_name)}: {detail}", path)


# -- the linked clusterIP fields (pkg/registry/core/service/storage) ----------------------------


def spec_of(obj: Object) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def is_headless(spec: dict[str, Any]) -> bool:
    return spec.get("clusterIPs") == [NONE]


def needs_cluster_ip(spec: dict[str, Any]) -> bool:
    return spec.get("type") != "ExternalName"


def needs_node_port(spec: dict[str, Any]) -> bool:
    return spec.get("type") in ("NodePort", "LoadBalancer")


def externally_accessible(spec: dict[str, Any]) -> bool:
    return needs_node_port(spec) or (spec.get("type") == "ClusterIP"
                                     and bool(spec.get("externalIPs")))


def same_field(old: dict[str, Any], new: dict[str, Any], name: str) -> bool:
    return (old.get(name) or []) == (new.get(name) or [])


def normalize_cluster_ips(spec: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Keep clusterIP and clusterIPs in step for clients that set only the first (old
    clients), and clear clusterIPs for one that clears clusterIP."""
    ip, ips = spec.get("clusterIP") or "", spec.get("clusterIPs") or []
    if old is None:
        if ip and not ips:
            spec["clusterIPs"] = [ip]
        return
    old_ip, old_ips = old.get("clusterIP") or "", old.get("clusterIPs") or []
    if old_ips and not ips and old_ip == ip:
        spec["clusterIPs"] = ips = list(old_ips)
    if old_ip != ip:
        if old_ip and not ip:
            if same_field(old, spec, "clusterIPs"):
                spec.pop("clusterIPs", None)
        elif same_field(old, spec, "clusterIPs"):
            spec["clusterIPs"] = [ip]


def patch_allocated_values(spec: dict[str, Any], old: dict[str, Any]) -> None:
    """A client that resubmits what it created (without the allocated addresses) keeps
    them: idempotent applies and PUTs."""
    if needs_cluster_ip(old) and needs_cluster_ip(spec):
        if not spec.get("clusterIP") and old.get("clusterIP"):
            spec["clusterIP"] = old["clusterIP"]
        if not spec.get("clusterIPs") and old.get("clusterIPs"):
            spec["clusterIPs"] = list(old["clusterIPs"])
    if needs_node_port(old) and needs_node_port(spec):
        used = ({p.get("nodePort") for p in old.get("ports") or [] if p.get("nodePort")}
                & {p.get("nodePort") for p in spec.get("ports") or [] if p.get("nodePort")})
        by_name = {p.get("name", ""): p.get("nodePort") for p in old.get("ports") or []}
        for port in spec.get("ports") or []:
            known = by_name.get(port.get("name", ""))
            if not port.get("nodePort") and known and known not in used:
                port["nodePort"] = known


def drop_type_dependent_fields(spec: dict[str, Any], old: dict[str, Any]) -> None:
    """Fields the old type needed and the new one does not are wiped, unless the client
    changed them too (then validation speaks)."""
    if needs_cluster_ip(old) and not needs_cluster_ip(spec):
        if same_field(old, spec, "clusterIPs"):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        if same_field(old, spec, "ipFamilies"):
            spec.pop("ipFamilies", None)
        if old.get("ipFamilyPolicy") == spec.get("ipFamilyPolicy"):
            spec.pop("ipFamilyPolicy", None)
    node_ports = [[p.get("nodePort") for p in s.get("ports") or []] for s in (old, spec)]
    if needs_node_port(old) and not needs_node_port(spec) and node_ports[0] == node_ports[1]:
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    if old.get("type") == "LoadBalancer" and spec.get("type") != "LoadBalancer":
        if old.get("allocateLoadBalancerNodePorts") == spec.get("allocateLoadBalancerNodePorts"):
            spec.pop("allocateLoadBalancerNodePorts", None)
        if old.get("loadBalancerClass") == spec.get("loadBalancerClass"):
            spec.pop("loadBalancerClass", None)
        if old.get("healthCheckNodePort") == spec.get("healthCheckNodePort"):
            spec.pop("healthCheckNodePort", None)
    if externally_accessible(old) and not externally_accessible(spec) and \
            old.get("externalTrafficPolicy") == spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)


# -- the strategy -------------------------------------------------------------------------------


class ServiceStrategy(Strategy):
    has_status = True
    allow_create_on_update = True
    name_is_label = True

    def prepare_for_create(self, obj: Object) -> None:
        _default(obj)
        obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new: Object, old: Object) -> None:
        spec, old_spec = _default(new), spec_of(old)
        patch_allocated_values(spec, old_spec)
        normalize_cluster_ips(spec, old_spec)
        drop_type_dependent_fields(spec, old_spec)
        status = new.setdefault("status", {})
        if spec.get("type") != "LoadBalancer" or not isinstance(status.get("loadBalancer"),
                                                                 dict):
            status["loadBalancer"] = {}

    def subresource_update(self, subresource: str, new: Object, old: Object) -> Object:
        result = super().subresource_update(subresource, new, old)
        status = result.setdefault("status", {})
        if isinstance(status, dict):
            status.setdefault("loadBalancer", {})
        return result

    def validate(self, obj: Object) -> list[Cause]:
        # clusterIPs follows clusterIP before validation, but in the object only after the
        # request's managed fields were recorded (with the allocation), as in kube
        spec = dict(spec_of(obj))
        normalize_cluster_ips(spec, None)
        return validate_service(spec)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        spec, old_spec = spec_of(new), spec_of(old)
        return (_upgrade_downgrade_cluster_ips(spec, old_spec)
                + _upgrade_downgrade_ip_families(spec, old_spec) + validate_service(spec))


def _default(obj: Object) -> dict[str, Any]:
    """SetDefaults_Service."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    affinity = spec.setdefault("sessionAffinity", "None") or "None"
    spec["sessionAffinity"] = affinity
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        config = spec.get("sessionAffinityConfig") or {}
        if (config.get("clientIP") or {}).get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": CLIENT_IP_TIMEOUT}}
    kind = spec.setdefault("type", "ClusterIP") or "ClusterIP"
    spec["type"] = kind
    for port in spec.get("ports") or []:
        if not isinstance(port, dict):
            continue
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, "") and "port" in port:
            port["targetPort"] = port["port"]
    if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if kind == "ExternalName":  # kube keeps it but never shows it (defaultOnRead)
        spec.pop("internalTrafficPolicy", None)
    return spec


def validate_service(spec: dict[str, Any]) -> list[Cause]:
    """ValidateService, in kube's order, for the fields the gateway keeps."""
    kind = spec.get("type") or ""
    headless = is_headless(spec)
    causes: list[Cause] = []
    if not spec.get("ports") and not headless and kind != "ExternalName":
        causes.append(required_cause("spec.ports"))
    if kind in ("LoadBalancer", "NodePort") and headless:
        causes.append(invalid("spec.clusterIPs[0]", NONE,
                              f"may not be set to 'None' for {kind} services"))
    elif kind == "ExternalName":
        causes += _external_name_causes(spec)
    causes += _port_causes(spec.get("ports") or [])
    causes += _session_affinity_causes(spec)
    causes += cluster_ips_related_causes(spec)
    for i, ip in enumerate(spec.get("externalIPs") or []):
        path = f"spec.externalIPs[{i}]"
        causes += ip_causes(path, ip) or non_special_ip_causes(path, ip)
    if not kind:
        causes.append(required_cause("spec.type"))
    elif kind not in TYPES:
        causes.append(not_supported("spec.type", kind, TYPES))
    if kind == "ClusterIP":
        for i, port in enumerate(spec.get("ports") or []):
            if port.get("nodePort"):
                causes.append(forbidden(f"spec.ports[{i}].nodePort",
                                        "may not be used when `type` is 'ClusterIP'"))
    policy = spec.get("internalTrafficPolicy")
    if policy is None and kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        causes.append(required_cause("spec.internalTrafficPolicy"))
    elif policy is not None and policy not in TRAFFIC_POLICIES:
        causes.append(not_supported("spec.internalTrafficPolicy", policy, TRAFFIC_POLICIES))
    return causes


def _external_name_causes(spec: dict[str, Any]) -> list[Cause]:
    causes = []
    for name in ("clusterIPs", "ipFamilies"):
        if spec.get(name):
            causes.append(forbidden(f"spec.{name}", "may not be set for ExternalName services"))
    if spec.get("ipFamilyPolicy") is not None:
        causes.append(forbidden("spec.ipFamilyPolicy",
                                "may not be set for ExternalName services"))
    name = (spec.get("externalName") or "").removesuffix(".")
    if not name:
        return [*causes, required_cause("spec.externalName")]
    return causes + [invalid("spec.externalName", name, e)
                     for e in dns1123_subdomain_errors(name)]


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
        causes += port_number_causes(f"{path}.port", int(port.get("port") or 0))
        causes += protocol_causes(f"{path}.protocol", port.get("protocol") or "")
        target = port.get("targetPort", 0)
        causes += port_num_or_name_causes(f"{path}.targetPort", target)
    return causes


def _session_affinity_causes(spec: dict[str, Any]) -> list[Cause]:
    affinity = spec.get("sessionAffinity") or ""
    if not affinity:
        return [required_cause("spec.sessionAffinity")]
    if affinity not in SESSION_AFFINITIES:
        return [not_supported("spec.sessionAffinity", affinity, SESSION_AFFINITIES)]
    config = spec.get("sessionAffinityConfig")
    if affinity == "None":
        if config is not None:
            return [forbidden("spec.sessionAffinityConfig",
                              "must not be set when session affinity is None")]
        return []
    timeout = ((config or {}).get("clientIP") or {}).get("timeoutSeconds")
    path = "spec.sessionAffinityConfig.clientIP.timeoutSeconds"
    if not isinstance(timeout, int) or not 0 < timeout <= CLIENT_IP_TIMEOUT_MAX:
        return [invalid(path, timeout, f"must be greater than 0 and less than "
                                       f"{CLIENT_IP_TIMEOUT_MAX}")]
    return []


def cluster_ips_related_causes(spec: dict[str, Any]) -> list[Cause]:
    """ValidateServiceClusterIPsRelatedFields: clusterIP and clusterIPs agree, families and
    policy are known values, addresses are addresses (at most one of each family), and each
    matches its family."""
    if spec.get("type") == "ExternalName":
        return []
    causes: list[Cause] = []
    ip, ips = spec.get("clusterIP") or "", spec.get("clusterIPs")
    families = spec.get("ipFamilies") or []
    if ip:
        if not ips:
            causes.append(required_cause("spec.clusterIPs"))
        elif ips[0] != ip:
            causes.append(invalid_list("spec.clusterIPs", ips,
                                       "first value must match `clusterIP`"))
    elif ips:
        causes.append(invalid_list("spec.clusterIPs", ips,
                                   "must be empty when `clusterIP` is not specified"))
    seen: set[str] = set()
    for i, family in enumerate(families):
        if family not in IP_FAMILIES:
            causes.append(not_supported(f"spec.ipFamilies[{i}]", family, IP_FAMILIES))
        if family in seen:
            causes.append(duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in IP_FAMILY_POLICIES:
        causes.append(not_supported("spec.ipFamilyPolicy", policy, IP_FAMILY_POLICIES))
    bad_ips = False
    ips = ips or []
    for i, value in enumerate(ips):
        if i == 0 and value == NONE:
            if len(ips) > 1:
                bad_ips = True
                causes.append(invalid_list("spec.clusterIPs", ips,
                                           "'None' must be the first and only value"))
            continue
        errors = ip_causes(f"spec.clusterIPs[{i}]", value)
        bad_ips = bad_ips or bool(errors)
        causes += errors
    if len(ips) > 2:
        causes.append(invalid_list("spec.clusterIPs", ips, "may only hold up to 2 values"))
    if bad_ips:
        return causes
    if len(ips) > 1 and {_family(v) for v in ips} != {IPV4, IPV6}:
        causes.append(invalid_list("spec.clusterIPs", ips,
                                   "may specify no more than one IP for each IP family"))
    if not is_headless(spec):
        for i, (value, family) in enumerate(zip(ips, families, strict=False)):
            if family == IPV4 and _family(value) == IPV6:
                causes.append(invalid(f"spec.clusterIPs[{i}]", value,
                                      f"expected an IPv4 value as indicated by `ipFamilies[{i}]`"))
            if family == IPV6 and _family(value) != IPV6:
                causes.append(invalid(f"spec.clusterIPs[{i}]", value,
                                      f"expected an IPv6 value as indicated by `ipFamilies[{i}]`"))
    return causes


def _family(ip: str) -> str:
    canonical = canonical_ip(ip)
    return IPV6 if canonical is not None and ":" in canonical else IPV4


def _upgrade_downgrade_cluster_ips(spec: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """Cluster IPs never change once set; only a secondary one may be added or (with
    SingleStack) released."""
    if "ExternalName" in (spec.get("type"), old.get("type")):
        return []
    if is_headless(spec) and is_headless(old):
        return []
    ips, old_ips = spec.get("clusterIPs"), old.get("clusterIPs") or []
    new_ips = ips or []
    causes: list[Cause] = []
    if len(old_ips) == len(new_ips):
        causes += [invalid_list(f"spec.clusterIPs[{i}]", ips, "may not change once set")
                   for i, ip in enumerate(old_ips) if ip != new_ips[i]]
    elif len(old_ips) > len(new_ips):
        if not new_ips:
            causes.append(invalid_list("spec.clusterIPs[0]", ips,
                                       "primary clusterIP can not be unset"))
        elif new_ips[0] != old_ips[0]:
            causes.append(invalid_list("spec.clusterIPs[0]", ips, "may not change once set"))
        if len(new_ips) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            causes.append(invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                  "must be set to 'SingleStack' when releasing the secondary "
                                  "clusterIP"))
    elif old_ips and new_ips[0] != old_ips[0]:
        causes.append(invalid_list("spec.clusterIPs[0]", ips, "may not change once set"))
    return causes


def _upgrade_downgrade_ip_families(spec: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """The primary family never changes; a secondary one is added, or released with
    SingleStack. Headless services may change theirs."""
    if "ExternalName" in (spec.get("type"), old.get("type")):
        return []
    if is_headless(spec) or is_headless(old):
        return []
    families, old_families = spec.get("ipFamilies"), old.get("ipFamilies") or []
    new_families = families or []
    ips = spec.get("clusterIPs")
    causes: list[Cause] = []
    family_type = "core.IPFamily"
    if len(old_families) == len(new_families):
        causes += [invalid_list("spec.ipFamilies[0]", families, "may not change once set",
                                family_type)
                   for i, family in enumerate(old_families) if family != new_families[i]]
    elif len(old_families) > len(new_families):
        if not ips:
            causes.append(invalid_list("spec.ipFamilies[0]", families,
                                       "primary ipFamily can not be unset", family_type))
        if new_families and new_families[0] != old_families[0]:
            causes.append(invalid_list("spec.ipFamilies[0]", ips, "may not change once set"))
        if len(new_families) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            causes.append(invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                  "must be set to 'SingleStack' when releasing the secondary "
                                  "ipFamily"))
    elif old_families and new_families and new_families[0] != old_families[0]:
        causes.append(invalid_list("spec.ipFamilies[0]", ips, "may not change once set"))
    return causes


# -- printing -----------------------------------------------------------------------------------


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
