"""The lifecycle every server of a chain registers its hooks and checks in
(gateway/server/lifecycle.py): hooks run one after another in the order they were added, each
check failing until its hook has finished; the health endpoints list the generic checks, the
hooks, the servers' own checks and (readyz) shutdown, in that order."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.server.healthz import HealthCheck, ping_check
from gateway.server.lifecycle import Lifecycle, Start


async def _ok() -> None:
    pass


async def _body(lifecycle: Lifecycle, path: str) -> tuple[int, str]:
    route, _, _ = path.partition("?")
    response = await lifecycle.health_routes()[route](make_mocked_request("GET", path))
    return response.status, response.text


def test_a_hook_is_added_once() -> None:
    lifecycle = Lifecycle()
    lifecycle.add_post_start_hook("poststarthook/a", lambda _: _ok())
    with pytest.raises(ValueError, match="added twice"):
        lifecycle.add_post_start_hook("poststarthook/a", lambda _: _ok())


async def test_hooks_run_in_order_and_ready_waits_for_the_last() -> None:
    lifecycle = Lifecycle()
    lifecycle.add_base_checks([ping_check()], [HealthCheck("informer-sync", _ok)])
    ran: list[str] = []
    release = asyncio.Event()

    async def first(start: Start) -> None:
        ran.append("first")

    async def second(start: Start) -> None:
        ran.append("second")
        await release.wait()

    lifecycle.add_post_start_hook("poststarthook/first", first)
    lifecycle.add_post_start_hook("poststarthook/second", second)
    lifecycle.add_health_check(HealthCheck("autoregister-completion", _ok))
    running = asyncio.get_running_loop().create_task(lifecycle.run_post_start_hooks())
    while ran != ["first", "second"]:
        await asyncio.sleep(0)
    code, text = await _body(lifecycle, "/readyz?verbose")
    assert code == 500
    assert text.splitlines() == [
        "[+]ping ok", "[+]informer-sync ok", "[+]poststarthook/first ok",
        "[-]poststarthook/second failed: reason withheld", "[+]autoregister-completion ok",
        "[+]shutdown ok", "readyz check failed"]
    assert (await _body(lifecycle, "/readyz/poststarthook/second"))[0] == 500
    release.set()
    await running
    assert await _body(lifecycle, "/readyz") == (200, "ok")
    code, text = await _body(lifecycle, "/healthz?verbose")
    assert code == 200 and "informer-sync" not in text and "shutdown" not in text
    lifecycle.begin_shutdown()
    assert (await _body(lifecycle, "/readyz"))[0] == 500
    assert (await _body(lifecycle, "/livez"))[0] == 200


async def test_what_a_hook_starts_runs_until_stop() -> None:
    lifecycle = Lifecycle()
    cancelled = asyncio.Event()

    async def loop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    async def hook(start: Start) -> None:
        await start(loop())

    lifecycle.add_post_start_hook("poststarthook/loop", hook)
    await lifecycle.run_post_start_hooks()
    assert lifecycle.hooks["poststarthook/loop"].healthy
    await asyncio.sleep(0)
    assert not cancelled.is_set()
    await lifecycle.stop()
    assert cancelled.is_set()


def test_routes_are_complete_once_every_signal_is() -> None:
    lifecycle = Lifecycle()
    assert lifecycle.routes_complete()
    done = {"crds": False, "apiservices": False}
    lifecycle.add_routes_complete_signal("crds", lambda: done["crds"])
    lifecycle.add_routes_complete_signal("apiservices", lambda: done["apiservices"])
    done["crds"] = True
    assert not lifecycle.routes_complete()
    done["apiservices"] = True
    assert lifecycle.routes_complete()
