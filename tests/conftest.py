"""Settings for the whole suite."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist, each test file runs on one worker (``--dist loadfile`` without the flag,
    so that ``pytest -n 2``, the README's command, does it and ``-p no:xdist`` still parses).

    Many modules start their gateway, or a whole deployment (an etcd cluster and three
    replicas), once in a module fixture: spread test by test, each worker that took one of
    their tests started its own, and two deployments could collide. (``xdist_group`` would
    do it for chosen modules, but pytest-xdist 3.8 renames node ids in a way pytest 9.2 no
    longer reads.)"""
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadfile"
