"""What only the etcd store has: its keys, TLS, restarts, big objects, quotas, endpoints."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import uuid
from pathlib import Path

import grpc
import pytest
from aetcd import rpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateway.storage.errors import (
    KeyNotFoundError,
    StorageInternalError,
    StorageUnavailableError,
    TooOldResourceVersionError,
)
from gateway.storage.etcd3 import EtcdConfig, EtcdStorage
from gateway.storage.interface import EventType
from tests.support.etcd import EtcdServer
from tests.support.gateway import free_port

P = "/core/configmaps/"


def cm(name: str, size: int = 10) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": "x" * size}}


async def open_etcd(server: EtcdServer, **kwargs) -> EtcdStorage:
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    store = EtcdStorage(EtcdConfig(servers=(server.endpoint,), prefix=prefix, **kwargs))
    await store.start()
    return store


async def test_keys_live_under_the_etcd_prefix(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        await store.create(P + "default/a", cm("a"))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{etcd_server.port}") as channel:
            resp = await rpc.KVStub(channel).Range(
                rpc.RangeRequest(key=f"{store.prefix}{P}default/a".encode())
            )
        assert len(resp.kvs) == 1
        assert b"resourceVersion" not in resp.kvs[0].value
    finally:
        await store.close()


async def test_a_watch_survives_an_etcd_restart_without_loss_or_repeats():
    with EtcdServer() as server:
        store = await open_etcd(server, request_timeout=3)
        try:
            watch = await store.watch(P)
            before = [await store.create(P + f"default/b{i}", cm(f"b{i}")) for i in range(3)]
            server.stop()
            await asyncio.sleep(0.5)
            server.start()
            after = []
            for i in range(3):
                for _ in range(50):  # the client reconnects on its own
                    try:
                        after.append(await store.create(P + f"default/a{i}", cm(f"a{i}")))
                        break
                    except StorageUnavailableError:
                        await asyncio.sleep(0.2)
            expected = [int(o["metadata"]["resourceVersion"]) for o in before + after]
            got = []
            while len(got) < 6:
                event = await asyncio.wait_for(anext(watch), 30)
                if event.type != EventType.BOOKMARK:
                    got.append(event.revision)
            assert got == expected
            watch.stop()
        finally:
            await store.close()


async def test_a_watch_that_is_not_read_stays_bounded(etcd_server):
    store = await open_etcd(etcd_server, watch_buffer=16)
    try:
        watch = await store.watch(P)
        for start in range(0, 200, 50):
            await asyncio.gather(
                *(store.create(P + f"default/o{i}", cm(f"o{i}")) for i in range(start, start + 50))
            )
        await asyncio.sleep(0.5)
        assert watch.qsize() <= 16
        got = []
        while len(got) < 200:  # and nothing was lost while it pushed back
            event = await asyncio.wait_for(anext(watch), 10)
            if event.type != EventType.BOOKMARK:
                got.append(event.key)
        assert len(set(got)) == 200
        watch.stop()
    finally:
        await store.close()


async def test_objects_over_four_megabytes_round_trip():
    with EtcdServer(extra_args=["--max-request-bytes", str(12 * 1024 * 1024)]) as server:
        store = await open_etcd(server)
        try:
            for i in range(2):
                await store.create(P + f"default/big{i}", cm(f"big{i}", size=5 * 1024 * 1024))
            listed = await store.list(P)
            assert [len(o["data"]["v"]) for o in listed.items] == [5 * 1024 * 1024] * 2
        finally:
            await store.close()


def _issue(subject: str, key, issuer_cert, issuer_key, *, ca: bool, usage=None):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_cert.subject if issuer_cert else
                     x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
        ]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_pair(directory: Path, name: str, cert, key) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_tls_with_client_certificates(tmp_path):
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("test-etcd-ca", ca_key, None, ca_key, ca=True)
    ca_path, _ = _write_pair(tmp_path, "ca", ca, ca_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _issue("etcd", server_key, ca, ca_key, ca=False,
                         usage=[ExtendedKeyUsageOID.SERVER_AUTH])
    s_cert, s_key = _write_pair(tmp_path, "server", server_cert, server_key)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _issue("gateway", client_key, ca, ca_key, ca=False,
                         usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    c_cert, c_key = _write_pair(tmp_path, "client", client_cert, client_key)
    with EtcdServer(tls={"cert": s_cert, "key": s_key, "ca": ca_path}) as server:
        assert server.endpoint.startswith("https://")
        store = await open_etcd(server, ca_file=str(ca_path), cert_file=str(c_cert),
                                key_file=str(c_key))
        try:
            made = await store.create(P + "default/tls", cm("tls"))
            assert await store.get(P + "default/tls") == made
            await store.check_health()
        finally:
            await store.close()
        # without a client certificate etcd refuses the connection
        anonymous = await open_etcd(server, ca_file=str(ca_path), request_timeout=3)
        try:
            with pytest.raises(StorageUnavailableError):
                await anonymous.check_health()
        finally:
            await anonymous.close()


async def test_database_space_exceeded_fails_the_write_and_keeps_the_rest():
    with EtcdServer(extra_args=["--quota-backend-bytes", str(1024 * 1024)]) as server:
        store = await open_etcd(server)
        try:
            first = await store.create(P + "default/first", cm("first"))
            with pytest.raises(StorageInternalError, match="database space exceeded"):
                for i in range(100):
                    await store.create(P + f"default/big{i}", cm(f"big{i}", size=600_000))
            with pytest.raises(KeyNotFoundError):
                await store.get(P + f"default/big{i}")
            assert await store.get(P + "default/first") == first
        finally:
            await store.close()


async def test_an_unreachable_etcd_is_unavailable_quickly():
    store = EtcdStorage(EtcdConfig(servers=(f"http://127.0.0.1:{free_port()}",),
                                   request_timeout=2))
    await store.start()
    try:
        with pytest.raises(StorageUnavailableError):
            await store.check_health()
        with pytest.raises(StorageUnavailableError):
            await store.get(P + "default/x")
    finally:
        await store.close()


async def test_a_dead_first_endpoint_fails_over_to_the_next(etcd_server):
    dead = f"http://127.0.0.1:{free_port()}"
    store = EtcdStorage(EtcdConfig(servers=(dead, etcd_server.endpoint),
                                   prefix=f"/t-{uuid.uuid4().hex[:10]}", request_timeout=3))
    await store.start()
    try:
        made = await store.create(P + "default/x", cm("x"))
        assert await store.get(P + "default/x") == made
        watch = await store.watch(P)
        later = await store.create(P + "default/y", cm("y"))
        event = await asyncio.wait_for(anext(watch), 10)
        assert event.revision == int(later["metadata"]["resourceVersion"])
        watch.stop()
    finally:
        await store.close()


async def test_replicas_take_turns_compacting_like_kube_apiservers():
    with EtcdServer() as server:
        a, b = await open_etcd(server), await open_etcd(server)
        try:
            version_a, seen_a = await a.compact_step(0, 0)  # bootstrap: nothing compacted
            version_b, _ = await b.compact_step(0, 0)  # lost the race: learns the version
            assert (version_a, version_b) == (1, 1)
            old = await a.create(P + "default/old", cm("old"))
            for i in range(5):
                await a.create(P + f"default/n{i}", cm(f"n{i}"))
            version_a, _ = await a.compact_step(version_a, seen_a + 1)
            assert version_a == 2
            with pytest.raises(TooOldResourceVersionError):
                await a.list(P, revision=int(old["metadata"]["resourceVersion"]) - 1)
            # b's view is stale: it neither compacts nor fails, it catches up
            version_b, _ = await b.compact_step(version_b, await b.current_revision())
            assert version_b == 2
            assert len((await a.list(P)).items) == 6
        finally:
            await a.close()
            await b.close()
