"""Settings for the whole suite."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist, tests marked ``xdist_group`` run on one worker (ungrouped ones are spread
    as before): a module whose fixture starts a whole deployment (an etcd cluster, three
    gateways) would otherwise start it once on each worker that took one of its tests."""
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
