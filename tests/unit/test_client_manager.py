"""The outgoing client manager against a real mTLS backend: TLS contexts cached, the server
name checked as the Service's while the connection goes to an address, the proxy client
certificate presented and reloaded when its files change, connections pooled without a cap."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import aiohttp
import pytest

from gateway.transport.clients import ClientManager, timeout
from tests.support.certs import CLIENT_AUTH, issue_pair
from tests.support.inprocess import PKI, PROXY_CLIENT_CN, SERVER_NAME, Backend
from tests.support.wait import eventually_async


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    return PKI.make(tmp_path)


@pytest.fixture
async def backend(pki: PKI):
    server = await Backend(pki).start()
    yield server
    await server.stop()


@pytest.fixture
async def manager(pki: PKI):
    clients = ClientManager(pki.proxy_client.cert, pki.proxy_client.key, reload_interval=0)
    yield clients
    await clients.close()


async def _get(clients: ClientManager, backend: Backend, path: str, *,
               context: ssl.SSLContext, server_name: str = SERVER_NAME) -> int:
    async with clients.session().get(
            f"https://127.0.0.1:{backend.port}{path}", ssl=context,
            server_hostname=server_name, timeout=timeout(10)) as response:
        await response.read()
        return response.status


def test_contexts_are_cached_per_bundle_and_certificate(pki: PKI) -> None:
    clients = ClientManager(pki.proxy_client.cert, pki.proxy_client.key)
    a = clients.context(pki.ca_bundle, client_cert=True)
    assert clients.context(pki.ca_bundle, client_cert=True) is a
    assert clients.context(pki.ca_bundle) is not a
    assert clients.context(b"", insecure=True, client_cert=True) is not a
    assert clients.context(b"", insecure=True).verify_mode == ssl.CERT_NONE


async def test_mtls_with_the_service_name_on_an_address(manager: ClientManager,
                                                        backend: Backend, pki: PKI) -> None:
    context = manager.context(pki.ca_bundle, client_cert=True)
    assert await _get(manager, backend, "/apis/g/v1/echo", context=context) == 200
    assert backend.received[-1]["client_cn"] == PROXY_CLIENT_CN
    # nothing of aiohttp's own is added to what the caller sends
    names = {k.lower() for k, _ in backend.headers_of()}
    assert not names & {"user-agent", "accept-encoding", "accept", "content-type"}


async def test_the_certificate_must_name_the_service(manager: ClientManager, backend: Backend,
                                                     pki: PKI) -> None:
    context = manager.context(pki.ca_bundle, client_cert=True)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await _get(manager, backend, "/apis/g/v1/echo", context=context,
                   server_name="other.backends.svc")
    # nor is an address enough: the certificate names only the Service
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        async with manager.session().get(f"https://127.0.0.1:{backend.port}/",
                                         ssl=context, timeout=timeout(10)):
            pass


async def test_an_untrusted_backend_is_refused(manager: ClientManager, backend: Backend) -> None:
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await _get(manager, backend, "/", context=manager.context(b"", client_cert=True))
    # insecure skips verification but still presents the client certificate
    context = manager.context(b"", insecure=True, client_cert=True)
    assert await _get(manager, backend, "/apis/g/v1/echo", context=context) == 200


async def test_without_a_client_certificate_the_backend_refuses(pki: PKI,
                                                                backend: Backend) -> None:
    clients = ClientManager()
    try:
        with pytest.raises((aiohttp.ClientError, ssl.SSLError, OSError)):
            await _get(clients, backend, "/apis/g/v1/echo",
                       context=clients.context(pki.ca_bundle, client_cert=True))
    finally:
        await clients.close()


async def test_the_client_certificate_is_reloaded_when_its_files_change(
        manager: ClientManager, backend: Backend, pki: PKI, tmp_path: Path) -> None:
    context = manager.context(pki.ca_bundle, client_cert=True)
    assert await _get(manager, backend, "/apis/g/v1/echo", context=context) == 200
    assert backend.received[-1]["client_cn"] == PROXY_CLIENT_CN

    rotated = issue_pair(tmp_path / "rotated", "c", "rotated-client", pki.proxy_ca,
                         usages=(CLIENT_AUTH,))
    pki.proxy_client.cert.write_bytes(rotated.cert.read_bytes())
    pki.proxy_client.key.write_bytes(rotated.key.read_bytes())
    os.utime(pki.proxy_client.cert, ns=(1, 1))  # a different stamp even on coarse clocks

    context = manager.context(pki.ca_bundle, client_cert=True)
    assert await _get(manager, backend, "/apis/g/v1/echo", context=context) == 200
    assert backend.received[-1]["client_cn"] == "rotated-client"

    # a half-written rotation is not loaded: the last good pair stays
    pki.proxy_client.key.write_bytes(b"-----BEGIN PRIVATE KEY-----\ngarbage\n")
    os.utime(pki.proxy_client.key, ns=(2, 2))
    context = manager.context(pki.ca_bundle, client_cert=True)
    assert await _get(manager, backend, "/apis/g/v1/echo", context=context) == 200
    assert backend.received[-1]["client_cn"] == "rotated-client"


async def test_connections_are_reused(manager: ClientManager, backend: Backend,
                                      pki: PKI) -> None:
    context = manager.context(pki.ca_bundle, client_cert=True)
    for _ in range(5):
        assert await _get(manager, backend, "/apis/g/v1/echo", context=context) == 200
    connector = manager.session().connector
    assert connector is not None
    assert sum(len(v) for v in connector._conns.values()) == 1  # one idle, kept alive


async def test_no_cap_on_open_connections(manager: ClientManager, backend: Backend,
                                          pki: PKI) -> None:
    """More long-running calls at once than aiohttp's default pool of 100 allows."""
    context = manager.context(pki.ca_bundle, client_cert=True)
    count = 110
    session = manager.session()
    responses = []

    async def open_watch() -> None:
        response = await session.get(f"https://127.0.0.1:{backend.port}/apis/g/v1/watch",
                                     ssl=context, server_hostname=SERVER_NAME,
                                     timeout=timeout(None))
        await response.content.readline()  # the first event: the call is open
        responses.append(response)

    await asyncio.wait_for(asyncio.gather(*(open_watch() for _ in range(count))), 60)
    assert len(responses) == count
    backend.release.set()
    for response in responses:
        assert b'"n":2' in await response.content.readline()
        response.release()
    await eventually_async(lambda: len(responses) == count)
