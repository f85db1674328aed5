"""/healthz, /livez and /readyz, with kube-apiserver's checks and output.

``GET /readyz`` answers "ok"; with ``?verbose`` it lists every check (``[+]etcd ok``);
``?exclude=name`` skips one; ``/readyz/<check>`` runs just that check. A failing check makes the
endpoint answer 500 with the list and "readyz check failed"; the reason is withheld from the
response (the endpoints are public) and written to the log instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

import structlog
from aiohttp import web

log = structlog.get_logger(__name__)

CHECK_TIMEOUT = 5.0
TEXT_HEADERS = {"X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class HealthCheck:
    """A named check; ``run`` returns when healthy and raises with the reason otherwise."""

    name: str
    run: Callable[[], Awaitable[None]]


async def ping() -> None:
    """The process is serving requests."""


def ping_check() -> HealthCheck:
    return HealthCheck("ping", ping)


class FlagCheck:
    """A check that fails until (or after) something happens: a post-start hook, shutdown."""

    def __init__(self, name: str, healthy: bool, reason: str) -> None:
        self.name = name
        self.healthy = healthy
        self.reason = reason

    def set(self, healthy: bool) -> None:
        self.healthy = healthy

    async def run(self) -> None:
        if not self.healthy:
            raise RuntimeError(self.reason)

    def check(self) -> HealthCheck:
        return HealthCheck(self.name, self.run)


async def _run_check(check: HealthCheck) -> Exception | None:
    try:
        await asyncio.wait_for(check.run(), CHECK_TIMEOUT)
    except Exception as err:  # a failed check is data, not a crash
        return err if str(err) else RuntimeError(type(err).__name__)
    return None


def _text(body: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/plain", charset="utf-8",
                        headers=TEXT_HEADERS)


def root_handler(endpoint: str, checks: list[HealthCheck]) -> Callable[..., Awaitable]:
    """The handler of /healthz, /livez or /readyz over ``checks``."""

    async def handle(request: web.BaseRequest) -> web.Response:
        query = parse_qs(request.query_string, keep_blank_values=True)
        excluded = set(query.get("exclude", []))
        lines, failed = [], []
        for check in checks:
            if check.name in excluded:
                excluded.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok")
                continue
            error = await _run_check(check)
            if error is None:
                lines.append(f"[+]{check.name} ok")
            else:
                lines.append(f"[-]{check.name} failed: reason withheld")
                failed.append((check.name, error))
        if excluded:
            quoted = ", ".join(f'"{name}"' for name in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        listing = "".join(line + "\n" for line in lines)
        if failed:
            log.info(f"{endpoint} check failed",
                     failed={name: str(error) for name, error in failed})
            return _text(f"{listing}{endpoint} check failed\n", 500)
        if "verbose" not in query:
            return _text("ok")
        return _text(f"{listing}{endpoint} check passed\n")

    return handle


def check_handler(check: HealthCheck) -> Callable[..., Awaitable]:
    """The handler of one check's own path, e.g. /readyz/etcd."""

    async def handle(request: web.BaseRequest) -> web.Response:
        error = await _run_check(check)
        if error is not None:
            return _text(f"internal server error: {error}\n", 500)
        return _text("ok")

    return handle


def health_routes(
    healthz: list[HealthCheck], livez: list[HealthCheck], readyz: list[HealthCheck]
) -> dict[str, Callable[..., Awaitable]]:
    """Every health path and its handler, for the outermost server's path table."""
    routes: dict[str, Callable[..., Awaitable]] = {}
    for endpoint, checks in (("healthz", healthz), ("livez", livez), ("readyz", readyz)):
        routes[f"/{endpoint}"] = root_handler(endpoint, checks)
        for check in checks:
            routes[f"/{endpoint}/{check.name}"] = check_handler(check)
    return routes
