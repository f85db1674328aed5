"""Authorization decisions remembered until the policy they came from changes.

Every proxied request asks the authorizer the same few questions (this user, this verb, this
resource); the RBAC authorizer answers from its rules of the user, worked out once per state
of its four watch caches. This cache keeps the answers themselves, per (user, request
attributes), for as long as that state holds: ``stamp`` (the RBAC caches' revisions) is read
on every call, and any change to any Role, ClusterRole or binding empties the cache, so an
answer is never staler than the RBAC authorizer's own.

Only authorizers whose answers depend on nothing else may be cached: system:masters, RBAC,
AlwaysAllow and AlwaysDeny (``cacheable``). A mode that asks elsewhere (a webhook) would not
be.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from gateway.apimachinery.requestinfo import RequestInfo
from gateway.apimachinery.user import UserInfo
from gateway.auth.authorizer import Attributes, Authorizer, Decision

#: Modes whose decisions are a function of the request's attributes and the RBAC objects.
CACHEABLE_MODES = frozenset({"AlwaysAllow", "AlwaysDeny", "RBAC"})
#: Answers kept at most (then the cache starts afresh).
MAX_ENTRIES = 8192


def cacheable(modes: list[str]) -> bool:
    return set(modes) <= CACHEABLE_MODES


class DecisionCache:
    """``authorize`` for a request's user and request info, answers remembered until
    ``stamp()`` changes."""

    def __init__(self, authorize: Authorizer, stamp: Callable[[], Hashable],
                 max_entries: int = MAX_ENTRIES) -> None:
        self._authorize = authorize
        self._stamp = stamp
        self._max = max_entries
        self._answers: dict[tuple, tuple[Decision, str]] = {}
        self._answers_stamp: Hashable = stamp()

    async def decide(self, user: UserInfo, info: RequestInfo) -> tuple[Decision, str]:
        stamp = self._stamp()
        if stamp != self._answers_stamp:
            self._answers = {}
            self._answers_stamp = stamp
        extra = user.extra
        key = (user.name, user.groups, user.uid,
               tuple(sorted(extra.items())) if extra else (), info.verb,
               info.is_resource_request, info.namespace, info.api_group, info.api_version,
               info.resource, info.subresource, info.name, info.path)
        answer = self._answers.get(key)
        if answer is None:
            answer = await self._authorize(Attributes.of_request(user, info))
            if self._stamp() == stamp:  # not answered from a policy that changed meanwhile
                if len(self._answers) >= self._max:
                    self._answers = {}
                self._answers[key] = answer
        return answer

    def __len__(self) -> int:
        return len(self._answers)


def uncached(authorize: Authorizer) -> Callable:
    """The same interface, asking ``authorize`` every time."""

    async def decide(user: UserInfo, info: RequestInfo) -> tuple[Decision, str]:
        return await authorize(Attributes.of_request(user, info))

    return decide
