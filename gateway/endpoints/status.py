"""metav1.Status errors: every failure a client sees is one of these, with kube's reasons.

Handlers raise StatusError (or a storage error, translated by ``from_storage_error``); the
outermost filters turn it into a JSON response. The messages follow kube-apiserver's wording,
because clients and people match on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.storage import errors as storage_errors
from gateway.storage.codec import dumps

JSON = "application/json"


@dataclass
class Cause:
    """One entry of ``details.causes`` (a field that is wrong and why)."""

    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


#: kube's error constructors for these reasons always attach a details object, even an empty
#: one; the others (BadRequest, Unauthorized, Expired, RequestEntityTooLarge, ...) attach none.
_REASONS_WITH_DETAILS = frozenset({
    "NotFound", "AlreadyExists", "Conflict", "Forbidden", "Invalid", "MethodNotAllowed",
    "Timeout", "ServerTimeout", "TooManyRequests", "InternalError"})


@dataclass
class StatusError(Exception):
    """An API error that becomes a metav1.Status response."""

    code: int
    reason: str
    message: str
    name: str = ""
    group: str = ""
    kind: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after: int | None = None
    uid: str = ""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self._details(),
            "code": self.code,
        }
        if not self.reason:
            del status["reason"]
        if not status["details"] and self.reason not in _REASONS_WITH_DETAILS:
            del status["details"]
        return status

    def _details(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.uid:
            details["uid"] = self.uid
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        return details

    def response(self) -> web.Response:
        resp = web.Response(status=self.code, body=dumps(self.to_status()), content_type=JSON)
        if self.retry_after is not None:
            resp.headers["Retry-After"] = str(self.retry_after)
        return resp


def qualified(resource: str, group: str) -> str:
    """kube's GroupResource.String(): ``configmaps`` or ``leases.coordination.k8s.io``."""
    return f"{resource}.{group}" if group else resource


# -- constructors with kube-apiserver's messages ---------------------------------------------


def not_found(resource: str = "", name: str = "", group: str = "") -> StatusError:
    if not resource:
        return StatusError(404, "NotFound", "the server could not find the requested resource")
    return StatusError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found',
        name=name, group=group, kind=resource,
    )


def already_exists(resource: str, name: str, group: str = "") -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists',
        name=name, group=group, kind=resource,
    )


def conflict(resource: str, name: str, detail: str, group: str = "") -> StatusError:
    return StatusError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {detail}',
        name=name, group=group, kind=resource,
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> StatusError:
    """422 Invalid; each cause's message is kube's field-error body, e.g. 'Required value'."""
    errors = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    summary = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
    qualified_kind = f"{kind}.{group}" if group else kind
    message = f'{qualified_kind} "{name}" is invalid'
    if errors:
        message += f": {summary}"
    return StatusError(422, "Invalid", message, name=name, group=group, kind=kind, causes=causes)


def method_not_allowed(verb: str, resource: str, group: str = "") -> StatusError:
    return StatusError(
        405, "MethodNotAllowed",
        f"{verb} is not supported on resources of kind {qualified(resource, group)!r}",
    )


def gone(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def too_large_resource_version(requested: int, current: int) -> StatusError:
    return StatusError(
        504, "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        causes=[Cause("ResourceVersionTooLarge", "Too large resource version")],
        retry_after=1,
    )


def internal_error(message: str) -> StatusError:
    return StatusError(
        500, "InternalError", f"Internal error occurred: {message}",
        causes=[Cause("", message)] if message else [],
    )


def service_unavailable(message: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)


def from_storage_error(err: storage_errors.StorageError, resource: str = "", name: str = "",
                       group: str = "") -> StatusError:
    """The Status a storage failure means to a client (kube's storage.InterpretXError)."""
    if isinstance(err, storage_errors.KeyNotFoundError):
        return not_found(resource, name, group)
    if isinstance(err, storage_errors.KeyExistsError):
        return already_exists(resource, name, group)
    if isinstance(err, storage_errors.ConflictError):
        return conflict(resource, name, str(err), group)
    if isinstance(err, storage_errors.TooOldResourceVersionError):
        return gone(f"too old resource version: {err.requested} ({err.current})")
    if isinstance(err, storage_errors.InvalidContinueError):
        return bad_request(str(err))
    if isinstance(err, storage_errors.FutureRevisionError):
        return too_large_resource_version(err.requested, err.current)
    if isinstance(err, storage_errors.StorageUnavailableError):
        return service_unavailable(str(err))
    return internal_error(str(err))
