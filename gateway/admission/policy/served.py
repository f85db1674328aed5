"""The resources the gateway serves, as the policy plugin asks about them (kube's RESTMapper
and its informers): the store of a kind (a paramKind) or of a resource (a rule's, for the
type checker).

The servers are read when asked, so resources installed later (a CRD's) are found; they are
given as whatever the assembly has that maps ``(group, version, plural)`` to a handler with
a ``store`` (gateway.server's GenericAPIServer and its endpoints), not imported from above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gateway.registry.store import RESTStore


class ServedResources:
    """Stores by kind or by resource, over the servers' routing tables."""

    def __init__(self, servers: Callable[[], Iterable[Any]]) -> None:
        self._servers = servers

    def _stores(self) -> Iterable[RESTStore]:
        for server in self._servers():
            for handler in list(server.resources.values()):
                store = getattr(handler, "store", None)
                if isinstance(store, RESTStore):
                    yield store

    def by_kind(self, group: str, version: str, kind: str) -> RESTStore | None:
        """The store serving ``kind`` at ``group/version`` (None: not served)."""
        for store in self._stores():
            res = store.resource
            if (res.group, res.version, res.kind) == (group, version, kind):
                return store
        return None

    def by_resource(self, group: str, version: str, plural: str) -> RESTStore | None:
        for store in self._stores():
            res = store.resource
            if (res.group, res.version, res.plural) == (group, version, plural):
                return store
        return None
