"""The filters every request crosses, composed once at start into nested async callables.

Outermost first, as kube-apiserver's DefaultBuildHandlerChain: request id (kube's audit ID),
panic recovery with the request log line, request info, metrics, in-flight tracking for a
graceful stop, authentication, impersonation, authorization; then the server chain.
"""

from __future__ import annotations

from gateway.auth.security import Security
from gateway.server.filters.authentication import with_authentication
from gateway.server.filters.authorization import with_authorization
from gateway.server.filters.draining import InFlightRequests, with_drain_tracking
from gateway.server.filters.impersonation import with_impersonation
from gateway.server.filters.metrics import with_metrics
from gateway.server.filters.recovery import with_panic_recovery
from gateway.server.filters.requestid import with_request_id
from gateway.server.filters.requestinfo import with_request_info
from gateway.server.genericapiserver import Handler
from gateway.server.metrics import Metrics


def build_handler_chain(handler: Handler, in_flight: InFlightRequests, metrics: Metrics,
                        security: Security) -> Handler:
    handler = with_authorization(handler, security.authorize)
    handler = with_impersonation(handler, security.authorize)
    handler = with_authentication(handler, security.authenticators,
                                  anonymous=security.anonymous,
                                  front_proxy=security.front_proxy)
    handler = with_drain_tracking(handler, in_flight)
    handler = with_metrics(handler, metrics)
    handler = with_request_info(handler)
    handler = with_panic_recovery(handler)
    return with_request_id(handler)
