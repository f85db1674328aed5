"""The bootstrap RBAC controller's reconciling patch, on a real store (SQLite)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gateway.apimachinery import status
from gateway.apis.rbac.resources import CLUSTER_ROLES
from gateway.auth.rbac import bootstrap
from gateway.controllers.rbac import reconciling
from gateway.registry.store import RESTStore, WriteOptions
from gateway.storage.factory import StorageFactory
from gateway.storage.sqlite import SQLiteStorage

OPTIONS = WriteOptions(manager="test")
WANTED = next(r for r in bootstrap.CLUSTER_ROLES if r["metadata"]["name"] == "view")


@pytest.fixture
async def roles(tmp_path: Path):
    storage = SQLiteStorage(tmp_path / "state.db")
    factory = StorageFactory(storage)
    await storage.start()
    await factory.start_caches()
    try:
        yield RESTStore(CLUSTER_ROLES, factory.cacher(CLUSTER_ROLES.storage_prefix))
    finally:
        await factory.close()
        await storage.close()


async def test_a_role_that_lost_rules_gets_them_back(roles: RESTStore) -> None:
    trimmed = copy.deepcopy(WANTED)
    trimmed.pop("aggregationRule", None)
    trimmed["rules"] = []
    await roles.create("", trimmed, OPTIONS)
    patched, created = await roles.patch("", "view", reconciling(WANTED), OPTIONS)
    assert not created
    assert patched["aggregationRule"] == WANTED["aggregationRule"]


async def test_a_role_deleted_before_the_patch_is_a_404(roles: RESTStore) -> None:
    """The controller reads a role, finds it needs reconciling, and patches it; deleted in
    between, the patch meets no object: the store's 404 (which the controller's callers retry
    on), the patch never called without an object."""
    with pytest.raises(status.StatusError) as caught:
        await roles.patch("", "view", reconciling(WANTED), OPTIONS)
    assert caught.value.code == 404
