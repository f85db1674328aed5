"""End-to-end fixtures: a real gateway process on a free port, driven by real clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway on the embedded store, shared by a test module."""
    proc = GatewayProcess(tmp_path_factory.mktemp("gateway"))
    with proc:
        yield proc


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
