"""Where each APIService's group version is served: by the gateway itself (a local APIService,
no ``spec.service``) or by a backend over mTLS. The aggregator keeps one Route per APIService,
replaced whole whenever the APIService changes, and looks it up by (group, version) on every
request under ``/apis/<group>/<version>`` (``/api/v1`` for the core group)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

#: Port of a backend Service when an APIService names none (kube's default).
DEFAULT_SERVICE_PORT = 443


@dataclass(frozen=True)
class ServiceRef:
    namespace: str
    name: str
    port: int = DEFAULT_SERVICE_PORT

    @property
    def server_name(self) -> str:
        """The name a backend's serving certificate must carry (kube's ``<name>.<ns>.svc``)."""
        return f"{self.name}.{self.namespace}.svc"


@dataclass(frozen=True)
class Route:
    """One APIService as the aggregator serves it."""

    name: str  # "<version>.<group>", "v1." for the core group
    group: str
    version: str
    service: ServiceRef | None  # None: served locally, down the server chain
    ca_bundle: bytes = b""  # PEM, decoded from spec.caBundle
    insecure_skip_tls_verify: bool = False
    group_priority_minimum: int = 0
    version_priority: int = 0
    #: The APIService's Available condition is True (a local one always is).
    available: bool = False

    @property
    def local(self) -> bool:
        return self.service is None

    @classmethod
    def from_apiservice(cls, obj: dict[str, Any]) -> Route:
        spec = obj.get("spec") or {}
        service = spec.get("service")
        ref = None if not service else ServiceRef(
            service.get("namespace", ""), service.get("name", ""),
            int(service.get("port") or DEFAULT_SERVICE_PORT))
        conditions = (obj.get("status") or {}).get("conditions") or []
        available = any(c.get("type") == "Available" and c.get("status") == "True"
                        for c in conditions)
        return cls(
            name=obj["metadata"]["name"], group=spec.get("group", ""),
            version=spec.get("version", ""), service=ref,
            ca_bundle=_decoded(spec.get("caBundle")),
            insecure_skip_tls_verify=bool(spec.get("insecureSkipTLSVerify")),
            group_priority_minimum=int(spec.get("groupPriorityMinimum") or 0),
            version_priority=int(spec.get("versionPriority") or 0),
            available=available or ref is None,
        )


def _decoded(ca_bundle: str | None) -> bytes:
    """spec.caBundle is base64 in JSON (a Go []byte); validation has refused bad base64."""
    if not ca_bundle:
        return b""
    try:
        return base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        return b""
