"""Delegated authorization, as k8s.io/apiserver's DelegatingAuthorizationOptions do it.

In order: paths always allowed (``--authorization-always-allow-paths``, by default /healthz,
/readyz and /livez: the kubelet's probes carry no credentials), groups always allowed
(system:masters), then a SubjectAccessReview to the core server, whose answer is kept
(kube's defaults: 10 s allowed, 10 s denied, ``--authorization-webhook-cache-*-ttl``). A
review that cannot be made is no opinion: the request is forbidden with why.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import structlog

from gateway.auth.authorizer import Attributes, Authorizer, Decision, union
from gateway.extension.kubeclient import APIError, KubeClient

log = structlog.get_logger(__name__)

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
ALWAYS_ALLOW_GROUPS = ("system:masters",)
#: kube's DelegatingAuthorizationOptions.AllowCacheTTL and DenyCacheTTL.
ALLOW_CACHE_TTL = 10.0
DENY_CACHE_TTL = 10.0


def path_authorizer(paths: Sequence[str]) -> Authorizer:
    """Non-resource requests to ``paths`` (an entry ending in ``*`` is a prefix) allowed,
    whoever sends them (kube's path authorizer)."""
    exact = {p for p in paths if not p.endswith("*")}
    prefixes = tuple(p[:-1] for p in paths if p.endswith("*"))

    async def authorize(attributes: Attributes) -> tuple[Decision, str]:
        if attributes.resource_request:
            return Decision.NO_OPINION, ""
        path = attributes.path
        if path in exact or (prefixes and path.startswith(prefixes)):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    return authorize


def group_authorizer(groups: Sequence[str]) -> Authorizer:
    wanted = frozenset(groups)

    async def authorize(attributes: Attributes) -> tuple[Decision, str]:
        if wanted.intersection(attributes.user.groups):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    return authorize


def review_spec(attributes: Attributes) -> dict[str, Any]:
    """The SubjectAccessReview's spec for a request (kube's webhook authorizer)."""
    user = attributes.user
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    if attributes.resource_request:
        spec["resourceAttributes"] = {
            "namespace": attributes.namespace, "verb": attributes.verb,
            "group": attributes.api_group, "version": attributes.api_version,
            "resource": attributes.resource, "subresource": attributes.subresource,
            "name": attributes.name}
    else:
        spec["nonResourceAttributes"] = {"path": attributes.path, "verb": attributes.verb}
    return spec


class SubjectAccessReviewer:
    """Asks the core server, by SubjectAccessReview; answers kept per request attributes."""

    def __init__(self, client: KubeClient, *, allow_ttl: float = ALLOW_CACHE_TTL,
                 deny_ttl: float = DENY_CACHE_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, Decision, str]] = {}

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        spec = review_spec(attributes)
        key = json.dumps(spec, sort_keys=True)
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        try:
            decision, reason = await self._review(spec)
        except (APIError, aiohttp.ClientError, TimeoutError, ValueError) as err:
            log.warning("SubjectAccessReview failed", error=str(err))
            return Decision.NO_OPINION, f"authorization webhook failed: {err}"
        ttl = self.allow_ttl if decision is Decision.ALLOW else self.deny_ttl
        if len(self._cache) > 8192:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[key] = (now + ttl, decision, reason)
        return decision, reason

    async def _review(self, spec: dict[str, Any]) -> tuple[Decision, str]:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": spec}
        answer = await self.client.request(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        status = answer.get("status") or {}
        reason = status.get("reason") or status.get("evaluationError") or ""
        if status.get("allowed"):
            return Decision.ALLOW, reason
        if status.get("denied"):
            return Decision.DENY, reason
        return Decision.NO_OPINION, reason


def delegated_authorizer(reviewer: SubjectAccessReviewer | None,
                         always_allow_paths: Sequence[str] = ALWAYS_ALLOW_PATHS,
                         always_allow_groups: Sequence[str] = ALWAYS_ALLOW_GROUPS
                         ) -> Authorizer:
    """kube's delegating authorizer chain; without a reviewer nothing else is allowed."""
    chain = [path_authorizer(always_allow_paths), group_authorizer(always_allow_groups)]
    if reviewer is not None:
        chain.append(reviewer.authorize)
    return union(chain)
