"""Building and writing one request's audit events (audit.k8s.io/v1 Event).

The audit filter opens an AuditRecord per request it records; later filters and handlers add
to it (the impersonated user, the authorization decision, the request and response objects)
and it writes one line per stage. Secret data, TokenReview tokens and issued service-account
tokens never go into the log: their objects are left out whatever the level.

Layers that see no request (admission, below the REST store) reach the record of the request
they serve through the request context, as kube's audit.AddAuditAnnotation does: a record is
the current one of the task that opened it (each request runs in a task of its own, and the
tasks it starts inherit it), and ``add_annotations`` adds to it.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from gateway.apimachinery.context import Notes
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.auth.audit.backend import AuditLog
from gateway.auth.audit.policy import Level

AUDIT = "gateway.audit"
#: Never logged beyond metadata: their bodies hold credentials.
SENSITIVE = frozenset({("", "secrets", ""), ("authentication.k8s.io", "tokenreviews", ""),
                       ("", "serviceaccounts", "token")})


def _micro_time(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_ref(info: RequestInfo) -> dict[str, str] | None:
    if not info.is_resource_request:
        return None
    ref = {"resource": info.resource, "namespace": info.namespace, "name": info.name,
           "apiGroup": info.api_group, "apiVersion": info.api_version,
           "subresource": info.subresource}
    return {k: v for k, v in ref.items() if v}


class AuditRecord:
    def __init__(self, log: AuditLog, level: Level, omit: frozenset[str],
                 request: web.BaseRequest, info: RequestInfo, user: UserInfo,
                 request_id: str) -> None:
        self.log = log
        self.level = level
        self.omit = omit
        self.sensitive = (info.api_group, info.resource, info.subresource) in SENSITIVE
        self.event: dict[str, Any] = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": _LEVEL_NAMES[level],
            "auditID": request_id, "stage": "", "requestURI": request.rel_url.raw_path_qs,
            "verb": info.verb, "user": user.to_dict() if user.name else {},
            "sourceIPs": [request.remote or ""],
            "userAgent": request.headers.get("User-Agent", ""),
            "requestReceivedTimestamp": _micro_time(time.time()),
        }
        ref = object_ref(info)
        if ref:
            self.event["objectRef"] = ref
        _CURRENT.set(self)  # the request context's record, for add_annotations

    def emit(self, stage: str, **fields: Any) -> None:
        if stage in self.omit:
            return
        self.event.update(fields, stage=stage, stageTimestamp=_micro_time(time.time()))
        self.log.write(self.event)

    def impersonated(self, user: UserInfo) -> None:
        self.event["impersonatedUser"] = user.to_dict()

    def authorized(self, allowed: bool, reason: str) -> None:
        self.event.setdefault("annotations", {}).update({
            "authorization.k8s.io/decision": "allow" if allowed else "forbid",
            "authorization.k8s.io/reason": reason})

    def request_object(self, obj: Any) -> None:
        if self.level >= Level.REQUEST and not self.sensitive:
            self.event["requestObject"] = obj

    def response_object(self, obj: Any) -> None:
        if self.level >= Level.REQUEST_RESPONSE and not self.sensitive:
            self.event["responseObject"] = obj


_CURRENT: contextvars.ContextVar[AuditRecord | None] = contextvars.ContextVar(
    "audit_record", default=None)


def add_annotations(annotations: Mapping[str, str]) -> None:
    """Annotations for the audit event of the request being served (none when it is not
    audited), written with its next stage (kube's audit.AddAuditAnnotations)."""
    audit = _CURRENT.get()
    if audit is not None and annotations:
        audit.event.setdefault("annotations", {}).update(annotations)


_LEVEL_NAMES = {Level.NONE: "None", Level.METADATA: "Metadata", Level.REQUEST: "Request",
                Level.REQUEST_RESPONSE: "RequestResponse"}


def record(request: Notes) -> AuditRecord | None:
    """The request's audit record, if it is audited. A record is made in the request's own
    task (its context), so where the context has none the request has none: the common case
    is answered without looking in the request's notes (on aiohttp's request, a Mapping.get
    that raises and catches KeyError, 2.3 % of a create's CPU)."""
    if _CURRENT.get() is None:
        return None
    return request.get(AUDIT)


def note_request_object(request: web.BaseRequest, obj: Any) -> None:
    audit = record(request)
    if audit is not None:
        audit.request_object(obj)


def note_response_object(request: web.BaseRequest, obj: Any) -> None:
    audit = record(request)
    if audit is not None:
        audit.response_object(obj)
