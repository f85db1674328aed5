"""Turn every failure into a metav1.Status, and log each request once.

A StatusError raised anywhere below becomes its Status response; a storage error becomes the
Status it means; anything else is a bug: it is logged with its traceback (and the request id)
and the client gets a 500 Status, never a stack trace. The process stays up.
"""

from __future__ import annotations

import asyncio
import logging
import time

import structlog

from gateway.apimachinery import status
from gateway.endpoints.negotiation import status_response
from gateway.server.request import RESPONSE_STARTED, ChainHandler, Request, Response
from gateway.storage.apierrors import from_storage_error
from gateway.storage.errors import StorageError

log = structlog.get_logger("gateway.http")
#: Looked up once (getLogger takes the logging module's lock); its level is read per request.
_http_logger = logging.getLogger("gateway.http")


def with_panic_recovery(handler: ChainHandler) -> ChainHandler:
    async def recovery_filter(request: Request) -> Response:
        started = time.monotonic()
        try:
            response = await handler(request)
        except status.StatusError as err:
            response = status_response(request.headers, err)
        except StorageError as err:
            response = status_response(request.headers, from_storage_error(err))
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception:
            log.exception("panic while serving a request", method=request.method,
                          path=request.path)
            if _already_started(request):
                raise
            response = status.internal_error(
                "an error on the server has prevented the request from succeeding"
            ).response()
        if response.status >= 500 or _http_logger.isEnabledFor(logging.DEBUG):
            log_request(request.method, request.raw_path, response.status,
                        time.monotonic() - started, request.headers.get("User-Agent", ""),
                        request.remote)
        return response

    return recovery_filter


def _already_started(request: Request) -> bool:
    """A streamed response that already sent headers cannot become a Status any more."""
    return bool(request.get(RESPONSE_STARTED))


def log_request(method: str, uri: str, code: int, seconds: float, user_agent: str,
                source: str | None) -> None:
    """The request's log line: failures always, the rest at debug level."""
    if code < 500 and not _http_logger.isEnabledFor(logging.DEBUG):
        return  # the common case: nothing to log, so build nothing
    fields = {"verb": method, "uri": uri, "code": code,
              "latency_ms": round(seconds * 1000, 3), "user_agent": user_agent,
              "source": source}
    if code >= 500:
        log.error("request failed", **fields)
    else:
        log.debug("request served", **fields)
