"""Count and time every request into /metrics (kube's apiserver_request_* metrics)."""

from __future__ import annotations

import time

from gateway.apimachinery.context import REQUEST_INFO
from gateway.server.metrics import Metrics
from gateway.server.request import ChainHandler, Request, Response


def with_metrics(handler: ChainHandler, metrics: Metrics) -> ChainHandler:
    async def metrics_filter(request: Request) -> Response:
        series = metrics.series(request, request[REQUEST_INFO])
        started = time.monotonic()
        gauge = series.gauge
        gauge.pending += 1
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except Exception as err:
            code = getattr(err, "code", 500)
            raise
        finally:
            gauge.pending -= 1
            series.observe(code, time.monotonic() - started)

    return metrics_filter
