"""What only the etcd store has: its keys, TLS, restarts, big objects, quotas, endpoints.

Real etcd only. Tests that need no special etcd share the session's ``etcd_server`` (see
conftest.py), each under its own key prefix; the others start an etcd of their own.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from pathlib import Path

import grpc
import pytest
import structlog
from aetcd import rpc

from gateway.storage.errors import (
    FutureRevisionError,
    StorageInternalError,
    StorageUnavailableError,
    TooOldResourceVersionError,
)
from gateway.storage.etcd3 import EtcdConfig, EtcdStorage
from gateway.storage.interface import EventType
from tests.storage.helpers import (
    P,
    changes,
    drain,
    expect_next_is_only,
    key,
    next_change,
    retry_while_unavailable,
)
from tests.support.api import rv, sized_configmap
from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, issue_pair, write_pair
from tests.support.etcd import EtcdServer, free_ports
from tests.support.wait import eventually_async


def dead_endpoint() -> str:
    """A loopback URL nothing listens on: connections are refused at once."""
    return f"http://127.0.0.1:{free_ports(1)[0]}"


async def open_etcd(server: EtcdServer, **kwargs) -> EtcdStorage:
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    store = EtcdStorage(EtcdConfig(servers=(server.endpoint,), prefix=prefix, **kwargs))
    await store.start()
    return store


# -- keys -----------------------------------------------------------------------------------


async def test_keys_live_under_the_etcd_prefix_and_come_back_without_it(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        watch = await store.watch(P)
        made = await store.create(key("a"), sized_configmap("a"))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{etcd_server.port}") as channel:
            resp = await rpc.KVStub(channel).Range(
                rpc.RangeRequest(key=f"{store.prefix}{P}default/a".encode())
            )
        assert len(resp.kvs) == 1 and resp.kvs[0].mod_revision == rv(made)
        assert b"resourceVersion" not in resp.kvs[0].value
        assert (await next_change(watch)).key == key("a")
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
            before = [await store.create(key(f"b{i}"), sized_configmap(f"b{i}")) for i in range(3)]
            assert [e.revision for e in await changes(watch, 3)] == [rv(o) for o in before]
            with structlog.testing.capture_logs() as logs:
                server.stop()
                broken = await eventually_async(
                    lambda: [e for e in logs if e["event"] == "etcd watch interrupted; resuming"],
                    what="the watch to notice the broken stream")
            assert broken[0]["from_revision"] == rv(before[-1]) + 1
            server.start()
            after = [
                await retry_while_unavailable(
                    lambda i=i: store.create(key(f"a{i}"), sized_configmap(f"a{i}")))
                for i in range(3)
            ]
            assert [e.revision for e in await changes(watch, 3)] == [rv(o) for o in after]
            await expect_next_is_only(store, watch)  # and nothing more: no repeats
            watch.stop()
        finally:
            await store.close()


async def test_a_watch_ends_unavailable_after_an_outage_longer_than_an_election():
    """etcd gone for longer than OUTAGE_GRACE: the watch ends with StorageUnavailableError
    after every event it had; a watch from the last one delivered goes on without loss or
    repeats once etcd is back (what the watch cache does, keeping its window)."""
    with EtcdServer() as server:
        store = await open_etcd(server, request_timeout=1)
        try:
            watch = await store.watch(P)
            before = [await store.create(key(f"b{i}"), sized_configmap(f"b{i}")) for i in range(3)]
            # the events the watch had when etcd went: every one must come out before the error
            # (a create's reply can beat its event down the watch stream, so wait for them)
            await eventually_async(lambda: watch.qsize() >= 3, what="the three events to arrive")
            server.stop()
            events = await asyncio.wait_for(drain(watch), timeout=30)
            assert [e.revision for e in events if e.type != EventType.BOOKMARK][:3] == \
                [rv(o) for o in before]
            assert events[-1].type == EventType.ERROR
            assert isinstance(events[-1].error, StorageUnavailableError), events[-1].error
            server.start()
            resumed = await retry_while_unavailable(
                lambda: store.watch(P, revision=rv(before[-1])))
            after = await retry_while_unavailable(
                lambda: store.create(key("a0"), sized_configmap("a0")))
            assert [e.revision for e in await changes(resumed, 1)] == [rv(after)]
            await expect_next_is_only(store, resumed)
            resumed.stop()
        finally:
            await store.close()


async def test_a_watch_that_is_not_read_stays_bounded(etcd_server):
    store = await open_etcd(etcd_server, watch_buffer=16)
    try:
        watch = await store.watch(P)
        made = []
        for start in range(0, 200, 50):
            made += await asyncio.gather(*(store.create(key(f"o{i}"), sized_configmap(f"o{i}"))
                                           for i in range(start, start + 50)))
        # every event is in etcd's stream by now: the buffer fills, and stays at its bound
        await eventually_async(lambda: watch.qsize() >= 16, what="the watch buffer to fill")
        got = []
        while len(got) < 200:
            assert watch.qsize() <= 16
            got.append((await next_change(watch)).revision)
        # and nothing was lost or repeated while it pushed back
        assert got == sorted(rv(o) for o in made)
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
            made = [await store.create(key(f"o{i}"), sized_configmap(f"o{i}")) for i in range(5)]
            await eventually_async(lambda: watch.qsize() == 2, what="a full watch buffer")
            server.restart()
            for i in range(5):
                made.append(await retry_while_unavailable(
                    lambda i=i: store.create(key(f"n{i}"), sized_configmap(f"n{i}"))))
            await store.compact(await store.current_revision())
            events = await drain(watch)
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
        first = await store.create(key("a"), sized_configmap("a"))
        head = rv(await store.create(key("b"), sized_configmap("b")))
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
        made = await store.create(key("a"), sized_configmap("a"))
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
            await store.create(key(f"o{i}"), sized_configmap(f"o{i}"))
        page = await store.list(P, limit=1)
        assert page.remaining == 2
        head = await store.current_revision()
        with pytest.raises(FutureRevisionError) as future:
            await store.list(P, revision=head + 100)
        assert (future.value.requested, future.value.current) == (head + 100, head)

        await store.create(key("later"), sized_configmap("later"))
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
            made = [await store.create(key(f"big{i}"), sized_configmap(f"big{i}", size=5 * 2**20))
                    for i in range(2)]
            listed = await store.list(P)  # one 10 MB response
            assert listed.items == made
            assert await store.get(key("big1")) == made[1]
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
            made = await store.create(key("tls"), sized_configmap("tls"))
            assert await store.get(key("tls")) == made
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


HTTPS = ("https://127.0.0.1:2379",)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"servers": ()}, "no etcd servers given"),
        ({"servers": ("127.0.0.1:2379",)}, "etcd server '127.0.0.1:2379' is not an http://"),
        ({"servers": ("ftp://127.0.0.1:2379",)}, "etcd server 'ftp://127.0.0.1:2379' is not"),
        ({"servers": HTTPS, "ca_file": "{tmp}/missing"},
         "cannot read the etcd CA file {tmp}/missing"),
        ({"servers": HTTPS, "ca_file": "{tmp}/not.pem"},
         "the etcd CA file {tmp}/not.pem holds no PEM data"),
        ({"servers": HTTPS, "cert_file": "{tmp}/not.pem", "key_file": "{tmp}/not.pem"},
         "the etcd key file {tmp}/not.pem holds no PEM data"),
        ({"servers": HTTPS, "cert_file": "{tmp}/not.pem"},
         "an etcd client certificate needs its key"),
    ],
    ids=["no-servers", "no-scheme", "ftp", "missing-ca", "ca-not-pem", "pair-not-pem",
         "cert-without-key"],
)
async def test_start_refuses_unusable_configuration(tmp_path, settings, refusal):
    (tmp_path / "not.pem").write_text("not a certificate")
    config = {name: value if name == "servers" else value.format(tmp=tmp_path)
              for name, value in settings.items()}
    store = EtcdStorage(EtcdConfig(**config))
    with pytest.raises(StorageInternalError) as refused:
        await store.start()
    assert str(refused.value).startswith(refusal.format(tmp=tmp_path)), refused.value
    await store.close()


# -- failures -------------------------------------------------------------------------------


async def test_database_space_exceeded_is_an_internal_error_and_keeps_the_rest():
    """etcd may have applied the write it answers NOSPACE for (its quota applier applies,
    then reports the quota), so only what it guarantees is checked: the error, and that
    everything written before stays readable."""
    with EtcdServer(quota_backend_bytes=1024 * 1024) as server:
        store = await open_etcd(server)
        try:
            first = await store.create(key("first"), sized_configmap("first"))
            with pytest.raises(StorageInternalError, match="database space exceeded"):
                for i in range(100):
                    await store.create(key(f"big{i}"), sized_configmap(f"big{i}", size=600_000))
            assert i > 0
            assert await store.get(key("first")) == first
            assert (await store.get(key("big0")))["data"]["v"] == "x" * 600_000
        finally:
            await store.close()


async def test_an_unreachable_etcd_is_unavailable_at_once():
    """A refused connection fails each request with the refusal itself, not with a request
    timeout spent waiting for etcd to appear (gRPC's wait-for-ready)."""
    store = EtcdStorage(EtcdConfig(servers=(dead_endpoint(),), request_timeout=10))
    await store.start()
    refused = r"^etcd is unavailable: failed to connect to all addresses; .*Connection refused"
    try:
        with pytest.raises(StorageUnavailableError, match=refused):
            await store.check_health()
        with pytest.raises(StorageUnavailableError, match=refused):
            await store.get(key("x"))
        with pytest.raises(StorageUnavailableError, match=refused):
            await store.create(key("x"), sized_configmap("x"))
        with pytest.raises(StorageUnavailableError, match=refused):
            await store.watch(P)
    finally:
        await store.close()


async def test_a_dead_first_endpoint_fails_over_to_the_next(etcd_server):
    store = EtcdStorage(EtcdConfig(servers=(dead_endpoint(), etcd_server.endpoint),
                                   prefix=f"/t-{uuid.uuid4().hex[:10]}", request_timeout=3))
    await store.start()
    try:
        made = await store.create(key("x"), sized_configmap("x"))
        assert await store.get(key("x")) == made
        watch = await store.watch(P)
        later = await store.create(key("y"), sized_configmap("y"))
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
            with pytest.raises(StorageUnavailableError, match=r"^etcd is unavailable: Deadline"):
                await store.get(key("x"))
            made = await store.create(key("x"), sized_configmap("x"))
            assert await store.get(key("x")) == made
        finally:
            await store.close()


async def test_closing_the_store_ends_its_watches(etcd_server):
    store = await open_etcd(etcd_server)
    watch = await store.watch(P)
    await store.close()
    assert await drain(watch) == []
    with pytest.raises(StorageUnavailableError, match=r"^the etcd store is not open$"):
        await store.get(key("x"))


# -- compaction among replicas --------------------------------------------------------------


async def test_replicas_take_turns_compacting_like_kube_apiservers():
    with EtcdServer() as server:
        a, b = await open_etcd(server), await open_etcd(server)
        try:
            version_a, seen_a = await a.compact_step(0, 0)  # bootstrap: nothing compacted
            version_b, _ = await b.compact_step(0, 0)  # lost the race: learns the version
            assert (version_a, version_b) == (1, 1)
            old = await a.create(key("old"), sized_configmap("old"))
            for i in range(5):
                await a.create(key(f"n{i}"), sized_configmap(f"n{i}"))
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
