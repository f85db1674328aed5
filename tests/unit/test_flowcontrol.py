"""API Priority and Fairness, piece by piece, against what kube 1.32 computes: classification,
shuffle sharding, the queue set's fair queuing, the sharing of seats among levels (nominal
limits, borrowing), the seat cost of requests and the Retry-After of rejections.

No clock is real here: the queue sets read a clock the test moves, so every assertion is
about an order or a count."""

from __future__ import annotations

import asyncio
import copy

import pytest

from gateway.apimachinery.requestinfo import parse_request_info
from gateway.apimachinery.user import UserInfo, service_account_user
from gateway.apis.flowcontrol.bootstrap import (
    AUTOUPDATE,
    MANDATORY_FLOW_SCHEMAS,
    MANDATORY_PRIORITY_LEVELS,
    SUGGESTED_FLOW_SCHEMAS,
    SUGGESTED_PRIORITY_LEVELS,
)
from gateway.apis.flowcontrol.resources import default_priority_level
from gateway.controllers.flowcontrol import revised
from gateway.flowcontrol.allocation import AllocationError, AllocItem, allocate
from gateway.flowcontrol.controller import FlowControl
from gateway.flowcontrol.observe import NoMetrics
from gateway.flowcontrol.queueset import (
    DONE,
    EXECUTING,
    WAITING,
    Integrator,
    QueueSet,
    QueuingConfig,
    WorkEstimate,
    wait,
)
from gateway.flowcontrol.retryafter import DroppedRequests
from gateway.flowcontrol.rules import FlowSchema, flow_hash
from gateway.flowcontrol.shufflesharding import Dealer
from gateway.flowcontrol.workestimate import ObjectCounts, WatchTracker, WorkEstimator

ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))
ADMIN = UserInfo("admin", groups=("system:masters", "system:authenticated"))
SCHEDULER = UserInfo("system:kube-scheduler", groups=("system:authenticated",))
ANONYMOUS = UserInfo("system:anonymous", groups=("system:unauthenticated",))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Later:
    """call_later for queue sets under test: run by hand."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, object]] = []

    def __call__(self, delay: float, callback) -> None:
        self.pending.append((delay, callback))

    def run(self) -> None:
        pending, self.pending = self.pending, []
        for _, callback in pending:
            callback()


def info(method: str, path: str, query: str = ""):
    return parse_request_info(method, path, query)


def bootstrap(*extra: dict) -> tuple[list[dict], list[dict]]:
    """The objects kube creates at start (as stored: defaulted, with uids), and ``extra``."""
    levels, schemas = [], []
    for obj in (*MANDATORY_PRIORITY_LEVELS, *SUGGESTED_PRIORITY_LEVELS,
                *MANDATORY_FLOW_SCHEMAS, *SUGGESTED_FLOW_SCHEMAS, *extra):
        obj = copy.deepcopy(obj)
        obj["metadata"]["uid"] = "uid-" + obj["metadata"]["name"]
        if obj["kind"] == "PriorityLevelConfiguration":
            default_priority_level(obj["spec"])
            levels.append(obj)
        else:
            schemas.append(obj)
    return levels, schemas


def level(name: str, shares: int = 30, *, lendable: int = 0, borrowing: int | None = None,
          queuing: tuple[int, int, int] | None = (64, 8, 50)) -> dict:
    limited: dict = {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
                     "limitResponse": {"type": "Reject"}}
    if queuing is not None:
        limited["limitResponse"] = {"type": "Queue", "queuing": dict(zip(
            ("queues", "handSize", "queueLengthLimit"), queuing, strict=True))}
    if borrowing is not None:
        limited["borrowingLimitPercent"] = borrowing
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name}, "spec": {"type": "Limited", "limited": limited}}


def schema(name: str, level_name: str, precedence: int, subjects: list[dict], *,
           resource_rules: list[dict] | None = None, non_resource_rules: list[dict] | None = None,
           distinguisher: str | None = "ByUser") -> dict:
    rule: dict = {"subjects": subjects}
    if resource_rules is not None:
        rule["resourceRules"] = resource_rules
    if non_resource_rules is not None:
        rule["nonResourceRules"] = non_resource_rules
    spec: dict = {"priorityLevelConfiguration": {"name": level_name},
                  "matchingPrecedence": precedence, "rules": [rule]}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name}, "spec": spec}


def everything(verbs=("*",)) -> list[dict]:
    return [{"verbs": list(verbs), "apiGroups": ["*"], "resources": ["*"],
             "clusterScope": True, "namespaces": ["*"]}]


# -- classification -------------------------------------------------------------------------


def test_the_bootstrap_configuration_classifies_as_kubes() -> None:
    control = FlowControl(600)
    control.digest(*bootstrap())
    cases = [
        (ADMIN, info("DELETE", "/api/v1/namespaces/x"), "exempt", "exempt"),
        (ALICE, info("GET", "/healthz"), "probes", "exempt"),
        (ANONYMOUS, info("GET", "/readyz/etcd"), "probes", "exempt"),
        (ALICE, info("POST", "/healthz"), "global-default", "global-default"),
        (ALICE, info("GET", "/api/v1/namespaces/a/configmaps"), "global-default",
         "global-default"),
        (SCHEDULER, info("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/s"),
         "system-leader-election", "leader-election"),
        (SCHEDULER, info("GET", "/api/v1/pods"), "kube-scheduler", "workload-high"),
        (service_account_user("kube-system", "job-controller"),
         info("PUT", "/api/v1/namespaces/a/configmaps/lock"), "workload-leader-election",
         "leader-election"),
        (service_account_user("kube-system", "endpoint-controller"),
         info("PUT", "/api/v1/namespaces/a/endpoints/e"), "endpoint-controller",
         "workload-high"),
        (service_account_user("apps", "builder"), info("GET", "/api/v1/namespaces/apps/pods"),
         "service-accounts", "workload-low"),
        (UserInfo("node-1", groups=("system:nodes", "system:authenticated")),
         info("PUT", "/api/v1/nodes/node-1/status"), "system-node-high", "node-high"),
        (UserInfo("node-1", groups=("system:nodes", "system:authenticated")),
         info("GET", "/api/v1/namespaces/a/secrets/s"), "system-nodes", "system"),
    ]
    for user, request, schema_name, level_name in cases:
        found = control.classify(request, user)
        assert (found.schema.name, found.level.name) == (schema_name, level_name), \
            (user.name, request.path)
        assert found.schema.uid == f"uid-{schema_name}"
        assert found.level.uid == f"uid-{level_name}"


def test_precedence_then_name_decides_and_rules_match_as_kubes() -> None:
    extra = [
        level("team"),
        schema("b-team", "team", 500, [{"kind": "Group", "group": {"name": "devs"}}],
               resource_rules=[{"verbs": ["list"], "apiGroups": [""],
                                "resources": ["configmaps"], "namespaces": ["a"]}]),
        # same precedence, earlier name: wins where both match
        schema("a-team", "team", 500, [{"kind": "User", "user": {"name": "alice"}}],
               resource_rules=[{"verbs": ["get", "list"], "apiGroups": [""],
                                "resources": ["configmaps", "pods/log"],
                                "namespaces": ["b"], "clusterScope": True}],
               non_resource_rules=[{"verbs": ["get"], "nonResourceURLs": ["/metrics/*"]}]),
    ]
    control = FlowControl(600)
    control.digest(*bootstrap(*extra))

    def named(method: str, path: str, query: str = "", user: UserInfo = ALICE) -> str:
        return control.classify(info(method, path, query), user).schema.name

    assert named("GET", "/api/v1/namespaces/a/configmaps") == "b-team"
    assert named("GET", "/api/v1/namespaces/b/configmaps") == "a-team"
    assert named("GET", "/api/v1/configmaps") == "a-team"  # cluster scope
    assert named("GET", "/api/v1/namespaces/c/configmaps") == "global-default"
    assert named("GET", "/api/v1/namespaces/b/pods/p/log") == "a-team"  # subresource
    assert named("GET", "/api/v1/namespaces/b/pods/p") == "global-default"
    assert named("POST", "/api/v1/namespaces/b/configmaps") == "global-default"  # verb
    assert named("GET", "/apis/apps/v1/namespaces/b/configmaps") == "global-default"
    assert named("GET", "/metrics") == "global-default"  # "/metrics/*": below it only
    assert named("GET", "/metrics/slis") == "a-team"
    assert named("GET", "/metricsz") == "global-default"
    bob = UserInfo("bob", groups=("devs", "system:authenticated"))
    assert named("GET", "/api/v1/namespaces/a/configmaps", user=bob) == "b-team"
    assert named("GET", "/api/v1/namespaces/b/configmaps", user=bob) == "global-default"


def test_service_account_subjects() -> None:
    rule = FlowSchema.from_object(schema("x", "l", 10, [
        {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "*"}},
        {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ops", "name": "bot"}}],
        non_resource_rules=[{"verbs": ["*"], "nonResourceURLs": ["*"]}]))
    request = info("GET", "/version")
    assert rule.matches(request, service_account_user("ci", "anything"))
    assert rule.matches(request, service_account_user("ops", "bot"))
    assert not rule.matches(request, service_account_user("ops", "bot2"))
    assert not rule.matches(request, service_account_user("cia", "x"))
    assert not rule.matches(request, UserInfo("system:serviceaccount:ci"))


def test_dangling_schemas_are_left_out_and_mandatory_ones_imagined() -> None:
    control = FlowControl(100)
    levels, schemas = bootstrap(schema("orphan", "no-such-level", 5,
                                       [{"kind": "Group", "group": {"name": "devs"}}],
                                       non_resource_rules=[{"verbs": ["*"],
                                                            "nonResourceURLs": ["*"]}]))
    levels = [o for o in levels if o["metadata"]["name"] != "catch-all"]
    schemas = [o for o in schemas if o["metadata"]["name"] not in ("catch-all", "exempt")]
    control.digest(levels, schemas)
    assert "orphan" not in [s.name for s in control.schemas]
    assert control.schemas[0].name == "exempt" and control.schemas[-1].name == "catch-all"
    assert control.levels["catch-all"].uid == ""  # imagined, no object
    assert control.classify(info("GET", "/version"), ALICE).schema.name == "global-default"
    assert control.classify(info("GET", "/version"), ADMIN).level.exempt


def test_flows_get_their_hands_from_the_distinguisher() -> None:
    control = FlowControl(600)
    control.digest(*bootstrap())
    bob = UserInfo("bob", groups=("system:authenticated",))
    first = control.classify(info("GET", "/api/v1/namespaces/a/configmaps"), ALICE)
    again = control.classify(info("GET", "/api/v1/namespaces/b/secrets"), ALICE)
    other = control.classify(info("GET", "/api/v1/namespaces/a/configmaps"), bob)
    assert first.distinguisher == "alice" and other.distinguisher == "bob"
    assert first.hand == again.hand != other.hand
    dealer = Dealer(128, 6)
    assert first.hand == dealer.deal(flow_hash("global-default", "alice"))
    scheduler = control.classify(info("GET", "/api/v1/namespaces/a/pods"), SCHEDULER)
    assert scheduler.distinguisher == "a"  # kube-scheduler's schema: ByNamespace


def test_flow_hash_is_kubes() -> None:
    """hashFlowID: SHA-256 of name, NUL, distinguisher; first 8 bytes little-endian."""
    import hashlib
    digest = hashlib.sha256(b"global-default\x00alice").digest()
    assert flow_hash("global-default", "alice") == int.from_bytes(digest[:8], "little")


# -- shuffle sharding -----------------------------------------------------------------------


def test_every_hand_is_distinct_cards_and_every_hand_is_dealt() -> None:
    for deck in range(1, 8):
        for size in range(1, deck + 1):
            dealer = Dealer(deck, size)
            permutations = 1
            for i in range(deck - size + 1, deck + 1):
                permutations *= i
            hands = {dealer.deal(h) for h in range(3 * permutations)}
            assert len(hands) == permutations
            assert all(len(set(hand)) == size and max(hand) < deck for hand in hands)


def test_dealer_refuses_what_kube_refuses() -> None:
    with pytest.raises(ValueError, match="greater than deckSize"):
        Dealer(4, 5)
    with pytest.raises(ValueError, match="required entropy bits"):
        Dealer(512, 8)
    with pytest.raises(ValueError, match="not positive"):
        Dealer(0, 1)


# -- the queue set ----------------------------------------------------------------------------


def queue_set(limit: int, queuing: QueuingConfig, clock: Clock | None = None,
              later: Later | None = None) -> QueueSet:
    clock = clock or Clock()
    qs = QueueSet("test", clock, Integrator(clock), call_later=later)
    qs.configure(queuing, limit)
    return qs


class Flow:
    """A flow's series that remembers what was counted."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __getattr__(self, name: str):
        return NoMetrics().flow("", "").__getattribute__(name)

    def rejected(self, reason: str):
        self.reasons.append(reason)
        return NoMetrics().flow("", "").rejected(reason)


def test_reject_level_rejects_beyond_its_seats() -> None:
    qs = queue_set(2, QueuingConfig())
    flow = Flow()
    first = qs.start(WorkEstimate(1), flow, None)
    second = qs.start(WorkEstimate(1), flow, None)
    assert first is not None and second is not None
    assert (first.state, second.state) == (EXECUTING, EXECUTING)
    assert qs.start(WorkEstimate(1), flow, None) is None
    assert flow.reasons == ["concurrency-limit"]
    qs.finish(first)
    assert qs.start(WorkEstimate(1), flow, None) is not None


def test_a_wide_request_waits_for_room_and_one_wider_than_the_level_runs_alone() -> None:
    qs = queue_set(4, QueuingConfig.of(1, 1, 10))
    flow = Flow()
    narrow = [qs.start(WorkEstimate(1), flow, (0,)) for _ in range(2)]
    wide = qs.start(WorkEstimate(3), flow, (0,))
    assert wide is not None and wide.state == WAITING  # 2 + 3 > 4
    qs.finish(narrow[0])
    assert wide.state == EXECUTING
    widest = qs.start(WorkEstimate(9), flow, (0,))
    assert widest is not None and widest.state == WAITING
    qs.finish(narrow[1])
    assert widest.state == WAITING  # the wide one still executes
    qs.finish(wide)
    assert widest.state == EXECUTING and qs.seats_in_use == 9


def test_queue_full_rejects_and_the_rest_wait_their_turn_in_order() -> None:
    qs = queue_set(1, QueuingConfig.of(1, 1, 3))
    flow = Flow()
    running = qs.start(WorkEstimate(1), flow, (0,))
    waiting = [qs.start(WorkEstimate(1), flow, (0,)) for _ in range(3)]
    assert qs.start(WorkEstimate(1), flow, (0,)) is None
    assert flow.reasons == ["queue-full"]
    order = []
    current = running
    for _ in range(3):
        qs.finish(current)
        current = next(r for r in waiting if r.state == EXECUTING)
        order.append(waiting.index(current))
    assert order == [0, 1, 2]


def test_fair_queuing_interleaves_flows_whatever_came_first() -> None:
    """Flow A queued five requests before flow B queued two: B's are dispatched alternately
    with A's, not after them (equal virtual time per active queue)."""
    qs = queue_set(1, QueuingConfig.of(8, 1, 50))
    a, b = Flow(), Flow()
    first = qs.start(WorkEstimate(1), a, (0,))
    a_waiting = [qs.start(WorkEstimate(1), a, (0,)) for _ in range(5)]
    b_waiting = [qs.start(WorkEstimate(1), b, (1,)) for _ in range(2)]
    dispatched = []
    current = first
    for _ in range(7):
        qs.finish(current)
        current = next(r for r in a_waiting + b_waiting if r.state == EXECUTING)
        dispatched.append("a" if current in a_waiting else "b")
    assert dispatched.index("b") <= 1
    assert dispatched[:4].count("b") == 2, dispatched


def test_a_heavy_flow_fills_only_its_hand() -> None:
    """Shuffle sharding: a flow that floods its queues is rejected ("queue-full") while
    another flow, dealt other queues, still gets queued."""
    qs = queue_set(1, QueuingConfig.of(8, 2, 2))
    heavy, light = Flow(), Flow()
    qs.start(WorkEstimate(1), heavy, (0, 1))
    admitted = [qs.start(WorkEstimate(1), heavy, (0, 1)) for _ in range(10)]
    assert sum(r is not None for r in admitted) == 4  # two queues of two
    assert heavy.reasons == ["queue-full"] * 6
    assert qs.start(WorkEstimate(1), light, (2, 3)) is not None
    assert light.reasons == []


def test_a_waiter_past_its_limit_times_out_and_a_dispatched_one_runs() -> None:
    async def scenario() -> tuple[bool, bool, list[str]]:
        qs = queue_set(1, QueuingConfig.of(1, 1, 10))
        flow = Flow()
        running = qs.start(WorkEstimate(1), flow, (0,))
        late = qs.start(WorkEstimate(1), flow, (0,))
        served = qs.start(WorkEstimate(1), flow, (0,))
        assert late is not None and served is not None and running is not None
        timed_out = await wait(late, 0.01)
        waiter = asyncio.ensure_future(wait(served, 30))
        await asyncio.sleep(0)
        qs.finish(running)
        return timed_out, await waiter, flow.reasons

    timed_out, served, reasons = asyncio.run(scenario())
    assert (timed_out, served, reasons) == (False, True, ["time-out"])


def test_final_seats_are_held_for_the_additional_latency() -> None:
    later = Later()
    qs = queue_set(4, QueuingConfig.of(1, 1, 10), later=later)
    flow = Flow()
    write = qs.start(WorkEstimate(1, 3, 0.005), flow, (0,))
    assert write is not None and qs.seats_in_use == 3
    qs.finish(write)
    assert write.state == DONE and qs.seats_in_use == 3 and qs.executing == 0
    later.run()
    assert qs.seats_in_use == 0


def test_fewer_queues_go_as_they_empty() -> None:
    qs = queue_set(1, QueuingConfig.of(4, 1, 10))
    flow = Flow()
    running = qs.start(WorkEstimate(1), flow, (3,))
    qs.configure(QueuingConfig.of(2, 1, 10), 1)
    assert len(qs.queues) == 4  # queue 3 is busy
    qs.finish(running)
    assert len(qs.queues) == 3


# -- sharing seats among levels -----------------------------------------------------------


def test_nominal_limits_of_the_bootstrap_levels_are_kubes() -> None:
    """With kube's defaults (400 + 200 seats), the levels' nominal limits and max seats."""
    control = FlowControl(600)
    control.digest(*bootstrap())
    nominal = {name: lv.nominal for name, lv in control.levels.items()}
    assert nominal == {"catch-all": 13, "exempt": 0, "global-default": 49,
                       "leader-election": 25, "node-high": 98, "system": 74,
                       "workload-high": 98, "workload-low": 245}
    bounds = {name: (lv.min_cl, lv.max_cl) for name, lv in control.levels.items()}
    assert bounds["workload-low"] == (245 - 221, 245 + 600)  # lends 90%, borrows freely
    assert bounds["leader-election"] == (25, 625)
    assert control.max_seats("global-default") == 8  # min(ceil(49 * .15), 49 // 6)
    assert control.max_seats("catch-all") == 0  # a Reject level: the estimator's 10


def test_borrowing_gives_a_busy_level_what_idle_ones_lend() -> None:
    clock = Clock()
    control = FlowControl(200, clock=clock, call_later=Later())
    control.digest(*bootstrap(level("busy", 20, lendable=0),
                              level("idle", 20, lendable=100)))
    busy, idle = control.levels["busy"], control.levels["idle"]
    nominal, before = busy.nominal, busy.current
    flow = Flow()
    for _ in range(nominal * 3):  # demand three times its seats for a whole period
        busy.qs.start(WorkEstimate(1), flow, (0,))
    clock.now += 10
    control.update_borrowing()
    assert busy.current >= nominal * 3 > before, (busy.current, nominal, before)
    assert idle.current < idle.nominal
    assert sum(lv.current for lv in control.levels.values() if not lv.exempt) <= \
        control.nominal_sum + len(control.levels)


def test_a_level_that_cannot_lend_keeps_its_seats_and_one_that_may_not_borrow_keeps_to_its_own(
        ) -> None:
    clock = Clock()
    control = FlowControl(30, clock=clock, call_later=Later())
    control.digest(*bootstrap(level("capped", 50, lendable=0, borrowing=0)))
    capped = control.levels["capped"]
    flow = Flow()
    for _ in range(100):
        capped.qs.start(WorkEstimate(1), flow, (0,))
    clock.now += 10
    control.update_borrowing()
    assert capped.current == capped.nominal == capped.max_cl


def test_a_removed_level_serves_what_it_has_then_goes() -> None:
    control = FlowControl(100, call_later=Later())
    levels, schemas = bootstrap(level("temp", 10, queuing=None))
    control.digest(levels, schemas)
    temp = control.levels["temp"]
    running = temp.qs.start(WorkEstimate(1), Flow(), None)
    control.digest([o for o in levels if o["metadata"]["name"] != "temp"], schemas)
    assert control.levels["temp"] is temp and temp.quiescing
    assert running is not None
    temp.qs.finish(running)
    control.digest([o for o in levels if o["metadata"]["name"] != "temp"], schemas)
    assert "temp" not in control.levels


def test_allocation_is_proportional_to_targets_within_bounds() -> None:
    allocations, fraction = allocate(10, [AllocItem(2, 0, 10), AllocItem(3, 0, 10)])
    assert allocations == pytest.approx([4, 6]) and fraction == pytest.approx(2)
    allocations, _ = allocate(10, [AllocItem(2, 0, 3), AllocItem(3, 0, 10)])
    assert allocations == pytest.approx([3, 7])  # the first stops at its upper bound
    allocations, _ = allocate(10, [AllocItem(1, 1, 10), AllocItem(6, 6, 10), AllocItem(8, 0, 10)])
    assert sum(allocations) == pytest.approx(10) and allocations[1] >= 6  # the lower bound holds
    with pytest.raises(AllocationError):
        allocate(10, [AllocItem(1, 0, 2), AllocItem(1, 0, 2)])


# -- the seat cost of requests --------------------------------------------------------------


class Query(dict):
    def __init__(self, text: str = "") -> None:
        super().__init__(part.split("=", 1) for part in text.split("&") if part)


def estimator(counts: dict[str, int], max_seats: int = 0,
              watches: WatchTracker | None = None) -> WorkEstimator:
    tracked = ObjectCounts()
    for key, count in counts.items():
        tracked.set(key, count)
    return WorkEstimator(tracked, watches or WatchTracker(), lambda level: max_seats)


def seats(estimate: WorkEstimator, method: str, path: str, query: str = "") -> int:
    return estimate.estimate(info(method, path, query), Query(query), "l",
                             NoMetrics().flow("", "")).max_seats


def test_lists_cost_a_seat_per_hundred_objects_as_kubes() -> None:
    work = estimator({"configmaps": 450, "deployments.apps": 5000})
    cms = "/api/v1/namespaces/a/configmaps"
    assert seats(work, "GET", cms) == 5  # from the cache: every stored object
    assert seats(work, "GET", cms, "limit=50") == 5  # still the cache
    assert seats(work, "GET", cms, "limit=50&continue=x") == 1  # storage: 2 * 50
    assert seats(work, "GET", cms, "limit=200&continue=x") == 4
    assert seats(work, "GET", cms, "limit=50&continue=x&labelSelector=a%3Db") == 5  # 450 + 50
    assert seats(work, "GET", cms, "limit=50&resourceVersion=7") == 1  # legacy exact: storage
    assert seats(work, "GET", "/apis/apps/v1/deployments") == 10  # capped
    assert seats(work, "GET", cms, "fieldSelector=metadata.name%3Dx") == 1  # one object
    assert seats(work, "GET", "/apis/wardle.example.com/v1/flunders") == 1  # count unknown
    assert seats(work, "GET", cms, "limit=many") == 10  # refused later: the most
    assert seats(estimator({"configmaps": 450}, max_seats=3), "GET", cms) == 3  # level's max
    assert seats(work, "GET", f"{cms}/x") == 1


def test_watches_cost_a_seat_unless_they_ask_for_their_initial_events() -> None:
    work = estimator({"configmaps": 450})
    cms = "/api/v1/namespaces/a/configmaps"
    assert seats(work, "GET", cms, "watch=1") == 1
    assert seats(work, "GET", cms, "watch=1&sendInitialEvents=true&resourceVersionMatch="
                                   "NotOlderThan&allowWatchBookmarks=true") == 5


def test_writes_watched_by_many_hold_final_seats() -> None:
    watches = WatchTracker()
    forget = [watches.register(info("GET", "/api/v1/namespaces/a/configmaps", "watch=1"))
              for _ in range(25)]
    watches.register(info("GET", "/api/v1/configmaps", "watch=1"))
    work = estimator({}, watches=watches)
    estimate = work.estimate(info("PUT", "/api/v1/namespaces/a/configmaps/x"), Query(), "l",
                             NoMetrics().flow("", ""))
    assert (estimate.initial_seats, estimate.final_seats) == (1, 3)  # 26 watchers
    assert estimate.additional_latency == pytest.approx(0.005)
    other = work.estimate(info("PUT", "/api/v1/namespaces/b/configmaps/x"), Query(), "l",
                          NoMetrics().flow("", ""))
    assert other.final_seats == 0  # one watcher of all namespaces only
    for done in forget:
        done()
    assert watches.interested(info("PUT", "/api/v1/namespaces/a/configmaps/x")) == 1


def test_stale_counts_cost_the_most() -> None:
    clock = Clock()
    counts = ObjectCounts(clock)
    counts.set("configmaps", 1)
    clock.now += 181
    work = WorkEstimator(counts, WatchTracker(), lambda level: 0)
    assert seats(work, "GET", "/api/v1/configmaps") == 10


# -- Retry-After ------------------------------------------------------------------------------


def test_retry_after_doubles_under_sustained_rejection_and_comes_back_down() -> None:
    dropped = DroppedRequests()
    assert dropped.retry_after == 1
    second = 5000
    for _ in range(4):  # 10 rejections a second
        for _ in range(10):
            dropped.record(second + 0.5)
        second += 1
    grown = dropped.retry_after
    assert grown >= 4
    for _ in range(40):  # then nothing but one rejection every other second
        second += 2
        dropped.record(second)
    assert dropped.retry_after < grown


# -- the bootstrap configuration kept as kube's config producer keeps it ---------------------


def stored(obj: dict, *, generation: int = 1, annotation: str | None = "true") -> dict:
    """A bootstrap object as read back from the store (defaulted, versioned)."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta.update(uid="u", resourceVersion="7", generation=generation)
    if annotation is None:
        meta.pop("annotations", None)
    else:
        meta["annotations"] = {AUTOUPDATE: annotation}
    if obj["kind"] == "PriorityLevelConfiguration":
        default_priority_level(obj["spec"])
    return obj


def suggested(kind: str, name: str) -> dict:
    objects = SUGGESTED_FLOW_SCHEMAS if kind == "FlowSchema" else SUGGESTED_PRIORITY_LEVELS
    return next(o for o in objects if o["metadata"]["name"] == name)


def test_an_unchanged_bootstrap_object_is_left_alone() -> None:
    for wanted in (*SUGGESTED_FLOW_SCHEMAS, *SUGGESTED_PRIORITY_LEVELS,
                   *MANDATORY_FLOW_SCHEMAS, *MANDATORY_PRIORITY_LEVELS):
        assert revised(wanted, stored(wanted), always=False) is None, wanted["metadata"]


def test_a_suggested_object_is_restored_while_its_annotation_says_true() -> None:
    wanted = suggested("PriorityLevelConfiguration", "workload-low")
    changed = stored(wanted)
    changed["spec"]["limited"]["nominalConcurrencyShares"] = 1
    new = revised(wanted, changed, always=False)
    assert new is not None
    assert new["spec"]["limited"]["nominalConcurrencyShares"] == 100
    assert new["metadata"]["resourceVersion"] == "7"  # an update of what was read
    kept = stored(wanted, generation=3, annotation="false")
    kept["spec"]["limited"]["nominalConcurrencyShares"] = 1
    assert revised(wanted, kept, always=False) is None


def test_without_a_readable_annotation_the_generation_decides() -> None:
    wanted = suggested("FlowSchema", "global-default")
    fresh = stored(wanted, annotation=None)
    fresh["spec"]["matchingPrecedence"] = 9000
    new = revised(wanted, fresh, always=False)
    assert new is not None and new["spec"]["matchingPrecedence"] == 9900
    assert new["metadata"]["annotations"] == {AUTOUPDATE: "true"}
    edited = stored(wanted, generation=2, annotation="maybe")
    edited["spec"]["matchingPrecedence"] = 9000
    new = revised(wanted, edited, always=False)
    assert new is not None and new["spec"]["matchingPrecedence"] == 9000  # kept
    assert new["metadata"]["annotations"] == {AUTOUPDATE: "false"}  # and said so


def test_mandatory_objects_are_always_restored_but_the_exempt_level_keeps_its_exempt_part(
        ) -> None:
    catch_all = next(o for o in MANDATORY_FLOW_SCHEMAS if o["metadata"]["name"] == "catch-all")
    changed = stored(catch_all, generation=5, annotation="false")
    changed["spec"]["matchingPrecedence"] = 9000
    new = revised(catch_all, changed, always=True)
    assert new is not None and new["spec"]["matchingPrecedence"] == 10000
    assert new["metadata"]["annotations"] == {AUTOUPDATE: "true"}
    exempt = next(o for o in MANDATORY_PRIORITY_LEVELS if o["metadata"]["name"] == "exempt")
    tuned = stored(exempt, generation=2)
    tuned["spec"]["exempt"]["nominalConcurrencyShares"] = 10
    assert revised(exempt, tuned, always=True) is None
