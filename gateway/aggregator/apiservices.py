"""apiregistration.k8s.io/v1 APIService: kube-aggregator's validation, strategy and table.

An APIService names one group version and says who serves it: the gateway itself (no
``spec.service``: a *local* APIService) or an extension apiserver behind a Service (a *remote*
one). Its name must be ``<version>.<group>`` (``v1.`` for the core group). The status holds
the Available condition: a local APIService is available from its creation on; a remote one is
judged by the availability controller, through the ``status`` subresource only.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from gateway.apimachinery.clock import now_rfc3339
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    dns1035_label_errors,
    dns1123_subdomain_errors,
    invalid,
    not_supported,
    required,
)
from gateway.schema import apiregistration as _schema

GROUP = "apiregistration.k8s.io"
VERSION = "v1"
DEFAULT_PORT = 443
AVAILABLE = "Available"
CONDITION_STATUSES = ("True", "False", "Unknown")
LOCAL_REASON = "Local"
LOCAL_MESSAGE = "Local APIServices are always available"


# -- conditions --------------------------------------------------------------------------------


def available_condition(obj: Object) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == AVAILABLE:
            return condition
    return None


def set_condition(obj: Object, condition: dict[str, Any]) -> None:
    """kube's SetAPIServiceCondition: add the condition, or update the one of its type;
    lastTransitionTime moves only when the status changes."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for existing in conditions:
        if existing.get("type") == condition["type"]:
            if existing.get("status") != condition["status"]:
                existing["status"] = condition["status"]
                existing["lastTransitionTime"] = condition.get("lastTransitionTime") \
                    or now_rfc3339()
            existing["reason"] = condition.get("reason", "")
            existing["message"] = condition.get("message", "")
            return
    conditions.append({"lastTransitionTime": now_rfc3339(), **condition})


def local_available() -> dict[str, Any]:
    return {"type": AVAILABLE, "status": "True", "lastTransitionTime": now_rfc3339(),
            "reason": LOCAL_REASON, "message": LOCAL_MESSAGE}


# -- validation --------------------------------------------------------------------------------


def _ca_bundle_size(value: Any) -> int:
    """The number of bytes spec.caBundle decodes to (the body check refused bad base64)."""
    if not isinstance(value, str) or not value:
        return 0
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value)


def _name_errors(name: str, required_name: str) -> list[str]:
    """kube's name function for APIServices: a usable path segment, equal to
    ``spec.version + "." + spec.group``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    errors = [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]
    if errors:
        return errors
    if name != required_name:
        return [f'must be `spec.version+"."+spec.group`: {go_quote(required_name)}']
    return []


def apiservice_causes(obj: Object) -> list[Cause]:
    """ValidateAPIService: the name, group, version, priorities, and the Service or the
    absence of one, in kube's order."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    group, version = spec.get("group") or "", spec.get("version") or ""
    required_name = f"{version}.{group}"
    causes: list[Cause] = []
    if meta.get("generateName"):
        causes += [invalid("metadata.generateName", meta["generateName"], e)
                   for e in _name_errors(meta["generateName"], required_name)]
    causes += [invalid("metadata.name", meta.get("name", ""), e)
               for e in _name_errors(meta.get("name", ""), required_name)]
    if not group and version != "v1":
        causes.append(required("spec.group", "only v1 may have an empty group and it better "
                               "be legacy kube"))
    if group:
        causes += [invalid("spec.group", group, e) for e in dns1123_subdomain_errors(group)]
    causes += [invalid("spec.version", version, e) for e in dns1035_label_errors(version)]
    group_priority = spec.get("groupPriorityMinimum") or 0
    if group_priority <= 0 or group_priority > 20000:
        causes.append(invalid("spec.groupPriorityMinimum", group_priority,
                              "must be positive and less than 20000"))
    version_priority = spec.get("versionPriority") or 0
    if version_priority <= 0 or version_priority > 1000:
        causes.append(invalid("spec.versionPriority", version_priority,
                              "must be positive and less than 1000"))
    ca_size = _ca_bundle_size(spec.get("caBundle"))
    insecure = bool(spec.get("insecureSkipTLSVerify"))
    service = spec.get("service")
    if service is None:
        if ca_size:
            causes.append(invalid("spec.caBundle", f"{ca_size} bytes",
                                  "local APIServices may not have a caBundle"))
        if insecure:
            causes.append(invalid("spec.insecureSkipTLSVerify", True,
                                  "local APIServices may not have insecureSkipTLSVerify"))
        return causes
    if not service.get("namespace"):
        causes.append(required("spec.service.namespace"))
    if not service.get("name"):
        causes.append(required("spec.service.name"))
    port = service.get("port", DEFAULT_PORT)
    if not 1 <= port <= 65535:
        causes.append(invalid("spec.service.port", port, "port is not valid: must be between "
                              "1 and 65535, inclusive"))
    if insecure and ca_size:
        causes.append(invalid("spec.insecureSkipTLSVerify", True,
                              "may not be true if caBundle is present"))
    return causes


def status_causes(obj: Object) -> list[Cause]:
    """ValidateAPIServiceStatus: every condition's status is True, False or Unknown."""
    causes = []
    for i, condition in enumerate((obj.get("status") or {}).get("conditions") or []):
        value = condition.get("status", "")
        if value not in CONDITION_STATUSES:
            causes.append(not_supported(f"status.conditions[{i}].status", value,
                                        CONDITION_STATUSES))
    return causes


def default_port(obj: Object) -> None:
    """SetDefaults_ServiceReference: a Service without a port is reached on 443."""
    service = (obj.get("spec") or {}).get("service")
    if isinstance(service, dict) and "port" not in service:
        service["port"] = DEFAULT_PORT


class APIServiceStrategy(Strategy):
    """kube-aggregator's apiServerStrategy and apiServerStatusStrategy together: the store
    keeps the status on updates of the object and everything else on status updates."""

    has_status = True
    allow_create_on_update = False
    allow_unconditional_update = False

    def validate_name(self, name: str) -> list[Cause]:
        return []  # the name depends on the spec: apiservice_causes checks it

    def prepare_for_create(self, obj: Object) -> None:
        default_port(obj)
        obj["status"] = {}  # reset, and present, as kube's empty status struct is
        if (obj.get("spec") or {}).get("service") is None:
            obj["status"] = {"conditions": [local_available()]}

    def prepare_for_update(self, new: Object, old: Object) -> None:
        default_port(new)

    def validate(self, obj: Object) -> list[Cause]:
        return apiservice_causes(obj)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        # An update of the object keeps the old status, a status update the old spec: each
        # kind of write in effect validates only what it may change.
        return apiservice_causes(new) + status_causes(new)


# -- table -------------------------------------------------------------------------------------


def service_cell(obj: Object) -> str:
    service = (obj.get("spec") or {}).get("service")
    if service is None:
        return "Local"
    return f"{service.get('namespace', '')}/{service.get('name', '')}"


def available_cell(obj: Object) -> str:
    condition = available_condition(obj)
    if condition is None:
        return "Unknown"
    value = condition.get("status", "")
    if value == "True":
        return "True"
    if condition.get("reason"):
        return f"{value} ({condition['reason']})"
    return value


APISERVICES = ResourceDef(
    group=GROUP, version=VERSION, kind="APIService", plural="apiservices",
    singular="apiservice", namespaced=False, strategy=APIServiceStrategy(),
    categories=("api-extensions",),
    columns=(
        NAME,
        Column("Service", "string", "The reference to the service that hosts this API "
               "endpoint.", service_cell),
        Column("Available", "string", "Whether this service is available.", available_cell),
        AGE,
    ),
    schema=f"{_schema.V1}.APIService", subresources=("status",),
)
