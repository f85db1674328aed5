"""Concurrent GETs on the etcd store share one request (a read-only transaction of ranges),
and stay linearizable: a read asked for while a request is in flight goes in the next one.
Against a real etcd; the only thing observed from inside is which keys each request read."""

from __future__ import annotations

import asyncio

import pytest

from gateway.storage.errors import KeyNotFoundError, StorageUnavailableError
from tests.storage.test_etcd3 import open_etcd

pytestmark = pytest.mark.asyncio


def record_requests(store) -> list[list[bytes]]:
    """The keys of each request the store's reads send (the real requests go on)."""
    sent: list[list[bytes]] = []
    read_many = store._reads.read_many

    async def recording(keys: list[bytes]):
        sent.append(list(keys))
        return await read_many(keys)

    store._reads.read_many = recording
    return sent


async def test_concurrent_gets_share_requests_and_each_gets_its_object(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        for i in range(40):
            await store.create(f"/things/t{i}", {"metadata": {"name": f"t{i}"}, "n": i})
        sent = record_requests(store)
        got = await asyncio.gather(*(store.get(f"/things/t{i % 40}") for i in range(200)))
        assert [obj["n"] for obj in got] == [i % 40 for i in range(200)]
        assert sum(len(keys) for keys in sent) == 200
        assert len(sent) < 200 and max(len(keys) for keys in sent) > 1, sent
        missing = await asyncio.gather(store.get("/things/t1"), store.get("/things/none"),
                                       return_exceptions=True)
        assert missing[0]["n"] == 1 and isinstance(missing[1], KeyNotFoundError)
    finally:
        await store.close()


async def test_a_read_asked_during_a_request_goes_in_the_next_one(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        await store.create("/things/old", {"metadata": {"name": "old"}})
        sent = record_requests(store)
        read_many = store._reads.read_many
        release = asyncio.Event()

        async def held(keys: list[bytes]):
            result = await read_many(keys)  # answered by etcd before the write below
            await release.wait()
            return result

        store._reads.read_many = held
        first = asyncio.ensure_future(store.get("/things/old"))
        while not sent:
            await asyncio.sleep(0.001)
        # written after the first request was answered: a read asked for now must see it
        await store.create("/things/new", {"metadata": {"name": "new"}})
        second = asyncio.ensure_future(store.get("/things/new"))
        await asyncio.sleep(0.01)
        release.set()
        assert (await first)["metadata"]["name"] == "old"
        assert (await second)["metadata"]["name"] == "new"
        assert [len(keys) for keys in sent] == [1, 1]
    finally:
        await store.close()


async def test_a_failed_request_fails_each_of_its_reads(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        async def down(keys: list[bytes]):
            raise StorageUnavailableError("etcd is unavailable: test")

        store._reads.read_many = down
        results = await asyncio.gather(*(store.get(f"/things/x{i}") for i in range(5)),
                                       return_exceptions=True)
        assert all(isinstance(r, StorageUnavailableError) for r in results)
        assert len({id(r) for r in results}) == 5  # each reader has its own error
    finally:
        await store.close()


async def test_a_cancelled_read_leaves_the_others_answered(etcd_server):
    store = await open_etcd(etcd_server)
    try:
        await store.create("/things/a", {"metadata": {"name": "a"}})
        gone = asyncio.ensure_future(store.get("/things/a"))
        kept = asyncio.ensure_future(store.get("/things/a"))
        await asyncio.sleep(0)
        gone.cancel()
        assert (await kept)["metadata"]["name"] == "a"
        with pytest.raises(asyncio.CancelledError):
            await gone
    finally:
        await store.close()
