"""metav1.Status errors: every failure a client sees is one of these, with kube's reasons.

Handlers raise StatusError (a storage error is translated by
``gateway.storage.apierrors.from_storage_error``); the outermost filters turn it into a JSON
response. The messages follow kube-apiserver's wording,
because clients and people match on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from orjson import dumps

JSON = "application/json"
META_GROUP = "meta.k8s.io"


@dataclass
class Cause:
    """One entry of ``details.causes`` (a field that is wrong and why)."""

    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        """As metav1.StatusCause marshals: every field is left out when empty."""
        out = {"reason": self.reason, "message": self.message, "field": self.field}
        return {key: value for key, value in out.items() if value}


@dataclass
class StatusError(Exception):
    """An API error that becomes a metav1.Status response."""

    code: int
    reason: str
    message: str
    #: name, group and kind (the resource) of the object concerned. An error that names them,
    #: even as "", carries a details object even when it ends up empty, as kube's constructors
    #: that take a GroupResource do; one that leaves them None (a Status passed on as another
    #: party sent it, a plain BadRequest) carries none unless something fills it.
    name: str | None = None
    group: str | None = None
    kind: str | None = None
    causes: list[Cause] = field(default_factory=list)
    retry_after: int | None = None
    uid: str = ""
    #: Send ``details`` even when it is empty (kube's NewTimeoutError, NewInternalError, and
    #: the generic answers of its router).
    always_details: bool = False

    def __post_init__(self) -> None:
        if any(value is not None for value in (self.name, self.group, self.kind)):
            self.always_details = True

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
        if not status["details"] and not self.always_details:
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
        if self.retry_after:  # an int32 that JSON leaves out when 0
            details["retryAfterSeconds"] = self.retry_after
        return details

    def response(self) -> web.Response:
        resp = web.Response(status=self.code, body=dumps(self.to_status()), content_type=JSON)
        if self.retry_after:
            resp.headers["Retry-After"] = str(self.retry_after)
        return resp


def qualified(resource: str, group: str) -> str:
    """kube's GroupResource.String(): ``configmaps`` or ``leases.coordination.k8s.io``."""
    return f"{resource}.{group}" if group else resource


# -- constructors with kube-apiserver's messages ---------------------------------------------


def not_found(resource: str = "", name: str = "", group: str = "") -> StatusError:
    if not resource:  # no route: kube's router answers with an empty details object
        return StatusError(404, "NotFound", "the server could not find the requested resource",
                           always_details=True)
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


def delete_uid_precondition_failed(kind: str, name: str, given: str, actual: str,
                                   group: str = "") -> StatusError:
    """rest.BeforeDelete's answer to a uid precondition that does not hold; kube names the
    object by its Kind where a resource would go."""
    return conflict(kind, name, f"the UID in the precondition ({given}) does not match the UID "
                    f"in record ({actual}). The object might have been deleted and then "
                    "recreated", group)


def delete_rv_precondition_failed(kind: str, name: str, given: str, actual: str,
                                  group: str = "") -> StatusError:
    """rest.BeforeDelete's answer to a resourceVersion precondition that does not hold."""
    return conflict(kind, name, f"the ResourceVersion in the precondition ({given}) does not "
                    f"match the ResourceVersion in record ({actual}). The object might have "
                    "been modified", group)


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


def invalid_options(kind: str, causes: list[Cause]) -> StatusError:
    """422 for request options (ListOptions, CreateOptions, DeleteOptions...) of meta.k8s.io."""
    return invalid(kind, "", causes, group=META_GROUP)


def method_not_allowed(verb: str, resource: str, group: str = "") -> StatusError:
    return StatusError(
        405, "MethodNotAllowed",
        f"{verb} is not supported on resources of kind {qualified(resource, group)!r}",
        always_details=True,
    )


def gone(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def timeout(message: str, retry_after: int = 0) -> StatusError:
    """kube's NewTimeoutError: 504, "Timeout: " before the message, a details object."""
    return StatusError(504, "Timeout", f"Timeout: {message}", retry_after=retry_after,
                       always_details=True)


def too_large_resource_version(requested: int, current: int) -> StatusError:
    """storage.NewTooLargeResourceVersionError, as the watch cache gives it (retry after 1s)."""
    err = timeout(f"Too large resource version: {requested}, current: {current}", 1)
    err.causes = [Cause("ResourceVersionTooLarge", "Too large resource version")]
    return err


def internal_error(message: str) -> StatusError:
    return StatusError(
        500, "InternalError", f"Internal error occurred: {message}",
        causes=[Cause("", message)], always_details=True,
    )


def unknown_error(message: str) -> StatusError:
    """An error kube passes on as it came (not a Status): 500, no reason, no details."""
    return StatusError(500, "", message)


def service_unavailable(message: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)


def paths_not_installed() -> StatusError:
    """kube's not-found handler before every route is installed: try again in 5 s."""
    return StatusError(503, "ServiceUnavailable", "the request has been made before all known "
                       "HTTP paths have been installed, please try again", retry_after=5)


# -- content types ---------------------------------------------------------------------------

#: What kube-apiserver's serializers read and write, in its order.
MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
#: Those that can stream a watch.
STREAM_MEDIA_TYPES = ("application/json;stream=watch",
                      "application/vnd.kubernetes.protobuf;stream=watch")


def unsupported_media_type(accepted: tuple[str, ...] = MEDIA_TYPES) -> StatusError:
    """A request body in a format the handler cannot read (415)."""
    return StatusError(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media "
                       f"types include: {', '.join(accepted)}")


def not_acceptable(accepted: tuple[str, ...] = MEDIA_TYPES) -> StatusError:
    """No representation the client accepts (406)."""
    return StatusError(406, "NotAcceptable", "only the following media types are accepted: "
                       + ", ".join(accepted))


def not_acceptable_transform(message: str) -> StatusError:
    """A Table or PartialObjectMetadata(List) that cannot be made of the result (406)."""
    return StatusError(406, "NotAcceptable", message)


def route_unsupported_media_type(message: str = "415: Unsupported Media Type") -> StatusError:
    """kube's router (go-restful) refusing a Content-Type no route of the path consumes, before
    any handler runs: its own words, and an empty details object."""
    return StatusError(415, "UnsupportedMediaType", message, always_details=True)


def route_not_acceptable(message: str) -> StatusError:
    """kube's router answering 406 for a request it could not route by its Accept."""
    return StatusError(406, "NotAcceptable", message, always_details=True)
