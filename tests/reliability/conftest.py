"""Reliability tests (issue 19): the gateway run as it is deployed, under faults and load.

Every test here starts real processes (etcd members, gateway replicas, a backend) and drives
them with real clients, so every module is marked slow. ``tools/reliability.py`` runs
it and writes docs/reliability.md from what each test records (tests/support/reliability.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.etcd import EtcdCluster
from tests.support.replicas import Replicas


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Three replicas on a three-member etcd cluster (TLS everywhere) and a backend."""
    with EtcdCluster(3) as cluster:
        replicas = Replicas(tmp_path_factory.mktemp("replicas"), cluster)
        try:
            yield replicas.start()
        finally:
            replicas.stop()


@pytest.fixture
def healthy(deployment: Replicas) -> Replicas:
    """The deployment with every earlier test's faults undone."""
    deployment.restore()
    return deployment


@pytest.fixture
def namespace(healthy: Replicas) -> str:
    name = f"r-{uuid.uuid4().hex[:8]}"
    code, body = healthy.gateways[0].request("POST", "/api/v1/namespaces",
                                             {"metadata": {"name": name}})
    assert code == 201, body
    return name
