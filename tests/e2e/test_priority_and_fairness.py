"""API Priority and Fairness, end to end: a real gateway (server concurrency 10 + 10 seats)
fronting the real test backend over mTLS, bearer-token users bound to FlowSchemas of their
own, driven by raw HTTPS keep-alive connections (on both of the proxy's paths) and by the
official kubernetes Python client.

The flood scenario is the measurement written in docs/security.md: tenant A floods lists of
an aggregated API whose backend takes half a second per list; meanwhile tenant B (another
priority level), system:masters and a leader-election lease renewer (kube-scheduler) work as
usual. With APF every one of their requests succeeds while tenant A is turned away with 429;
with --enable-priority-and-fairness=false (the in-flight limits, same seats) tenant B is
starved. Nothing is timed: the assertions are counts, statuses and headers; the latencies are
printed for the record."""

from __future__ import annotations

import datetime
import http.client
import json
import re
import shutil
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.support.backend import (
    APISERVICE_NAME,
    GROUP,
    GROUP_VERSION,
    VERSION,
    BackendProcess,
    apiservice_available,
)
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.identity import https
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = "\n".join([
    "tenant-a-token,tenant-a,uid-a,tenants",
    "tenant-b-token,tenant-b,uid-b,tenants",
    "scheduler-token,system:kube-scheduler,uid-s",
    "carol-token,carol,uid-c",
    "dora-token,dora,uid-d",
]) + "\n"
#: The server's concurrency limit under APF is their sum: 20 seats.
LIMITS = ("--max-requests-inflight", "10", "--max-mutating-requests-inflight", "10")
FLUNDERS = f"/apis/{GROUP_VERSION}/namespaces"
FLOOD_LIST = f"{FLUNDERS}/flood/flunders"
FLOOD_DELAY = 0.5
FLOOD_CONNECTIONS = 24
TOO_MANY = "Too many requests, please try again later.\n"
FS_UID = "X-Kubernetes-PF-FlowSchema-UID"
PL_UID = "X-Kubernetes-PF-PriorityLevel-UID"
LANE_COUNTER = re.compile(r"^aggregator_proxy_fast_lane_requests_total (\S+)$", re.M)

RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: apf-tenant}
rules:
- {apiGroups: [wardle.example.com], resources: ["*"], verbs: ["*"]}
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: apf-tenants}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: apf-tenant}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: tenant-a}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: tenant-b}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: dora}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leader-election, namespace: kube-system}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, create, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: scheduler-leader-election, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader-election}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-scheduler"}
---
apiVersion: v1
kind: Namespace
metadata: {name: tenant-b}
---
apiVersion: v1
kind: Namespace
metadata: {name: wide}
"""


def _level(name: str, shares: int, queuing: dict | None) -> dict:
    response: dict = {"type": "Queue", "queuing": queuing} if queuing else {"type": "Reject"}
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": shares, "lendablePercent": 0,
                "borrowingLimitPercent": 0, "limitResponse": response}}}


def _schema(name: str, level: str, user: str, precedence: int,
            namespaces: list[str] | None = None) -> dict:
    rule: dict = {"subjects": [{"kind": "User", "user": {"name": user}}],
                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                     "namespaces": namespaces or ["*"],
                                     "clusterScope": namespaces is None}]}
    if namespaces is None:
        rule["nonResourceRules"] = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {"priorityLevelConfiguration": {"name": level},
                     "matchingPrecedence": precedence, "distinguisherMethod": {"type": "ByUser"},
                     "rules": [rule]}}


TENANT_QUEUING = {"queues": 4, "handSize": 2, "queueLengthLimit": 4}
CONFIGURATION = [
    _level("tenant-a", 20, TENANT_QUEUING), _schema("tenant-a", "tenant-a", "tenant-a", 500),
    _level("tenant-b", 20, TENANT_QUEUING), _schema("tenant-b", "tenant-b", "tenant-b", 500),
    _level("carol-reject", 1, None),
    _schema("carol-reject", "carol-reject", "carol", 400, ["reject"]),
    _level("carol-queue", 1, {"queues": 1, "handSize": 1, "queueLengthLimit": 10}),
    _schema("carol-queue", "carol-queue", "carol", 400, ["queue"]),
    _level("dora-wide", 100, None), _schema("dora-wide", "dora-wide", "dora", 400),
]


# -- fixtures and helpers ---------------------------------------------------------------------


@dataclass
class Setup:
    gw: GatewayProcess
    backend: BackendProcess

    def uid(self, kind: str, name: str) -> str:
        code, body = self.gw.request(
            "GET", f"/apis/flowcontrol.apiserver.k8s.io/v1/{kind}/{name}")
        assert code == 200, body
        return json.loads(body)["metadata"]["uid"]


def _classified(gw: GatewayProcess, token: str, path: str, schema_uid: str) -> bool:
    """Whether ``token``'s request is classified to the FlowSchema ``schema_uid`` (the
    configuration has reached the filter), on either of the proxy's paths: each path's own
    test tells whether it classifies."""
    for lane in (True, False):
        conn = _connection(gw, lane=lane)
        try:
            _, headers, _ = _ask(conn, token, path)
        finally:
            conn.close()
        if headers.get(FS_UID) == schema_uid:
            return True
    return False


def _serve(gw: GatewayProcess, backend: BackendProcess) -> None:
    gw.kubectl("apply", "-f", "-", input=RBAC)
    gw.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
    eventually(lambda: apiservice_available(gw), timeout=60, what=f"APIService {APISERVICE_NAME}")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    work = tmp_path_factory.mktemp("apf")
    gw = token_gateway(work, TOKENS, *LIMITS, "--enable-aggregator-routing",
                       "--etcd-count-metric-poll-period=1s")
    with gw, BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), gw) as backend:
        _serve(gw, backend)
        gw.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(CONFIGURATION))
        found = Setup(gw, backend)
        for token, path, schema in (
                ("tenant-a-token", f"{FLUNDERS}/tenant-a/flunders", "tenant-a"),
                ("tenant-b-token", f"{FLUNDERS}/tenant-b/flunders", "tenant-b"),
                ("carol-token", f"{FLUNDERS}/reject/flunders", "carol-reject"),
                ("carol-token", f"{FLUNDERS}/queue/flunders", "carol-queue"),
                ("dora-token", f"{FLUNDERS}/wide/flunders", "dora-wide")):
            uid = found.uid("flowschemas", schema)
            eventually(lambda t=token, p=path, u=uid: _classified(gw, t, p, u),
                       what=f"{schema} in force")
        yield found


def metrics(gw: GatewayProcess) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics (read as the admin: exempt, not counted in any limited
    level), by (name, labels)."""
    code, body = gw.request("GET", "/metrics")
    assert code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def flow_samples(samples: dict, name: str, level: str) -> dict[frozenset, float]:
    return {labels: v for (n, labels), v in samples.items()
            if n == name and ("priority_level", level) in labels}


def _connection(gw: GatewayProcess, *, lane: bool) -> http.client.HTTPSConnection:
    """A keep-alive connection without a client certificate; unless ``lane``, handed to
    aiohttp's side first (its first request, an anonymous /version, is not one the fast lane
    carries, nor one of the level it is to use)."""
    conn = http.client.HTTPSConnection("127.0.0.1", gw.port, context=gw.ssl_context(None),
                                       timeout=60)
    if not lane:
        conn.request("GET", "/version")
        first = conn.getresponse()
        first.read()
        assert first.status == 200 and not first.will_close
    return conn


def _ask(conn: http.client.HTTPSConnection, token: str, path: str
         ) -> tuple[int, dict[str, str], bytes]:
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def _lane_served(gw: GatewayProcess) -> float:
    code, body = gw.request("GET", "/metrics")
    match = LANE_COUNTER.search(body.decode())
    assert code == 200 and match
    return float(match.group(1))


def _api_client(gw: GatewayProcess, token: str | None = None) -> k8s.ApiClient:
    """The official client as ``token``'s user (the admin when None), without the retries of
    429 its HTTP pool would otherwise make on its own: every answer is counted."""
    cfg = k8s.Configuration()
    if token is None:
        k8s_config.load_kube_config(config_file=str(gw.kubeconfig), client_configuration=cfg)
    else:
        cfg.host = gw.url
        cfg.ssl_ca_cert = str(gw.cert_dir / "ca.crt")
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    cfg.retries = False
    return k8s.ApiClient(cfg)


# -- the flood scenario ---------------------------------------------------------------------


@dataclass
class Answers:
    """What one client got: statuses, latencies, the classification headers."""

    statuses: Counter = field(default_factory=Counter)
    seconds: list[float] = field(default_factory=list)
    schemas: set[str] = field(default_factory=set)
    levels: set[str] = field(default_factory=set)

    def note(self, status: int, started: float, headers: Any) -> None:
        self.statuses[status] += 1
        self.seconds.append(time.monotonic() - started)
        if headers is not None:
            self.schemas.add(headers.get(FS_UID, ""))
            self.levels.add(headers.get(PL_UID, ""))

    def summary(self) -> str:
        ms = sorted(s * 1000 for s in self.seconds)
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        return (f"{sum(self.statuses.values())} requests {dict(self.statuses)}, "
                f"median {statistics.median(ms):.0f} ms, p95 {p95:.0f} ms, "
                f"max {ms[-1]:.0f} ms")


def _timed(answers: Answers, call: Callable[[], tuple[Any, int, Any]]) -> Any:
    """Make the call, note its answer; what it returned (None when it failed)."""
    started = time.monotonic()
    data = None
    try:
        data, status, headers = call()
    except ApiException as err:
        status, headers = err.status, err.headers
    answers.note(status, started, headers)
    return data


class Flood:
    """Tenant A's lists, from FLOOD_CONNECTIONS keep-alive connections (half of them in the
    fast lane, half on aiohttp's side), each sending again as soon as it has an answer (after
    a 50 ms pause when that was a 429)."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.gw = gw
        self.stop = threading.Event()
        self.lanes = {True: Counter(), False: Counter()}
        self.lock = threading.Lock()
        # every connection made before the flood starts (one bound for aiohttp's side asks
        # for /version first, which a flooded server might refuse)
        connections = [(i % 2 == 0, _connection(gw, lane=i % 2 == 0))
                       for i in range(FLOOD_CONNECTIONS)]
        self.threads = [threading.Thread(target=self._run, args=pair, daemon=True)
                        for pair in connections]

    def _run(self, lane: bool, conn: http.client.HTTPSConnection) -> None:
        try:
            while not self.stop.is_set():
                status, _, _ = _ask(conn, "tenant-a-token", FLOOD_LIST)
                with self.lock:
                    self.lanes[lane][status] += 1
                if status == 429:
                    self.stop.wait(0.05)
        finally:
            conn.close()

    def __enter__(self) -> Flood:
        for thread in self.threads:
            thread.start()
        eventually(lambda: self.total[429] > 0, timeout=60, what="tenant A turned away")
        return self

    @property
    def total(self) -> Counter:
        with self.lock:
            return self.lanes[True] + self.lanes[False]

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


ROUNDS = 15


def _others_during(gw: GatewayProcess) -> dict[str, Answers]:
    """Tenant B, the admin and the scheduler's lease renewals, ROUNDS each, concurrently."""
    answers = {"tenant B": Answers(), "system:masters": Answers(), "leader election": Answers()}

    def tenant_b() -> None:
        with _api_client(gw, "tenant-b-token") as api:
            custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
            for i in range(ROUNDS):
                if i % 2:
                    _timed(answers["tenant B"],
                           lambda: core.list_namespaced_config_map_with_http_info("tenant-b"))
                else:
                    _timed(answers["tenant B"],
                           lambda: custom.list_namespaced_custom_object_with_http_info(
                               GROUP, VERSION, "tenant-b", "flunders"))
                time.sleep(0.1)

    def admin() -> None:
        with _api_client(gw) as api:
            core = k8s.CoreV1Api(api)
            for _ in range(ROUNDS):
                _timed(answers["system:masters"], core.list_namespace_with_http_info)
                time.sleep(0.1)

    def leases() -> None:
        with _api_client(gw, "scheduler-token") as api:
            coordination = k8s.CoordinationV1Api(api)
            name, namespace = "kube-scheduler", "kube-system"
            try:
                coordination.create_namespaced_lease(namespace, k8s.V1Lease(
                    metadata=k8s.V1ObjectMeta(name=name),
                    spec=k8s.V1LeaseSpec(holder_identity="scheduler-1",
                                         lease_duration_seconds=15)))
            except ApiException as err:
                assert err.status == 409, err
            for _ in range(ROUNDS):  # a renewal: read, then update the renew time
                lease = _timed(answers["leader election"],
                               lambda: coordination.read_namespaced_lease_with_http_info(
                                   name, namespace))
                if lease is not None:
                    lease.spec.renew_time = datetime.datetime.now(datetime.UTC)
                    _timed(answers["leader election"],
                           lambda lease=lease: coordination.replace_namespaced_lease_with_http_info(
                               name, namespace, lease))
                time.sleep(0.1)

    threads = [threading.Thread(target=work) for work in (tenant_b, admin, leases)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return answers


def test_a_flood_of_lists_does_not_starve_masters_leases_or_another_tenant(setup: Setup,
                                                                           tmp_path: Path
                                                                           ) -> None:
    gw, backend = setup.gw, setup.backend
    uids = {"tenant B": {setup.uid("flowschemas", "tenant-b")},
            "system:masters": {setup.uid("flowschemas", "exempt")},
            "leader election": {setup.uid("flowschemas", "system-leader-election")}}
    levels = {"tenant B": {setup.uid("prioritylevelconfigurations", "tenant-b")},
              "system:masters": {setup.uid("prioritylevelconfigurations", "exempt")},
              "leader election": {setup.uid("prioritylevelconfigurations", "leader-election")}}
    quiet = _others_during(gw)  # the same work without a flood, for the record
    backend.behave(delays={f"GET {FLOOD_LIST}": FLOOD_DELAY})
    before, lane_before = metrics(gw), _lane_served(gw)
    try:
        with Flood(gw) as flood:
            others = _others_during(gw)
        lane_after = _lane_served(gw)
    finally:
        backend.behave()
    after = metrics(gw)
    print()
    for who, answers in quiet.items():
        print(f"no flood: {who}: {answers.summary()}")
    print(f"APF on: tenant A {dict(flood.total)} (fast lane {dict(flood.lanes[True])}, "
          f"aiohttp {dict(flood.lanes[False])})")
    for who, answers in others.items():
        print(f"APF on: {who}: {answers.summary()}")

    # tenant A was flooding: turned away on both paths, yet served its share
    assert flood.lanes[True][429] > 0 and flood.lanes[False][429] > 0, flood.lanes
    assert flood.total[200] > 0
    assert lane_after > lane_before
    rejected = flow_samples(after, "apiserver_flowcontrol_rejected_requests_total", "tenant-a")
    assert sum(rejected.values()) > sum(flow_samples(
        before, "apiserver_flowcontrol_rejected_requests_total", "tenant-a").values())
    assert {dict(labels)["reason"] for labels in rejected} == {"queue-full"}
    # nobody else was
    for who, answers in others.items():
        assert set(answers.statuses) == {200}, (who, answers.statuses)
        assert answers.schemas == uids[who] and answers.levels == levels[who], who
    for level in ("tenant-b", "leader-election", "exempt"):
        assert not flow_samples(after, "apiserver_flowcontrol_rejected_requests_total", level)
    dispatched = sum(flow_samples(after, "apiserver_flowcontrol_dispatched_requests_total",
                                  "tenant-b").values()) - sum(flow_samples(
        before, "apiserver_flowcontrol_dispatched_requests_total", "tenant-b").values())
    assert dispatched >= ROUNDS

    # the same flood with APF off (the in-flight limits, the same 10 + 10): tenant B starves
    off = GatewayProcess(tmp_path / "off", "--token-auth-file", str(gw.workdir / "tokens.csv"),
                         *LIMITS, "--enable-aggregator-routing",
                         "--enable-priority-and-fairness=false")
    shutil.copytree(gw.cert_dir, off.cert_dir)  # the PKI the backend trusts
    (off.cert_dir / "admin.kubeconfig").unlink()  # written again for this gateway
    with off:
        _serve(off, backend)
        backend.behave(delays={f"GET {FLOOD_LIST}": FLOOD_DELAY})
        try:
            with Flood(off) as flood_off:
                starved = _others_during(off)
        finally:
            backend.behave()
    print(f"APF off: tenant A {dict(flood_off.total)}")
    for who, answers in starved.items():
        print(f"APF off: {who}: {answers.summary()}")
    assert starved["tenant B"].statuses[429] > 0, starved["tenant B"].statuses
    assert starved["tenant B"].schemas == {""}, "no APF headers with APF off"


# -- rejections and time-outs ----------------------------------------------------------------


def _hold(gw: GatewayProcess, path: str, level: str) -> threading.Thread:
    """A request as carol that holds ``level``'s one seat (a slow backend answer, on
    aiohttp's side), started and seen executing before this returns."""
    answers: list[int] = []
    conn = _connection(gw, lane=False)

    def hold() -> None:
        try:
            answers.append(_ask(conn, "carol-token", path)[0])
        finally:
            conn.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    eventually(lambda: sample(metrics(gw), "apiserver_flowcontrol_current_executing_requests",
                              priority_level=level, flow_schema=level) == 1,
               what=f"a request executing in {level}")
    thread.answers = answers  # type: ignore[attr-defined]
    return thread


def _expect_429(status: int, headers: dict[str, str], body: bytes, setup: Setup,
                level: str) -> None:
    """kube's words: plain text, Retry-After in whole seconds, the classification."""
    assert status == 429, body
    assert body.decode() == TOO_MANY
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert int(headers["Retry-After"]) >= 1
    assert headers[FS_UID] == setup.uid("flowschemas", level)
    assert headers[PL_UID] == setup.uid("prioritylevelconfigurations", level)


@pytest.mark.parametrize("lane", [True, False], ids=["fast lane", "aiohttp"])
def test_a_full_reject_level_answers_429_with_retry_after(setup: Setup, lane: bool) -> None:
    gw = setup.gw
    holder = _hold(gw, f"{FLUNDERS}/reject/flunders/x/slow?seconds=3", "carol-reject")
    before = metrics(gw)
    conn = _connection(gw, lane=lane)
    served = _lane_served(gw)
    try:
        status, headers, body = _ask(conn, "carol-token", f"{FLUNDERS}/reject/flunders")
    finally:
        conn.close()
    assert _lane_served(gw) - served == (1 if lane else 0)
    _expect_429(status, headers, body, setup, "carol-reject")
    after = metrics(gw)
    key = {"priority_level": "carol-reject", "flow_schema": "carol-reject",
           "reason": "concurrency-limit"}
    assert sample(after, "apiserver_flowcontrol_rejected_requests_total", **key) == \
        sample(before, "apiserver_flowcontrol_rejected_requests_total", **key) + 1
    holder.join(60)
    assert holder.answers == [200]  # type: ignore[attr-defined]
    code, _, headers = https(gw, "GET", f"{FLUNDERS}/reject/flunders", token="carol-token")
    assert code == 200 and headers[FS_UID] == setup.uid("flowschemas", "carol-reject")


def test_a_request_that_waits_past_a_quarter_of_its_deadline_is_429(setup: Setup) -> None:
    gw = setup.gw
    holder = _hold(gw, f"{FLUNDERS}/queue/flunders/x/slow?seconds=6", "carol-queue")
    before = metrics(gw)
    # a 4 s deadline: it may wait 1 s in its queue, while the seat is held for 6
    status, body, headers = https(gw, "GET", f"{FLUNDERS}/queue/flunders?timeout=4s",
                                  token="carol-token")
    _expect_429(status, headers, body.encode() if isinstance(body, str) else body, setup,
                "carol-queue")
    after = metrics(gw)
    labels = {"priority_level": "carol-queue", "flow_schema": "carol-queue"}
    assert sample(after, "apiserver_flowcontrol_rejected_requests_total", **labels,
                  reason="time-out") == sample(
        before, "apiserver_flowcontrol_rejected_requests_total", **labels,
        reason="time-out") + 1
    assert sample(after, "apiserver_flowcontrol_request_wait_duration_seconds_count", **labels,
                  execute="false") == sample(
        before, "apiserver_flowcontrol_request_wait_duration_seconds_count", **labels,
        execute="false") + 1
    holder.join(60)
    assert holder.answers == [200]  # type: ignore[attr-defined]


# -- exemption, headers, watches, seats -------------------------------------------------------


def test_masters_and_health_probes_are_exempt(setup: Setup) -> None:
    gw = setup.gw
    with gw.open("GET", "/api/v1/namespaces") as response:  # the admin certificate
        assert response.status == 200
        assert response.headers[FS_UID] == setup.uid("flowschemas", "exempt")
        assert response.headers[PL_UID] == setup.uid("prioritylevelconfigurations", "exempt")
    code, body, headers = https(gw, "GET", "/healthz")  # anonymous
    assert (code, body) == (200, "ok")
    assert headers[FS_UID] == setup.uid("flowschemas", "probes")
    assert headers[PL_UID] == setup.uid("prioritylevelconfigurations", "exempt")
    code, _, headers = https(gw, "GET", "/version")  # anonymous, not a probe
    assert headers[FS_UID] == setup.uid("flowschemas", "global-default")


def test_a_watch_holds_its_seat_only_while_it_starts(setup: Setup) -> None:
    gw = setup.gw
    labels = {"priority_level": "dora-wide", "flow_schema": "dora-wide"}
    before = metrics(gw)
    conn = _connection(gw, lane=True)
    try:
        conn.request("GET", "/api/v1/namespaces/wide/configmaps?watch=1&timeoutSeconds=30",
                     headers={"Authorization": "Bearer dora-token"})
        response = conn.getresponse()
        assert response.status == 200
        assert response.headers[FS_UID] == setup.uid("flowschemas", "dora-wide")
        # the watch goes on; its seat is back
        eventually(lambda: sample(metrics(gw),
                                  "apiserver_flowcontrol_current_executing_requests",
                                  **labels) == 0, what="the watch's seat given back")
        after = metrics(gw)
        assert sample(after, "apiserver_flowcontrol_dispatched_requests_total", **labels) == \
            sample(before, "apiserver_flowcontrol_dispatched_requests_total", **labels) + 1
        assert sample(after, "apiserver_flowcontrol_request_execution_seconds_count", **labels,
                      type="watch") == sample(
            before, "apiserver_flowcontrol_request_execution_seconds_count", **labels,
            type="watch") + 1
    finally:
        conn.close()


def test_a_list_costs_a_seat_per_hundred_objects(setup: Setup) -> None:
    gw = setup.gw
    for i in range(150):
        code, body = gw.request("POST", "/api/v1/namespaces/wide/configmaps",
                                {"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}})
        assert code in (201, 409), body
    stored = eventually(lambda: sample(metrics(gw), "apiserver_storage_objects",
                                       resource="configmaps") >= 150,
                        what="the configmaps counted")
    assert stored
    count = sample(metrics(gw), "apiserver_storage_objects", resource="configmaps")
    assert count < 200, "two seats expected: fewer than 200 configmaps in all"
    labels = {"priority_level": "dora-wide", "flow_schema": "dora-wide"}
    name = "apiserver_flowcontrol_work_estimated_seats_bucket"

    def buckets() -> tuple[float, float]:
        samples = metrics(gw)
        return (sample(samples, name, **labels, le="1.0"),
                sample(samples, name, **labels, le="2.0"))

    one, two = buckets()
    code, body, _ = https(gw, "GET", "/api/v1/namespaces/wide/configmaps", token="dora-token")
    assert code == 200 and len(body["items"]) >= 150
    assert buckets() == (one, two + 1), "a list of 1xx objects: 2 seats"
    one, two = buckets()
    code, _, _ = https(gw, "GET", "/api/v1/namespaces/wide/configmaps/cm-1",
                       token="dora-token")
    assert code == 200
    assert buckets() == (one + 1, two + 1), "a get: 1 seat"


# -- configuration ----------------------------------------------------------------------------


def test_a_dangling_schema_classifies_nothing_until_its_level_exists(setup: Setup) -> None:
    gw = setup.gw
    doc = _schema("dora-first", "dora-later", "dora", 300)
    gw.kubectl("apply", "-f", "-", input=json.dumps(doc))
    try:
        def dangling() -> dict:
            code, body = gw.request("GET", "/apis/flowcontrol.apiserver.k8s.io/v1/"
                                           "flowschemas/dora-first")
            assert code == 200
            return next((c for c in json.loads(body).get("status", {}).get("conditions", [])
                         if c["type"] == "Dangling"), {})

        condition = eventually(lambda: dangling().get("status") == "True" and dangling())
        assert (condition["reason"], condition["message"]) == (
            "NotFound", 'This FlowSchema references the PriorityLevelConfiguration object '
                        'named "dora-later" but there is no such object')
        wide = setup.uid("flowschemas", "dora-wide")
        assert _classified(gw, "dora-token", "/version", wide)
        gw.kubectl("apply", "-f", "-", input=json.dumps(_level("dora-later", 1, None)))
        condition = eventually(lambda: dangling().get("status") == "False" and dangling())
        assert condition["reason"] == "Found"
        first = setup.uid("flowschemas", "dora-first")
        eventually(lambda: _classified(gw, "dora-token", "/version", first),
                   what="dora's requests classified by the schema of lower precedence")
    finally:
        gw.kubectl("delete", "flowschema", "dora-first", "--ignore-not-found")
        gw.kubectl("delete", "prioritylevelconfiguration", "dora-later", "--ignore-not-found")
    eventually(lambda: _classified(gw, "dora-token", "/version", wide))


def test_the_suggested_configuration_is_kubes_and_kept_as_kube_keeps_it(setup: Setup) -> None:
    from gateway.apis.flowcontrol.bootstrap import (
        SUGGESTED_FLOW_SCHEMAS,
        SUGGESTED_PRIORITY_LEVELS,
    )

    gw = setup.gw
    base = "/apis/flowcontrol.apiserver.k8s.io/v1"

    def get(kind: str, name: str) -> dict:
        code, body = gw.request("GET", f"{base}/{kind}/{name}")
        assert code == 200, body
        return json.loads(body)

    for kind, objects in (("flowschemas", SUGGESTED_FLOW_SCHEMAS),
                          ("prioritylevelconfigurations", SUGGESTED_PRIORITY_LEVELS)):
        for wanted in objects:
            obj = get(kind, wanted["metadata"]["name"])
            assert obj["metadata"]["annotations"] == {
                "apf.kubernetes.io/autoupdate-spec": "true"}
            for key, value in wanted["spec"].items():
                assert obj["spec"][key] == value, (obj["metadata"]["name"], key)
    # the operator's change stays once the annotation says so ...
    mine = get("flowschemas", "service-accounts")
    mine["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] = "false"
    mine["spec"]["matchingPrecedence"] = 8000
    code, body = gw.request("PUT", f"{base}/flowschemas/service-accounts", mine)
    assert code == 200, body
    # ... and is undone while it says "true"
    undone = get("flowschemas", "kube-scheduler")
    undone["spec"]["matchingPrecedence"] = 850
    code, body = gw.request("PUT", f"{base}/flowschemas/kube-scheduler", undone)
    assert code == 200, body
    eventually(lambda: get("flowschemas", "kube-scheduler")["spec"]["matchingPrecedence"] == 800,
               what="kube-scheduler's spec restored")
    # a deleted one comes back
    uid = get("prioritylevelconfigurations", "node-high")["metadata"]["uid"]
    gw.kubectl("delete", "prioritylevelconfiguration", "node-high")
    eventually(lambda: gw.request("GET", f"{base}/prioritylevelconfigurations/node-high")[0]
               == 200 and get("prioritylevelconfigurations", "node-high")["metadata"]["uid"]
               != uid, what="node-high created again")
    assert get("flowschemas", "service-accounts")["spec"]["matchingPrecedence"] == 8000
    # handed back to the server: restored
    mine = get("flowschemas", "service-accounts")
    mine["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] = "true"
    code, body = gw.request("PUT", f"{base}/flowschemas/service-accounts", mine)
    assert code == 200, body
    eventually(lambda: get("flowschemas", "service-accounts")["spec"]["matchingPrecedence"]
               == 9000, what="service-accounts' spec restored")


def test_kubes_flowcontrol_metrics_are_served(setup: Setup) -> None:
    code, body = setup.gw.request("GET", "/metrics")
    assert code == 200
    declared = set(re.findall(r"^# TYPE (\S+) (\S+)$", body.decode(), re.M))
    for name, kind in (
            ("current_inqueue_requests", "gauge"), ("current_inqueue_seats", "gauge"),
            ("current_executing_requests", "gauge"), ("current_executing_seats", "gauge"),
            ("request_concurrency_in_use", "gauge"), ("rejected_requests_total", "counter"),
            ("dispatched_requests_total", "counter"),
            ("request_wait_duration_seconds", "histogram"),
            ("request_execution_seconds", "histogram"),
            ("request_queue_length_after_enqueue", "histogram"),
            ("work_estimated_seats", "histogram"), ("nominal_limit_seats", "gauge"),
            ("lower_limit_seats", "gauge"), ("upper_limit_seats", "gauge"),
            ("current_limit_seats", "gauge"), ("request_concurrency_limit", "gauge"),
            ("demand_seats_high_watermark", "gauge"), ("demand_seats_smoothed", "gauge"),
            ("target_seats", "gauge"), ("seat_fair_frac", "gauge")):
        assert (f"apiserver_flowcontrol_{name}", kind) in declared, name
    samples = metrics(setup.gw)
    # 20 seats shared by shares: kube's 245 of the bootstrap levels, and the test's 142
    for level, shares in (("tenant-a", 20), ("global-default", 20), ("dora-wide", 100),
                          ("workload-low", 100), ("catch-all", 5)):
        nominal = -(-20 * shares // 387)
        assert sample(samples, "apiserver_flowcontrol_nominal_limit_seats",
                      priority_level=level) == nominal, level
        assert sample(samples, "apiserver_flowcontrol_request_concurrency_limit",
                      priority_level=level) == nominal, level
    assert sample(samples, "apiserver_flowcontrol_current_limit_seats",
                  priority_level="tenant-a") == 2  # may neither lend nor borrow
