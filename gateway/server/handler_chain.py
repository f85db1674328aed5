"""The filters every request crosses, composed once at start into nested async callables, in
one order for every server that has them (the gateway, an extension apiserver).

Outermost first, as kube-apiserver's DefaultBuildHandlerChain: request id (kube's audit ID),
panic recovery with the request log line, request info, metrics, in-flight tracking for a
graceful stop, Cache-Control, the request deadline, CORS, authentication, audit,
impersonation, API Priority and Fairness (or, when it is off, the in-flight limits),
authorization; then the server chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.auth.audit.backend import AuditLog
from gateway.auth.audit.policy import Policy, load_policy
from gateway.auth.authn import Authenticator
from gateway.auth.authn.requestheader import RequestHeaderConfig
from gateway.auth.authorizer import Authorizer
from gateway.auth.decisions import DecisionCache, cacheable, uncached
from gateway.auth.security import Security
from gateway.flowcontrol.controller import FlowControl
from gateway.options import ServeOptions
from gateway.server.filters.audit import audit_failed_authentication, with_audit
from gateway.server.filters.authentication import with_authentication
from gateway.server.filters.authorization import Decide, with_authorization
from gateway.server.filters.cors import with_cors
from gateway.server.filters.draining import InFlightRequests, with_drain_tracking
from gateway.server.filters.impersonation import with_impersonation
from gateway.server.filters.limits import (
    InFlightLimits,
    with_cache_control,
    with_max_in_flight,
    with_timeout,
)
from gateway.server.filters.metrics import with_metrics
from gateway.server.filters.priority import with_priority_and_fairness
from gateway.server.filters.recovery import with_panic_recovery
from gateway.server.filters.requestid import with_request_id
from gateway.server.filters.requestinfo import with_request_info
from gateway.server.metrics import Metrics
from gateway.server.request import ChainHandler, Request


@dataclass
class Audit:
    """What --audit-log-path and --audit-policy-file configure."""

    policy: Policy
    log: AuditLog

    @classmethod
    def from_options(cls, options: ServeOptions) -> Audit | None:
        """None when auditing is off; PolicyError when the policy file is not one."""
        if not options.audit_log_path:
            return None
        policy = load_policy(options.audit_policy_file) if options.audit_policy_file \
            else Policy()
        log = AuditLog(options.audit_log_path, max_size_mb=options.audit_log_maxsize,
                       max_backups=options.audit_log_maxbackup,
                       max_age_days=options.audit_log_maxage)
        return cls(policy, log)

    def failed_authentication(self, request: Request) -> None:
        audit_failed_authentication(request, self.policy, self.log)


def authorization_decisions(security: Security) -> Decide:
    """The authorizer, its answers remembered until RBAC changes when every mode's answers
    depend on the RBAC objects at most (gateway/auth/decisions.py)."""
    if not cacheable(security.modes):
        return uncached(security.authorize)
    rbac = security.rbac
    stamp = rbac.caches.stamp if rbac is not None else tuple
    return DecisionCache(security.authorize, stamp).decide


@dataclass
class ChainConfig:
    """What the chain's filters are made of (kube's DefaultBuildHandlerChain's config). A
    server leaves out what it does not have: an extension apiserver has no audit, no CORS
    and no priority and fairness (the core server in front does them)."""

    request_timeout: float
    in_flight: InFlightRequests
    metrics: Metrics
    authenticators: list[Authenticator]
    anonymous: bool
    front_proxy: RequestHeaderConfig | None
    #: asked for each impersonation check
    authorize: Authorizer
    #: the request's own authorization (the authorizer, or a cache in front of it)
    decide: Decide
    cors_allowed_origins: list[str] = field(default_factory=list)
    audit: Audit | None = None
    #: API Priority and Fairness; without it the in-flight limits, where kube puts either
    flow_control: FlowControl | None = None
    limits: InFlightLimits | None = None


def compose_handler_chain(handler: ChainHandler, config: ChainConfig) -> ChainHandler:
    """The filters around ``handler``, outermost last here."""
    audit = config.audit
    handler = with_authorization(handler, config.decide)
    if config.flow_control is not None:
        handler = with_priority_and_fairness(handler, config.flow_control,
                                             config.request_timeout)
    elif config.limits is not None:
        handler = with_max_in_flight(handler, config.limits)
    handler = with_impersonation(handler, config.authorize)
    if audit is not None:
        handler = with_audit(handler, audit.policy, audit.log)
    handler = with_authentication(handler, config.authenticators, anonymous=config.anonymous,
                                  front_proxy=config.front_proxy,
                                  on_failure=audit.failed_authentication if audit else None)
    handler = with_cors(handler, config.cors_allowed_origins)
    handler = with_timeout(handler, config.request_timeout)
    handler = with_cache_control(handler)
    handler = with_drain_tracking(handler, config.in_flight)
    handler = with_metrics(handler, config.metrics)
    handler = with_request_info(handler)
    handler = with_panic_recovery(handler)
    return with_request_id(handler)


def build_handler_chain(handler: ChainHandler, options: ServeOptions, in_flight: InFlightRequests,
                        limits: InFlightLimits, metrics: Metrics, security: Security,
                        audit: Audit | None, flow_control: FlowControl | None = None
                        ) -> ChainHandler:
    """The gateway's chain around ``handler``; both transports (aiohttp's server and the
    proxy's fast lane) call what this returns."""
    return compose_handler_chain(handler, ChainConfig(
        request_timeout=options.request_timeout, in_flight=in_flight, metrics=metrics,
        authenticators=security.authenticators, anonymous=security.anonymous,
        front_proxy=security.front_proxy, authorize=security.authorize,
        decide=authorization_decisions(security),
        cors_allowed_origins=options.cors_allowed_origins, audit=audit,
        flow_control=flow_control, limits=limits))
