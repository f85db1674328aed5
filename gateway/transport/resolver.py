"""The service resolver interface: where a Service reference points.

Implementations live where the Services are known (gateway.aggregator.resolver reads the
gateway's own Services and Endpoints); callers are given one where the chain is assembled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ResolveError(Exception):
    """The Service or an address behind it is missing; the message says which."""


@dataclass(frozen=True)
class ServiceAddress:
    host: str
    port: int
    server_name: str  # the name the backend's certificate must carry


class ServiceResolver(Protocol):
    async def resolve(self, namespace: str, name: str, port: int) -> ServiceAddress:
        """The address to dial for port ``port`` of Service ``namespace/name``; ResolveError
        when there is none."""
        ...
