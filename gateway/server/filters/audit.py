"""Write audit events for every request the policy records: RequestReceived, then
ResponseStarted (long-running requests, when their headers go out), ResponseComplete, or
Panic when the handler fails. The Audit-ID response header carries the event's auditID."""

from __future__ import annotations

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import REQUEST_INFO, request_user
from gateway.apimachinery.user import UserInfo
from gateway.auth.audit.backend import AuditLog
from gateway.auth.audit.events import AUDIT, AuditRecord
from gateway.auth.audit.policy import Level, Policy
from gateway.server.filters.requestid import REQUEST_ID
from gateway.server.request import ChainHandler, Request, Response
from gateway.storage.apierrors import from_storage_error
from gateway.storage.errors import StorageError


def _status_of(code: int, err: status.StatusError | None = None) -> dict:
    if err is not None:
        return {"metadata": {}, "status": "Failure", "message": err.message,
                "reason": err.reason, "code": err.code}
    return {"metadata": {}, "code": code}


def open_record(request: web.BaseRequest, policy: Policy, log: AuditLog,
                user: UserInfo) -> AuditRecord | None:
    info = request[REQUEST_INFO]
    level, omit = policy.decide(user, info)
    if level == Level.NONE:
        return None
    return AuditRecord(log, level, omit, request, info, user, request.get(REQUEST_ID, ""))


def with_audit(handler: ChainHandler, policy: Policy, log: AuditLog) -> ChainHandler:
    async def audit_filter(request: Request) -> Response:
        # audited requests come by aiohttp's side only: the fast lane is off while auditing
        assert isinstance(request, web.BaseRequest)
        audit = open_record(request, policy, log, request_user(request))
        if audit is None:
            return await handler(request)
        request[AUDIT] = audit
        audit.emit("RequestReceived")
        try:
            response = await handler(request)
        except status.StatusError as err:
            audit.emit("ResponseComplete", responseStatus=_status_of(err.code, err))
            raise
        except StorageError as err:
            failure = from_storage_error(err)
            audit.emit("ResponseComplete", responseStatus=_status_of(failure.code, failure))
            raise
        except Exception:
            audit.emit("Panic", responseStatus=_status_of(500))
            raise
        audit.emit("ResponseComplete", responseStatus=_status_of(response.status))
        return response

    return audit_filter


def audit_failed_authentication(request: Request, policy: Policy, log: AuditLog) -> None:
    """kube records requests refused for bad credentials too, with no user."""
    # audited requests come by aiohttp's side only: the fast lane is off while auditing
    assert isinstance(request, web.BaseRequest)
    audit = open_record(request, policy, log, UserInfo(""))
    if audit is not None:
        audit.emit("ResponseStarted", responseStatus=_status_of(
            401, status.StatusError(401, "Unauthorized", "Unauthorized")))
