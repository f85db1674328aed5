"""The generic apiserver's config, shared by every server of one delegation chain (kube's
genericapiserver.Config -> Complete -> New).

``Config`` holds what the servers are built with: the store options (the watch caches over the
shared store and the admission chain every store is built with: kube's RESTOptionsGetter and
admission), the request timeouts and the stop signal. ``complete()`` adds what the generic
server itself runs: the watch caches' start as the first post-start hook and the store's health
checks, in one ``Lifecycle`` every server of the chain registers its own hooks and checks in.
``CompletedConfig.new(name, delegate)`` builds one server of the chain; the builders of
apiextensions, kube core and the aggregator each call it, innermost first.

Nothing here knows the gateway's own servers: an extension apiserver is built the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.endpoints.handlers import ResourceEndpoints, SubresourceFactory
from gateway.registry.options import StoreOptions
from gateway.registry.resource import ResourceDef
from gateway.registry.store import RESTStore
from gateway.server.discovery import GroupVersions
from gateway.server.genericapiserver import GenericAPIServer, Handler, not_found_handler
from gateway.server.healthz import HealthCheck, ping_check
from gateway.server.lifecycle import Lifecycle
from gateway.storage.factory import StorageFactory

#: The generic server's own post-start hook: the watch caches' first lists.
CACHES_HOOK = "poststarthook/generic-apiserver-start-informers"
#: How long the store's health check may take.
STORAGE_CHECK_TIMEOUT = 2.0


@dataclass
class Config:
    """What every server of the chain is built with."""

    store_options: StoreOptions
    #: --min-request-timeout: the shortest watch timeout handed out.
    min_request_timeout: int = 1800
    #: Set when the servers begin to shut down: open watches end.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    #: Every server built from this config, outermost first, filled as they are built: a
    #: list of its own can be handed to what asks while serving what the chain serves and
    #: is made before the servers (admission's params, through the store options).
    servers: list[GenericAPIServer] = field(default_factory=list)

    def complete(self) -> CompletedConfig:
        return CompletedConfig(self)


class CompletedConfig:
    """The config with the generic server's own hooks and checks, ready to build servers."""

    def __init__(self, config: Config) -> None:
        self.store_options = config.store_options
        self.min_request_timeout = config.min_request_timeout
        self.stopping = config.stopping
        self.lifecycle = Lifecycle()
        self.servers = config.servers
        factory = self.factory
        #: The factories whose caches readiness waits for: the store's, and any added with
        #: ``wait_for_caches``.
        self.synced: list[StorageFactory] = [factory]
        self.lifecycle.add_post_start_hook(CACHES_HOOK, lambda _: factory.start_caches())

        async def check_storage() -> None:
            await asyncio.wait_for(factory.storage.check_health(), STORAGE_CHECK_TIMEOUT)

        async def check_caches() -> None:
            if not all(synced.caches_ready for synced in self.synced):
                raise RuntimeError("watch caches are not synced")

        self.lifecycle.add_base_checks(
            [ping_check(), HealthCheck("etcd", check_storage)],
            [HealthCheck("etcd-readiness", check_storage),
             HealthCheck("informer-sync", check_caches)])

    @property
    def factory(self) -> StorageFactory:
        return self.store_options.factory

    def wait_for_caches(self, factory: StorageFactory) -> None:
        """/readyz's informer-sync check also waits for ``factory``'s caches (an extension
        apiserver's informers of its core server, as kube's check covers every informer of
        the shared factory); whoever owns it starts them."""
        self.synced.append(factory)

    def new(self, name: str, delegate: Handler = not_found_handler) -> GenericAPIServer:
        """A server of the chain handing what it does not serve to ``delegate`` (the server
        built before it, or the end of the chain)."""
        server = GenericAPIServer(name, delegate)
        self.servers.insert(0, server)
        return server

    def endpoints(self, store: RESTStore,
                  subresources: Mapping[str, SubresourceFactory] | None = None
                  ) -> ResourceEndpoints:
        """The REST endpoints of ``store``, with this config's timeouts."""
        return ResourceEndpoints(store, min_request_timeout=self.min_request_timeout,
                                 stopping=self.stopping, subresources=subresources)

    # -- what the chain serves, asked while serving ------------------------------------------

    def api_groups(self) -> list[GroupVersions]:
        """Every group every server serves, merged by name, outermost server first."""
        merged: dict[str, GroupVersions] = {}
        for server in self.servers:
            for name, group in server.groups.items():
                target = merged.setdefault(name, GroupVersions(name))
                for version, resources in group.versions.items():
                    target.versions.setdefault(version, []).extend(resources)
        return list(merged.values())

    def api_resources(self) -> list[ResourceDef]:
        return [r for server in self.servers for r in server.api_resources]
