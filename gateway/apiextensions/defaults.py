"""Defaults of apiextensions.k8s.io/v1 CustomResourceDefinitions, as kube's SetDefaults give
them (apiextensions-apiserver pkg/apis/apiextensions/v1/defaults.go and the generated
SetObjectDefaults_CustomResourceDefinition) when a v1 object is decoded.

They run before validation, on every decode: a missing singular or listKind is no error for
that reason, and a conversion webhook Service without a port means 443.
"""

from __future__ import annotations

from typing import Any

NONE_CONVERTER = "None"
DEFAULT_SERVICE_PORT = 443


def default_crd(crd: dict[str, Any]) -> None:
    """Fill in what kube fills in, in place: names.singular, names.listKind,
    spec.conversion, the conversion webhook's Service port and, when empty,
    status.storedVersions (the storage version)."""
    spec = crd.get("spec")
    if spec is None:
        spec = crd["spec"] = {}
    if not isinstance(spec, dict):
        return
    _default_spec(spec)
    _default_stored_versions(crd, spec)


def _default_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_CustomResourceDefinitionSpec and the webhook ServiceReference's port."""
    names = spec.get("names")
    if isinstance(names, dict):
        kind = names.get("kind") or ""
        if not names.get("singular") and kind:
            # strings.ToLower(kind); an empty kind leaves the (omitted) empty singular
            names["singular"] = kind.lower()
        if not names.get("listKind") and kind:
            names["listKind"] = kind + "List"
    conversion = spec.get("conversion")
    if conversion is None:
        spec["conversion"] = {"strategy": NONE_CONVERTER}
        return
    service = _dig(conversion, "webhook", "clientConfig", "service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = DEFAULT_SERVICE_PORT


def _default_stored_versions(crd: dict[str, Any], spec: dict[str, Any]) -> None:
    """SetDefaults_CustomResourceDefinition: no stored versions yet means the storage one."""
    status = crd.get("status")
    if status is not None and not isinstance(status, dict):
        return
    if status and status.get("storedVersions"):
        return
    for version in spec.get("versions") or []:
        if isinstance(version, dict) and version.get("storage") is True:
            if status is None:
                status = crd["status"] = {}
            status["storedVersions"] = [version.get("name") or ""]
            return


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
