"""What a request is about: verb, group, version, resource, namespace, name, subresource.

The rules are k8s.io/apiserver's RequestInfoFactory, so authorization, audit, limits and
routing all see a request exactly as kube-apiserver would classify it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
SPECIAL_VERBS = frozenset({"proxy", "watch"})
SPECIAL_VERBS_NO_SUBRESOURCES = frozenset({"proxy"})
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
READONLY_VERBS = frozenset({"get", "list", "watch"})
LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})


@dataclass(slots=True)
class RequestInfo:
    path: str
    verb: str
    is_resource_request: bool = False
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)

    @property
    def is_long_running(self) -> bool:
        """Watches and proxies are exempt from the request timeout and in-flight limits."""
        return self.verb in LONG_RUNNING_VERBS or self.subresource in LONG_RUNNING_SUBRESOURCES

    @property
    def is_mutating(self) -> bool:
        return self.verb not in READONLY_VERBS


def _split(path: str) -> list[str]:
    trimmed = path.strip("/")
    return trimmed.split("/") if trimmed else []


def _query_flag(query: dict[str, list[str]], name: str) -> bool:
    values = query.get(name)
    return bool(values and values[0].lower() not in ("false", "0"))


def _field_selector_name(query: dict[str, list[str]]) -> str:
    """``metadata.name=x`` (or ``==``) in a fieldSelector names a single object."""
    for term in (query.get("fieldSelector") or [""])[0].split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and not value.startswith("="):
                name = value.strip()
                return name if name and "/" not in name and name not in (".", "..") else ""
    return ""


def parse_request_info(method: str, path: str, query_string: str = "") -> RequestInfo:
    """Classify a request; a path outside /api and /apis is a non-resource request."""
    info = RequestInfo(path=path, verb=method.lower())
    parts = _split(path)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return info
    info.api_prefix, parts = parts[0], parts[1:]
    if info.api_prefix not in GROUPLESS_PREFIXES:
        if len(parts) < 3:
            return info
        info.api_group, parts = parts[0], parts[1:]
    info.is_resource_request = True
    info.api_version, parts = parts[0], parts[1:]

    if parts[0] in SPECIAL_VERBS:
        if len(parts) < 2:
            info.verb = parts[0]
            return info
        info.verb, parts = parts[0], parts[1:]
    else:
        info.verb = METHOD_VERBS.get(method.upper(), "")

    if parts[0] == "namespaces" and len(parts) > 1:
        info.namespace = parts[1]
        if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    info.parts = parts

    if len(parts) >= 3 and info.verb not in SPECIAL_VERBS_NO_SUBRESOURCES:
        info.subresource = parts[2]
    if len(parts) >= 2:
        info.name = parts[1]
    if parts:
        info.resource = parts[0]

    if not info.name and info.verb == "get":
        query = parse_qs(query_string, keep_blank_values=True)
        info.verb = "watch" if _query_flag(query, "watch") else "list"
        info.name = _field_selector_name(query)
    if not info.name and info.verb == "delete":
        info.verb = "deletecollection"
    return info
