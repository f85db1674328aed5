"""Structured logging: structlog everywhere, JSON lines by default, one request id per request.

Standard-library loggers (aiohttp, asyncio, grpc) are routed through the same renderer, so every
line on stderr has one shape. Filters bind ``request_id`` into structlog's context variables for
the duration of a request; every line logged while serving it carries the id.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

try:
    import orjson

    def _serialize(obj: Any, **_: Any) -> str:
        return orjson.dumps(obj, default=str).decode()
except ImportError:  # pragma: no cover
    import json

    def _serialize(obj: Any, **_: Any) -> str:
        return json.dumps(obj, default=str)


def level_for(verbosity: int) -> int:
    """kube's -v: 0-3 informational, 4 and above debug."""
    return logging.DEBUG if verbosity >= 4 else logging.INFO


def configure_logging(fmt: str = "json", verbosity: int = 0) -> None:
    """Set up structlog and the standard library's root logger once, at start."""
    level = level_for(verbosity)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    else:
        renderer = structlog.processors.JSONRenderer(serializer=_serialize)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log is replaced by our own request log line
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
