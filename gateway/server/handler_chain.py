"""The filters every request crosses, composed once at start into nested async callables.

Outermost first, as kube-apiserver's DefaultBuildHandlerChain: request id (kube's audit ID),
panic recovery with the request log line, request info, metrics, in-flight tracking for a
graceful stop; then the server chain. Security
filters (authentication, audit, impersonation, authorization) and limits slot in after request
info as they are built.
"""

from __future__ import annotations

from gateway.server.filters.draining import InFlightRequests, with_drain_tracking
from gateway.server.filters.metrics import with_metrics
from gateway.server.filters.recovery import with_panic_recovery
from gateway.server.filters.requestid import with_request_id
from gateway.server.filters.requestinfo import with_request_info
from gateway.server.genericapiserver import Handler
from gateway.server.metrics import Metrics


def build_handler_chain(handler: Handler, in_flight: InFlightRequests,
                        metrics: Metrics) -> Handler:
    handler = with_drain_tracking(handler, in_flight)
    handler = with_metrics(handler, metrics)
    handler = with_request_info(handler)
    handler = with_panic_recovery(handler)
    return with_request_id(handler)
