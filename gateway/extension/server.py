"""An extension apiserver assembled: the declared groups served by the generic apiserver, its
store and watch caches, discovery and OpenAPI, behind kube's handler chain with delegated
authentication and authorization, on HTTPS.

``ExtensionServer(groups, options)`` builds it; ``await server.run()`` serves until SIGTERM.
The paths are those of a Go server built on k8s.io/apiserver: the groups' resources,
``/apis`` and ``/apis/<group>[/<version>]`` (legacy and aggregated discovery), ``/openapi/v2``
and ``/openapi/v3``, ``/healthz``, ``/livez``, ``/readyz`` (and each check), ``/version`` and
``/metrics``. Behind the gateway (or any kube-apiserver) it is registered by one APIService
per group version.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence

import structlog
from aiohttp import web

from gateway.admission.chain import AdmissionChain
from gateway.apimachinery import status
from gateway.apimachinery.dynamicfile import FileWatcher
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apis.admissionregistration.policies import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from gateway.apis.admissionregistration.webhooks import MUTATING, VALIDATING
from gateway.apis.core.namespaces import NAMESPACES
from gateway.auth.authn.x509 import parse_ca_bundle
from gateway.auth.decisions import uncached
from gateway.controlplane.admission import new_admission
from gateway.endpoints.handlers import ResourceEndpoints, SubresourceFactory, json_response
from gateway.endpoints.handlers import SubresourceHandler as EndpointHandler
from gateway.extension.api import APIGroup, Object, Objects, SubresourceHandler
from gateway.extension.authn import DelegatedAuthentication
from gateway.extension.authz import SubjectAccessReviewer, delegated_authorizer
from gateway.extension.kubeclient import KubeClient, client_config
from gateway.extension.options import ADMISSION_PLUGINS, ExtensionOptions
from gateway.extension.remote import DNSServiceResolver, RemoteStorage
from gateway.extension.resources import AdmissionHooks, served_resources
from gateway.registry.options import StoreOptions
from gateway.registry.store import RESTStore
from gateway.server.config import Config
from gateway.server.discovery import Discovery
from gateway.server.filters.draining import InFlightRequests
from gateway.server.handler_chain import ChainConfig, compose_handler_chain
from gateway.server.httpserver import GoServer
from gateway.server.lifecycle import Start
from gateway.server.metrics import Metrics
from gateway.server.openapi import OpenAPI
from gateway.server.request import ChainHandler, Request, Response
from gateway.server.tls import ServingTLS, serving_pair_file
from gateway.storage.factory import StorageFactory, wait_until_reachable
from gateway.storage.interface import Storage
from gateway.transport.clients import ClientManager
from gateway.version import version_info

log = structlog.get_logger(__name__)

#: The core server's resources admission reads (kube's shared informers of an extension
#: apiserver).
CORE_RESOURCES = (NAMESPACES, MUTATING, VALIDATING, VALIDATING_ADMISSION_POLICIES,
                  VALIDATING_ADMISSION_POLICY_BINDINGS)
INFORMERS_HOOK = "poststarthook/start-extension-apiserver-informers"



def new_storage(options: ExtensionOptions) -> Storage:
    """etcd with --etcd-servers, else SQLite in --data-dir."""
    if options.etcd_servers:
        from gateway.storage.etcd3 import EtcdConfig, EtcdStorage

        return EtcdStorage(EtcdConfig(
            servers=tuple(options.etcd_servers), prefix=options.etcd_prefix or "/registry",
            ca_file=str(options.etcd_cafile) if options.etcd_cafile else None,
            cert_file=str(options.etcd_certfile) if options.etcd_certfile else None,
            key_file=str(options.etcd_keyfile) if options.etcd_keyfile else None))
    from gateway.storage.sqlite import SQLiteStorage

    options.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return SQLiteStorage(options.data_dir / "state.db")


class ExtensionServer:
    """Everything an extension apiserver runs."""

    def __init__(self, groups: Sequence[APIGroup], options: ExtensionOptions, *,
                 name: str = "extension-apiserver") -> None:
        self.groups = list(groups)
        self.options = options
        self.metrics = Metrics()
        self.storage = new_storage(options)
        self.factory = StorageFactory(self.storage,
                                      on_terminated=self.metrics.watcher_terminated)
        #: One store per resource (any of its versions: they share the stored objects).
        self.stores: dict[tuple[str, str], RESTStore] = {}
        self.core_client = KubeClient(client_config(
            options.kubeconfig or options.authentication_kubeconfig))
        # the generic apiserver's config, as the gateway's own servers are built from
        self.config = Config(self._store_options(),
                             min_request_timeout=options.min_request_timeout).complete()
        self.lifecycle = self.config.lifecycle
        self.lifecycle.add_post_start_hook(INFORMERS_HOOK, self._start_core_informers)
        # not ready before admission can read namespaces, webhooks and policies
        self.config.wait_for_caches(self.core_factory)
        self.stopping = self.config.stopping
        self.server = self.config.new(name)
        for group in self.groups:
            for served in served_resources(group):
                store = self.config.store_options.new_store(
                    served.resource, served.layer, read_your_writes=True)
                self.stores.setdefault((group.name, served.resource.plural), store)
                self.server.install_api(served.resource, self.config.endpoints(
                    store, {sub: _subresource(declared.handler)
                            for sub, declared in served.declared.subresources.items()}))
        self.discovery = Discovery(lambda: list(self.server.groups.values()))
        self.openapi = OpenAPI(lambda: self.server.api_resources)
        self.server.on_change(self.discovery.invalidate)
        self.server.on_change(self.openapi.invalidate)
        self._install_paths()
        self.authn_client = KubeClient(client_config(options.authentication_kubeconfig))
        self.authz_client = KubeClient(client_config(options.authorization_kubeconfig))
        cert, key = options.serving_pair()
        self.serving_pair = serving_pair_file(cert, key)
        self.authentication = DelegatedAuthentication(
            self.authn_client, token_cache_ttl=options.authentication_token_webhook_cache_ttl,
            tolerate_lookup_failure=options.authentication_tolerate_lookup_failure,
            placeholder_ca=parse_ca_bundle(cert.read_bytes()))
        self.authorize = delegated_authorizer(
            SubjectAccessReviewer(
                self.authz_client,
                allow_ttl=options.authorization_webhook_cache_authorized_ttl,
                deny_ttl=options.authorization_webhook_cache_unauthorized_ttl),
            options.authorization_always_allow_paths)
        self.in_flight = InFlightRequests()
        self.files = FileWatcher()

    def _store_options(self) -> StoreOptions:
        """Admission as kube's RecommendedOptions have it: NamespaceLifecycle, the mutating
        webhooks, ValidatingAdmissionPolicies and the validating webhooks of the core server
        (read into watch caches over it, ``RemoteStorage``), with the declared hooks: the
        mutating ones after the webhooks, the validating ones first."""
        disabled = set(self.options.disable_admission_plugins)
        unknown = disabled - set(ADMISSION_PLUGINS)
        if unknown:
            raise ValueError(f"--disable-admission-plugins: unknown {sorted(unknown)}; "
                             f"known: {', '.join(ADMISSION_PLUGINS)}")
        self.core_factory = StorageFactory(RemoteStorage(self.core_client, CORE_RESOURCES))
        self.clients = ClientManager()
        core = new_admission(self.core_factory, resolver=DNSServiceResolver(),
                             clients=self.clients,
                             authorize=lambda attributes: self.authorize(attributes),
                             servers=lambda: self.config.servers)
        objects = Objects(self._cached_objects)
        on = {name: name not in disabled for name in ADMISSION_PLUGINS}
        chain = AdmissionChain(
            mutating=[*([core.webhooks] if on["MutatingAdmissionWebhook"] else []),
                      AdmissionHooks(self.groups, objects, mutating=True)],
            validating=[AdmissionHooks(self.groups, objects, mutating=False),
                        *([core.policies] if on["ValidatingAdmissionPolicy"] else []),
                        *([core.webhooks] if on["ValidatingAdmissionWebhook"] else [])])
        return StoreOptions(self.factory, admission=chain,
                            create_admission=core.store_options.create_admission
                            if on["NamespaceLifecycle"] else None)

    async def _start_core_informers(self, start: Start) -> None:
        """The core server's objects admission reads, listed and watched."""
        await self.core_factory.start_caches()

    def _cached_objects(self, plural: str) -> list[Object]:
        """A resource's objects from its watch cache (storage version), for admission."""
        for (_, name), store in self.stores.items():
            if name == plural:
                return list(store.cacher.objects(store.resource.storage_prefix))
        raise KeyError(f"no resource {plural!r} is served here")

    # -- paths ---------------------------------------------------------------------------

    def _install_paths(self) -> None:
        self.server.add_paths(self.lifecycle.health_routes())
        self.server.add_paths({
            "/version": self._version,
            "/metrics": self.metrics.handle,
            "/apis": self.discovery.apis,
            "/openapi/v2": self.openapi.v2,
            "/openapi/v3": self.openapi.v3_index,
        })
        self.server.add_prefix("/apis/", self.discovery.group_path)
        self.server.add_prefix("/openapi/v3/", self.openapi.v3_group_version)

    async def _version(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise status.method_not_allowed(request.method, "version")
        return json_response(version_info())

    async def _serve(self, request: Request) -> Response:
        assert isinstance(request, web.BaseRequest)  # aiohttp's server only: no fast lane here
        return await self.server.handle(request)

    def handler_chain(self) -> ChainHandler:
        """kube's DefaultBuildHandlerChain, as an extension apiserver has it (no priority and
        fairness, no audit: the core server in front does both)."""
        return compose_handler_chain(self._serve, ChainConfig(
            request_timeout=self.options.request_timeout, in_flight=self.in_flight,
            metrics=self.metrics, authenticators=self.authentication.authenticators(),
            anonymous=True, front_proxy=self.authentication.front_proxy,
            authorize=self.authorize, decide=uncached(self.authorize)))

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store and read the authentication ConfigMap (raises when either fails,
        as a Go server stops at start); then follow the ConfigMap and the serving
        certificate. The post-start hooks (the watch caches) begin once the port is ours."""
        await self.storage.start()
        await self.authentication.start()
        await self.lifecycle.start(self.authentication.watch())
        await self.lifecycle.start(self.files.run())

    async def _post_start(self) -> None:
        await wait_until_reachable(self.storage, describe="storage")
        await self.lifecycle.run_post_start_hooks()
        log.info("extension apiserver ready")

    async def stop(self) -> None:
        await self.lifecycle.stop()
        for client in (self.authn_client, self.authz_client, self.core_client):
            await client.close()
        await self.clients.close()
        await self.core_factory.close()
        await self.factory.close()
        await self.storage.close()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve on --bind-address:--secure-port until ``stop`` is set, SIGTERM or SIGINT."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        cas = self.authentication.handshake_cas
        serving = ServingTLS(self.serving_pair, [cas] if cas is not None else [])
        self.files.watch(self.serving_pair)
        server = GoServer(self.handler_chain(), access_log=None, handler_cancellation=True)
        runner = web.ServerRunner(server, shutdown_timeout=self.options.request_timeout)
        await runner.setup()
        site = web.TCPSite(runner, self.options.bind_address, self.options.secure_port,
                           ssl_context=serving.context, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            await self.stop()
            raise
        log.info("serving securely", address=self.options.bind_address,
                 port=self.options.secure_port)
        await self.lifecycle.start(self._post_start())
        await stop.wait()
        self.lifecycle.begin_shutdown()
        self.stopping.set()
        await site.stop()
        await self.in_flight.wait_idle(self.options.request_timeout)
        await runner.cleanup()
        await self.stop()


def _subresource(handler: SubresourceHandler) -> SubresourceFactory:
    """A declared subresource's handler, given the resource's store when it is served."""

    def make(endpoints: ResourceEndpoints) -> EndpointHandler:
        async def serve(request: web.BaseRequest, info: RequestInfo) -> web.StreamResponse:
            response: web.StreamResponse = await handler(request, info, endpoints.store)
            return response

        return serve

    return make
