"""Errors of the storage layer.

Storage backends raise only these, so that the API layer maps every failure to a
metav1.Status in one place (gateway.apimachinery.status), whatever the backend.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every storage failure. ``key`` names the object concerned, if any."""

    def __init__(self, message: str, *, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class KeyNotFoundError(StorageError):
    """The key does not exist (404 NotFound)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}", key=key)


class KeyExistsError(StorageError):
    """Create of a key that already exists (409 AlreadyExists)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key exists: {key}", key=key)


class ConflictError(StorageError):
    """A precondition (uid or resourceVersion) does not hold (409 Conflict)."""


class TooOldResourceVersionError(StorageError):
    """The revision asked for has been compacted away (410 Expired / Gone).

    ``compacted`` is the oldest revision still available, ``current`` the newest.
    """

    def __init__(self, requested: int, compacted: int, current: int = 0) -> None:
        super().__init__(
            f"too old resource version: {requested} (compacted: {compacted})"
        )
        self.requested = requested
        self.compacted = compacted
        self.current = current


class FutureRevisionError(StorageError):
    """A read at a revision the store has not reached yet."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(
            f"requested revision {requested} is newer than the current revision {current}"
        )
        self.requested = requested
        self.current = current


class InvalidContinueError(StorageError):
    """A continue token that cannot be decoded or does not belong to the list (400).

    The message is kube's "continue key is not valid"; ``detail`` says what is wrong with the
    token, in the words kube adds after it."""

    def __init__(self, message: str, *, detail: str = "", key: str = "") -> None:
        super().__init__(message, key=key)
        self.detail = detail

    @property
    def explained(self) -> str:
        return f"{self}: {self.detail}" if self.detail else str(self)


class StorageUnavailableError(StorageError):
    """The backend cannot be reached or refuses work for now (503)."""


class StorageInternalError(StorageError):
    """The backend failed the operation; nothing was written (500)."""


class BackendRefusedError(StorageInternalError):
    """The backend answered the operation with an error of its own (etcd's "etcdserver: mvcc:
    database space exceeded"); the message is its words. kube-apiserver passes such an error
    on unchanged: a 500 without a reason."""
