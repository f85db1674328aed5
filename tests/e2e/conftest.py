"""End-to-end fixtures: a real gateway process on a free port, driven by real clients.

A module that needs a gateway with other flags defines its own ``gateway`` fixture; ``api``
and ``ns`` then follow it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import API
from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway on the embedded store, shared by a test module."""
    proc = GatewayProcess(tmp_path_factory.mktemp("gateway"))
    with proc:
        yield proc


@pytest.fixture(scope="module")
def api(gateway: GatewayProcess) -> API:
    """JSON over HTTPS to the module's gateway, as the admin user."""
    return API(gateway)


@pytest.fixture
def ns(api: API) -> str:
    """A fresh namespace for one test."""
    return api.namespace()


@pytest.fixture
def hooked_ns(api: API) -> str:
    """A namespace of the test's own, labelled ``hooked: <name>`` so that only webhooks
    selecting that label see it (``ns`` is unlabelled)."""
    name = f"wh-{uuid.uuid4().hex[:8]}"
    code, body = api.post("/api/v1/namespaces", {"metadata": {"name": name,
                                                               "labels": {"hooked": name}}})
    assert code == 201, body
    # the controllers' writes in it (the default ServiceAccount, the root CA) come before any
    # webhook is configured: the webhooks see only the test's own requests
    api.wait_for_defaults(name)
    return name


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
