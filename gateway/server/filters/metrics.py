"""Count and time every request into /metrics (kube's apiserver_request_* metrics)."""

from __future__ import annotations

import time

from aiohttp import web

from gateway.apimachinery.context import REQUEST_INFO
from gateway.server.genericapiserver import Handler
from gateway.server.metrics import Metrics


def with_metrics(handler: Handler, metrics: Metrics) -> Handler:
    async def metrics_filter(request: web.BaseRequest) -> web.StreamResponse:
        info = request[REQUEST_INFO]
        labels = metrics.labels(request, info)
        started = time.monotonic()
        gauge = metrics.inflight_gauge(labels, info.is_long_running, info.is_mutating)
        gauge.inc()
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except Exception as err:
            code = getattr(err, "code", 500)
            raise
        finally:
            gauge.dec()
            metrics.observe(labels, code, started)

    return metrics_filter
