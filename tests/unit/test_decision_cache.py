"""The authorization decision cache answers as the authorizer does, and forgets every answer
as soon as the policy's stamp (the RBAC caches' revisions) changes."""

from __future__ import annotations

from gateway.apimachinery.requestinfo import parse_request_info
from gateway.apimachinery.user import UserInfo
from gateway.auth.authorizer import Attributes, Decision
from gateway.auth.decisions import DecisionCache, cacheable

ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))
BOB = UserInfo("bob", groups=("system:authenticated",))
GET = parse_request_info("GET", "/apis/wardle.example.com/v1alpha1/namespaces/a/flunders/x")
DELETE = parse_request_info("DELETE",
                            "/apis/wardle.example.com/v1alpha1/namespaces/a/flunders/x")


class Policy:
    """An authorizer whose rules the test changes, counting the questions it is asked."""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, str]] = {("alice", "get")}
        self.revision = 1
        self.asked: list[Attributes] = []

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        self.asked.append(attributes)
        if (attributes.user.name, attributes.verb) in self.allowed:
            return Decision.ALLOW, "allowed by the test"
        return Decision.NO_OPINION, ""

    def stamp(self) -> tuple[int]:
        return (self.revision,)

    def change(self, allowed: set[tuple[str, str]]) -> None:
        """What an RBAC write does: other rules, and a new revision."""
        self.allowed = allowed
        self.revision += 1


async def test_answers_are_remembered_per_user_and_request() -> None:
    policy = Policy()
    cache = DecisionCache(policy.authorize, policy.stamp)
    for _ in range(3):
        assert await cache.decide(ALICE, GET) == (Decision.ALLOW, "allowed by the test")
        assert await cache.decide(BOB, GET) == (Decision.NO_OPINION, "")
        assert await cache.decide(ALICE, DELETE) == (Decision.NO_OPINION, "")
    assert [(a.user.name, a.verb) for a in policy.asked] == \
        [("alice", "get"), ("bob", "get"), ("alice", "delete")]
    asked = policy.asked[0]
    assert (asked.namespace, asked.api_group, asked.resource, asked.name) == \
        ("a", "wardle.example.com", "flunders", "x")


async def test_a_policy_change_is_seen_at_once() -> None:
    policy = Policy()
    cache = DecisionCache(policy.authorize, policy.stamp)
    assert (await cache.decide(BOB, DELETE))[0] is Decision.NO_OPINION
    assert (await cache.decide(ALICE, GET))[0] is Decision.ALLOW
    policy.change({("bob", "delete")})  # granted to bob, revoked from alice
    assert (await cache.decide(BOB, DELETE))[0] is Decision.ALLOW
    assert (await cache.decide(ALICE, GET))[0] is Decision.NO_OPINION
    policy.change(set())
    assert (await cache.decide(BOB, DELETE))[0] is Decision.NO_OPINION


async def test_groups_and_extra_are_part_of_the_question() -> None:
    policy = Policy()
    policy.allowed = set()

    async def by_group(attributes: Attributes) -> tuple[Decision, str]:
        policy.asked.append(attributes)
        ok = "admins" in attributes.user.groups or \
            attributes.user.extra.get("scopes") == ("all",)
        return (Decision.ALLOW, "") if ok else (Decision.NO_OPINION, "")

    cache = DecisionCache(by_group, policy.stamp)
    carol = UserInfo("carol")
    assert (await cache.decide(carol, GET))[0] is Decision.NO_OPINION
    assert (await cache.decide(UserInfo("carol", groups=("admins",)), GET))[0] is \
        Decision.ALLOW
    assert (await cache.decide(UserInfo("carol", extra={"scopes": ("all",)}), GET))[0] is \
        Decision.ALLOW
    assert (await cache.decide(UserInfo("carol", extra={"scopes": ("few",)}), GET))[0] is \
        Decision.NO_OPINION


async def test_an_answer_from_a_policy_that_changed_meanwhile_is_not_kept() -> None:
    policy = Policy()

    async def slow(attributes: Attributes) -> tuple[Decision, str]:
        answer = await policy.authorize(attributes)
        policy.change(set())  # the policy changed while this answer was worked out
        return answer

    cache = DecisionCache(slow, policy.stamp)
    assert (await cache.decide(ALICE, GET))[0] is Decision.ALLOW
    assert len(cache) == 0


def test_only_modes_that_depend_on_rbac_at_most_are_cached() -> None:
    assert cacheable(["RBAC"]) and cacheable(["AlwaysAllow"]) and cacheable(["RBAC", "AlwaysDeny"])
    assert not cacheable(["RBAC", "Webhook"])
