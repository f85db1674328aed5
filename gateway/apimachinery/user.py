"""Who a request is from: kube's user.Info, and the well-known names of the system."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

SYSTEM_MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_privileged(self) -> bool:
        """system:masters may do anything, whatever RBAC says."""
        return SYSTEM_MASTERS in self.groups

    def to_dict(self) -> dict:
        """The user as authentication.k8s.io/v1 UserInfo."""
        out: dict = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out

    def with_authenticated_group(self) -> UserInfo:
        """Every authenticated user is in system:authenticated (kube's group adder)."""
        if AUTHENTICATED in self.groups or self.name == ANONYMOUS:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, AUTHENTICATED), self.extra)


ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(UNAUTHENTICATED,))


def service_account_user(namespace: str, name: str, uid: str = "",
                         extra: Mapping[str, tuple[str, ...]] | None = None) -> UserInfo:
    return UserInfo(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}", uid,
                    (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED),
                    extra or {})


def parse_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a service account's user name, or None."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    rest = username[len(SERVICE_ACCOUNT_PREFIX):]
    namespace, sep, name = rest.partition(":")
    return (namespace, name) if sep and namespace and name and ":" not in name else None
