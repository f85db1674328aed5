"""Storage failures as the Status a client sees (kube's storage.InterpretXError): the one place
the storage layer's errors meet the API's."""

from __future__ import annotations

from gateway.apimachinery.status import (
    StatusError,
    already_exists,
    bad_request,
    conflict,
    gone,
    internal_error,
    not_found,
    service_unavailable,
    too_large_resource_version,
    unknown_error,
)
from gateway.storage import errors


def from_storage_error(err: errors.StorageError, resource: str = "", name: str = "",
                       group: str = "") -> StatusError:
    """The Status a storage failure means to a client (kube's storage.InterpretXError)."""
    if isinstance(err, errors.KeyNotFoundError):
        return not_found(resource, name, group)
    if isinstance(err, errors.KeyExistsError):
        return already_exists(resource, name, group)
    if isinstance(err, errors.ConflictError):
        return conflict(resource, name, str(err), group)
    if isinstance(err, errors.TooOldResourceVersionError):
        # the oldest resourceVersion still served, as kube's watch cache names it
        return gone(f"too old resource version: {err.requested} ({err.compacted})")
    if isinstance(err, errors.InvalidContinueError):
        return bad_request(f"invalid continue token: {err.explained}")
    if isinstance(err, errors.FutureRevisionError):
        return too_large_resource_version(err.requested, err.current)
    if isinstance(err, errors.StorageUnavailableError):
        return service_unavailable(str(err))
    if isinstance(err, errors.BackendRefusedError):
        return unknown_error(str(err))
    return internal_error(str(err))
