"""``gateway serve``: the development PKI, the HTTPS listener, and a graceful stop.

On SIGTERM or SIGINT the gateway fails /readyz, waits --shutdown-delay-duration, stops
accepting connections, gives in-flight requests up to --request-timeout to finish, then closes
the watch caches and the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import ipaddress
import resource
import signal
import socket
import urllib.parse

import structlog
from aiohttp import web

from gateway import pki
from gateway.aggregator.fastlane import FastLane
from gateway.apimachinery.dynamicfile import FileContentError
from gateway.app.gateway import Gateway
from gateway.auth.audit.policy import PolicyError
from gateway.auth.authn.serviceaccount import KeyFileError
from gateway.auth.authn.tokens import TokenFileError
from gateway.options import ServeOptions
from gateway.server.httpserver import TLS_HANDSHAKE_TIMEOUT, GoServer
from gateway.server.tls import ServingTLS, SNIPair, serving_pair_file
from gateway.storage.errors import StorageError
from gateway.transport.clients import ClientCertError

log = structlog.get_logger(__name__)


class StartupError(Exception):
    """The gateway cannot start; the message is the one line the user sees."""


def server_url(options: ServeOptions) -> str:
    """Where a local client reaches this gateway (the admin kubeconfig's server): the bound
    address itself, or 127.0.0.1 when it listens on every address (a gateway bound to
    127.0.0.2 or ::1 is not reachable on 127.0.0.1)."""
    address = ipaddress.ip_address(options.bind_address)
    host = "127.0.0.1" if address.is_unspecified else str(address)
    if ":" in host:
        host = f"[{host}]"
    return f"https://{host}:{options.secure_port}"


def _answers(url: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``url``'s host and port."""
    parsed = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 443), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def publish_admin_kubeconfig(options: ServeOptions) -> None:
    """Point the development PKI's admin kubeconfig at this gateway, once it listens, unless
    it points at another gateway that is running (a second gateway sharing --cert-dir)."""
    if not options.dev_pki:
        return
    paths, url = pki.DevPKI.at(options.cert_dir), server_url(options)
    current = pki.kubeconfig_server(paths.kubeconfig)
    if current not in (None, url) and _answers(current):
        log.warning("admin.kubeconfig points at another running gateway; left as it is",
                    kubeconfig=str(paths.kubeconfig), server=current)
        return
    try:
        pki.write_admin_kubeconfig(paths, url)
    except (OSError, pki.PKIError) as err:
        log.warning("cannot write admin.kubeconfig", kubeconfig=str(paths.kubeconfig),
                    error=str(err))
        return
    log.info("admin kubeconfig ready", kubeconfig=str(paths.kubeconfig), server=url)


def complete_with_dev_pki(options: ServeOptions) -> ServeOptions:
    """With no serving certificate given, make (or reuse) the development PKI and default
    every certificate flag to it: serving pair, client CA, front proxy, service accounts."""
    if options.tls_cert_file is not None:
        return options
    address = ipaddress.ip_address(options.bind_address)
    sans = list(options.tls_sans)
    if not address.is_unspecified and str(address) not in pki.DEFAULT_SERVING_SANS:
        sans.append(str(address))  # e.g. 127.0.0.2: the kubeconfig's server must be named
    try:
        # the kubeconfig waits for the listener: a gateway that fails to start changes it not
        dev = pki.ensure_dev_pki(options.cert_dir, sans=sans, server_url=None)
    except pki.PKIError as err:
        raise StartupError(str(err)) from None
    log.info("development PKI ready", cert_dir=str(options.cert_dir))
    return dataclasses.replace(
        options,
        dev_pki=True,
        tls_cert_file=dev.serving_cert,
        tls_private_key_file=dev.serving_key,
        client_ca_file=options.client_ca_file or dev.ca_cert,
        requestheader_client_ca_file=options.requestheader_client_ca_file
        or dev.front_proxy_ca_cert,
        requestheader_allowed_names=options.requestheader_allowed_names
        or ["front-proxy-client"],
        proxy_client_cert_file=options.proxy_client_cert_file or dev.front_proxy_client_cert,
        proxy_client_key_file=options.proxy_client_key_file or dev.front_proxy_client_key,
        service_account_key_files=options.service_account_key_files or [dev.sa_public_key],
        service_account_signing_key_file=options.service_account_signing_key_file
        or dev.sa_private_key,
    )


class LaneSite(web.TCPSite):
    """aiohttp's TCP site, its connections first served by the proxy's fast lane (which hands
    them to aiohttp's protocol at the first request it does not take), TLS handshakes given
    Go's time (gateway/server/httpserver.py)."""

    lane: FastLane | None = None

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        factory = server if self.lane is None else self.lane.protocol_factory(server)
        self._server = await asyncio.get_running_loop().create_server(
            factory, self._host, self._port, ssl=self._ssl_context,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT, backlog=self._backlog,
            reuse_address=self._reuse_address, reuse_port=self._reuse_port)
        if self.lane is not None:
            self.lane.start()


def raise_open_file_limit() -> None:
    """The soft limit on open files raised to the hard one, as Go (1.19 and later) does at
    start for kube-apiserver: every connection holds a file descriptor, and thousands of
    idle ones must not keep others out."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as err:
        log.warning("cannot raise the open file limit", error=str(err))


async def serve(options: ServeOptions, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set or a SIGTERM/SIGINT arrives."""
    options = complete_with_dev_pki(options)
    assert options.tls_cert_file and options.tls_private_key_file
    try:
        pair = serving_pair_file(options.tls_cert_file, options.tls_private_key_file)
        sni = [SNIPair(serving_pair_file(named.cert_file, named.key_file, "--tls-sni-cert-key"),
                       named.names) for named in options.tls_sni_cert_keys]
    except FileContentError as err:
        raise StartupError(f"cannot load {err}") from None

    try:
        gateway = Gateway(options)
    except (TokenFileError, KeyFileError, pki.PKIError, PolicyError, ClientCertError,
            FileContentError) as err:
        raise StartupError(str(err)) from None
    except OSError as err:
        raise StartupError(f"{err.filename}: {err.strerror}") from None
    # the serving certificate and the client CAs (the authenticators' own) are followed by
    # the gateway's file watcher: new connections get the new ones
    security = gateway.security
    serving = ServingTLS(pair, [ca for ca in (security.client_ca, security.requestheader_ca)
                                if ca is not None], sni)
    gateway.files.watch(*serving.files())
    ssl_context = serving.context
    try:
        await gateway.start()
    except StorageError as err:
        raise StartupError(str(err)) from None

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    raise_open_file_limit()
    # handler_cancellation: a watch whose client went away ends at once, not at its timeout
    server = GoServer(gateway.handler, access_log=None, handler_cancellation=True)
    runner = web.ServerRunner(server, shutdown_timeout=options.request_timeout)
    await runner.setup()
    site = LaneSite(runner, options.bind_address, options.secure_port,
                    ssl_context=ssl_context, reuse_address=True,
                    shutdown_timeout=options.request_timeout)
    site.lane = gateway.fast_lane
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        await gateway.stop()
        raise StartupError(
            f"--secure-port: cannot listen on {options.bind_address}:{options.secure_port}: "
            f"{err.strerror or err}"
        ) from None
    gateway.begin_post_start()
    # what start-up built (schemas, routes, the watch caches' first lists) is kept for good:
    # frozen, the garbage collector's full passes need not walk it again (measured on the
    # proxy's fast lane: 13 us of collection per request before, 3 after)
    gc.freeze()
    await asyncio.to_thread(publish_admin_kubeconfig, options)
    log.info("serving securely", address=options.bind_address, port=options.secure_port,
             storage=gateway.storage_description)

    await stop.wait()
    log.info("shutting down: failing /readyz, draining requests",
             delay_seconds=options.shutdown_delay_duration)
    gateway.begin_shutdown()
    if options.shutdown_delay_duration:
        await asyncio.sleep(options.shutdown_delay_duration)
    await site.stop()  # no new connections
    if gateway.fast_lane is not None:
        gateway.fast_lane.close_idle()
    if not await gateway.in_flight.wait_idle(options.request_timeout):
        log.warning("in-flight requests did not finish in time", left=gateway.in_flight.count)
    if gateway.fast_lane is not None:
        gateway.fast_lane.stop()
    await runner.cleanup()
    await gateway.stop()
    log.info("stopped")
