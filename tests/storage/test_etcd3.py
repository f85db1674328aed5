"""What only the etcd store has: its keys, TLS, restarts, big objects, quotas, endpoints.

Real etcd only. Tests that need no special etcd share the session's ``etcd_server`` (see
conftest.py), each under its own key prefix; the others start an etcd of their own.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from aetcd import rpc

from gateway.storage.errors import (
    FutureRevisionError,
    KeyNotFoundError,
    StorageInternalError,
    StorageUnavailableError,
    TooOldResourceVersionError,
)
from gateway.storage.etcd3 import EtcdConfig, EtcdStorage
from gateway.storage.interface import EventType, WatchEvent
from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, issue_pair, write_pair
from tests.support.etcd import EtcdServer, free_ports

P = "/core/configmaps/"


def cm(name: str, size: int = 10) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": "x" * size}}


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def dead_endpoint() -> str:
    """A loopback URL nothing listens on: connections are refused at once."""
    return f"http://127.0.0.1:{free_ports(1)[0]}"


async def open_etcd(server: EtcdServer, **kwargs) -> EtcdStorage:
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    store = EtcdStorage(EtcdConfig(servers=(server.endpoint,), prefix=prefix, **kwargs))
    await store.start()
    return store


async def next_change(watch, timeout: float = 10.0) -> WatchEvent:
    while True:
        event = await asyncio.wait_for(anext(watch), timeout)
        if event.type != EventType.BOOKMARK:
            return event


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def retry_while_unavailable(make, attempts: int = 100):
    """Await ``make()`` until etcd is back (the store reconnects on its own)."""
    for _ in range(attempts):
        try:
            return await make()
        except StorageUnavailableError:
            await asyncio.sleep(0.1)
    raise AssertionError("etcd did not come back")


# -- keys -----------------------------------------------------------------------------------


async def test_keys_live_under_the_etcd_prefix_and_come_back_without_it(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        watch = await store.watch(P)
        made = await store.create(P + "default/a", cm("a"))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{etcd_server.port}") as channel:
            resp = await rpc.KVStub(channel).Range(
                rpc.RangeRequest(key=f"{store.prefix}{P}default/a".encode())
            )
        assert len(resp.kvs) == 1 and resp.kvs[0].mod_revision == rv(made)
        assert b"resourceVersion" not in resp.kvs[0].value
        assert (await next_change(watch)).key == P + "default/a"
        page = await store.list(P, limit=1)
        assert page.items == [made] and page.continue_token == ""
        watch.stop()
    finally:
        await store.close()


# -- watch ----------------------------------------------------------------------------------


async def test_a_watch_survives_an_etcd_restart_without_loss_or_repeats():
    with EtcdServer() as server:
        store = await open_etcd(server, request_timeout=3)
        try:
            watch = await store.watch(P)
            before = [await store.create(P + f"default/b{i}", cm(f"b{i}")) for i in range(3)]
            server.stop()
            await asyncio.sleep(0.5)  # the stream breaks; the watch starts retrying
            server.start()
            after = [
                await retry_while_unavailable(
                    lambda i=i: store.create(P + f"default/a{i}", cm(f"a{i}")))
                for i in range(3)
            ]
            got = [(await next_change(watch, 30)).revision for _ in range(6)]
            assert got == [rv(o) for o in before + after]
            with pytest.raises(asyncio.TimeoutError):  # and nothing more: no repeats
                await next_change(watch, 0.5)
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
        got = [(await next_change(watch)).key for _ in range(200)]
        assert len(set(got)) == 200  # and nothing was lost while it pushed back
        watch.stop()
    finally:
        await store.close()


async def test_a_watch_compacted_while_away_ends_with_too_old():
    """The consumer holds the watch still (a full buffer), etcd restarts and is compacted
    past the watch's position: the resumed watch ends with an ERROR, after what it had."""
    with EtcdServer() as server:
        store = await open_etcd(server, watch_buffer=2, request_timeout=3)
        try:
            watch = await store.watch(P)
            made = [await store.create(P + f"default/o{i}", cm(f"o{i}")) for i in range(5)]
            await eventually(lambda: watch.qsize() == 2)
            server.restart()
            for i in range(5):
                made.append(await retry_while_unavailable(
                    lambda i=i: store.create(P + f"default/n{i}", cm(f"n{i}"))))
            await store.compact(await store.current_revision())
            events = [event async for event in watch]
            assert events[-1].type == EventType.ERROR
            assert isinstance(events[-1].error, TooOldResourceVersionError)
            assert events[-1].error.compacted == rv(made[-1])
            delivered = [e.revision for e in events[:-1] if e.type != EventType.BOOKMARK]
            assert 2 <= len(delivered) <= 5
            assert delivered == [rv(o) for o in made[: len(delivered)]]
        finally:
            await store.close()


async def test_a_watch_from_a_compacted_revision_names_the_compaction(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        first = await store.create(P + "default/a", cm("a"))
        head = rv(await store.create(P + "default/b", cm("b")))
        await store.compact(head)
        with pytest.raises(TooOldResourceVersionError) as caught:
            await store.watch(P, revision=rv(first) - 1)
        assert caught.value.requested == rv(first) - 1
        assert caught.value.compacted >= head  # the shared etcd may be compacted further
        assert caught.value.current >= head
    finally:
        await store.close()


async def test_a_progress_request_is_answered_with_a_bookmark(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        watch = await store.watch(P)
        made = await store.create(P + "default/a", cm("a"))
        assert (await next_change(watch)).revision == rv(made)
        await watch.request_progress()
        event = await asyncio.wait_for(anext(watch), 10)
        assert event.type == EventType.BOOKMARK and event.object is None
        assert event.revision >= rv(made)
        watch.stop()
    finally:
        await store.close()


# -- lists ----------------------------------------------------------------------------------


async def test_lists_at_future_and_compacted_revisions(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        for i in range(3):
            await store.create(P + f"default/o{i}", cm(f"o{i}"))
        page = await store.list(P, limit=1)
        assert page.remaining == 2
        head = await store.current_revision()
        with pytest.raises(FutureRevisionError) as future:
            await store.list(P, revision=head + 100)
        assert (future.value.requested, future.value.current) == (head + 100, head)

        await store.create(P + "default/later", cm("later"))
        await store.compact(await store.current_revision())
        with pytest.raises(TooOldResourceVersionError) as old:
            await store.list(P, limit=1, continue_token=page.continue_token)
        assert old.value.requested == page.revision
        assert old.value.compacted > page.revision
        with pytest.raises(TooOldResourceVersionError):
            await store.list(P, revision=head)
    finally:
        await store.close()


async def test_objects_over_four_megabytes_round_trip():
    with EtcdServer(extra_args=["--max-request-bytes", str(8 * 1024 * 1024)]) as server:
        store = await open_etcd(server)
        try:
            made = [await store.create(P + f"default/big{i}", cm(f"big{i}", size=5 * 2**20))
                    for i in range(2)]
            listed = await store.list(P)  # one 10 MB response
            assert listed.items == made
            assert await store.get(P + "default/big1") == made[1]
        finally:
            await store.close()


# -- TLS ------------------------------------------------------------------------------------


def _pki(directory: Path) -> dict[str, Path]:
    """A throwaway CA, a server pair for 127.0.0.1/localhost, and a client pair."""
    ca = Issuer.new("test-etcd-ca")
    paths = {"ca": write_pair(directory, "ca", ca.cert, ca.key).cert}
    for name, usage in (("server", SERVER_AUTH), ("client", CLIENT_AUTH)):
        pair = issue_pair(directory, name, name, ca, usages=(usage,),
                          sans=("localhost", "127.0.0.1"))
        paths[f"{name}_cert"], paths[f"{name}_key"] = pair.cert, pair.key
    return paths


async def test_tls_with_client_certificates(tmp_path):
    pki = _pki(tmp_path)
    tls = {"cert": pki["server_cert"], "key": pki["server_key"], "ca": pki["ca"]}
    with EtcdServer(tls=tls) as server:
        assert server.endpoint.startswith("https://")
        store = await open_etcd(server, ca_file=str(pki["ca"]),
                                cert_file=str(pki["client_cert"]),
                                key_file=str(pki["client_key"]))
        try:
            made = await store.create(P + "default/tls", cm("tls"))
            assert await store.get(P + "default/tls") == made
            watch = await store.watch(P, revision=rv(made) - 1)
            assert (await next_change(watch)).object == made
            watch.stop()
            await store.check_health()
        finally:
            await store.close()
        # without a client certificate etcd refuses the connection
        anonymous = await open_etcd(server, ca_file=str(pki["ca"]), request_timeout=3)
        try:
            with pytest.raises(StorageUnavailableError):
                await anonymous.check_health()
        finally:
            await anonymous.close()


async def test_start_refuses_unusable_configuration(tmp_path):
    not_pem = tmp_path / "ca.crt"
    not_pem.write_text("not a certificate")
    bad = [
        EtcdConfig(servers=()),
        EtcdConfig(servers=("127.0.0.1:2379",)),
        EtcdConfig(servers=("ftp://127.0.0.1:2379",)),
        EtcdConfig(servers=("https://127.0.0.1:2379",), ca_file=str(tmp_path / "missing")),
        EtcdConfig(servers=("https://127.0.0.1:2379",), ca_file=str(not_pem)),
        EtcdConfig(servers=("https://127.0.0.1:2379",), cert_file=str(not_pem)),
    ]
    for config in bad:
        store = EtcdStorage(config)
        with pytest.raises(StorageInternalError):
            await store.start()
        await store.close()


# -- failures -------------------------------------------------------------------------------


async def test_database_space_exceeded_fails_the_write_and_keeps_the_rest():
    with EtcdServer(quota_backend_bytes=1024 * 1024) as server:
        store = await open_etcd(server)
        try:
            first = await store.create(P + "default/first", cm("first"))
            with pytest.raises(StorageInternalError, match="database space exceeded"):
                for i in range(100):
                    await store.create(P + f"default/big{i}", cm(f"big{i}", size=600_000))
            assert i > 0
            with pytest.raises(KeyNotFoundError):
                await store.get(P + f"default/big{i}")
            assert await store.get(P + "default/first") == first
            assert (await store.get(P + "default/big0"))["data"]["v"] == "x" * 600_000
        finally:
            await store.close()


async def test_an_unreachable_etcd_is_unavailable_quickly():
    store = EtcdStorage(EtcdConfig(servers=(dead_endpoint(),), request_timeout=2))
    await store.start()
    try:
        began = time.monotonic()
        with pytest.raises(StorageUnavailableError):
            await store.check_health()
        with pytest.raises(StorageUnavailableError):
            await store.get(P + "default/x")
        with pytest.raises(StorageUnavailableError):
            await store.create(P + "default/x", cm("x"))
        with pytest.raises(StorageUnavailableError):
            await store.watch(P)
        assert time.monotonic() - began < 2
    finally:
        await store.close()


async def test_a_dead_first_endpoint_fails_over_to_the_next(etcd_server):
    store = EtcdStorage(EtcdConfig(servers=(dead_endpoint(), etcd_server.endpoint),
                                   prefix=f"/t-{uuid.uuid4().hex[:10]}", request_timeout=3))
    await store.start()
    try:
        made = await store.create(P + "default/x", cm("x"))
        assert await store.get(P + "default/x") == made
        watch = await store.watch(P)
        later = await store.create(P + "default/y", cm("y"))
        assert (await next_change(watch)).revision == rv(later)
        watch.stop()
    finally:
        await store.close()


async def test_an_endpoint_that_never_answers_is_left_after_one_timeout(etcd_server):
    """A host that accepts connections and then says nothing costs one request timeout,
    not one per request."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # never accepted: TCP connects, gRPC never hears back
        servers = (f"http://127.0.0.1:{silent.getsockname()[1]}", etcd_server.endpoint)
        store = EtcdStorage(EtcdConfig(servers=servers, prefix=f"/t-{uuid.uuid4().hex[:10]}",
                                       request_timeout=1))
        await store.start()
        try:
            with pytest.raises(StorageUnavailableError):
                await store.get(P + "default/x")
            made = await store.create(P + "default/x", cm("x"))
            assert await store.get(P + "default/x") == made
        finally:
            await store.close()


async def test_closing_the_store_ends_its_watches(etcd_server):
    store = await open_etcd(etcd_server)
    watch = await store.watch(P)
    await store.close()
    assert [event async for event in watch] == []
    with pytest.raises(StorageUnavailableError):
        await store.get(P + "default/x")


# -- compaction among replicas --------------------------------------------------------------


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
                await a.list(P, revision=rv(old) - 1)
            # b's view is stale: it neither compacts nor fails, it catches up
            version_b, _ = await b.compact_step(version_b, await b.current_revision())
            assert version_b == 2
            assert len((await a.list(P)).items) == 6
        finally:
            await a.close()
            await b.close()
