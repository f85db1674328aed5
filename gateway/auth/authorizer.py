"""Authorization: may this user do this? (kube's authorizer.Attributes and its modes.)

Modes are tried in --authorization-mode order; the first that allows or denies decides, and
a request nobody allows is forbidden. system:masters is always allowed, before any mode.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.apimachinery import status
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclass(frozen=True)
class Attributes:
    user: UserInfo
    verb: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @classmethod
    def of_request(cls, user: UserInfo, info: RequestInfo) -> Attributes:
        return cls(user, info.verb, info.is_resource_request, info.namespace, info.api_group,
                   info.api_version, info.resource, info.subresource, info.name, info.path)


Authorizer = Callable[[Attributes], Awaitable[tuple[Decision, str]]]


async def always_allow(attributes: Attributes) -> tuple[Decision, str]:
    return Decision.ALLOW, ""


async def always_deny(attributes: Attributes) -> tuple[Decision, str]:
    return Decision.NO_OPINION, "Everything is forbidden."


async def privileged_groups(attributes: Attributes) -> tuple[Decision, str]:
    return (Decision.ALLOW, "") if attributes.user.is_privileged else (Decision.NO_OPINION, "")


def union(authorizers: list[Authorizer]) -> Authorizer:
    """The first decision any authorizer makes; reasons of the others are kept."""

    async def authorize(attributes: Attributes) -> tuple[Decision, str]:
        reasons = []
        for authorizer in authorizers:
            decision, reason = await authorizer(attributes)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        return Decision.NO_OPINION, "\n".join(reasons)

    return authorize


def forbidden_message(attributes: Attributes) -> str:
    """kube's wording of what was refused."""
    name = attributes.user.name
    if not attributes.resource_request:
        return f'User "{name}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource
    if attributes.subresource:
        resource = f"{resource}/{attributes.subresource}"
    where = f'in the namespace "{attributes.namespace}"' if attributes.namespace else \
        "at the cluster scope"
    return (f'User "{name}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.api_group}" {where}')


def forbidden(attributes: Attributes, reason: str = "") -> status.StatusError:
    """The 403 Status for a refused request (kube's responsewriters.Forbidden)."""
    detail = forbidden_message(attributes)
    if reason:
        detail = f"{detail}: {reason}"
    if not attributes.resource_request or not attributes.resource:
        message = f"forbidden: {detail}"
    else:
        qualified = status.qualified(attributes.resource, attributes.api_group)
        message = f'{qualified} "{attributes.name}" is forbidden: {detail}' if attributes.name \
            else f"{qualified} is forbidden: {detail}"
    return status.StatusError(403, "Forbidden", message, name=attributes.name,
                              group=attributes.api_group, kind=attributes.resource)
