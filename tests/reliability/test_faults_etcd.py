"""Faults of an etcd deployment under a steady mixed load (issue 19, item 3): three replicas
on a three-member etcd cluster, with writers (the kubernetes Python client), updaters,
listers and watchers (raw HTTPS), kubectl and proxied calls to a backend spread over them
(tests/support/load.py).

Each test injects one fault while the load runs, lets the load go on after it, and then
checks every acknowledged write on every replica and every watcher's events: nothing lost,
nothing duplicated, no event missed, and the longest time a client waited for a successful
answer, which each test bounds.
"""

from __future__ import annotations

import json
import ssl
import time
from typing import Any

import pytest

from tests.support.backend import GV_PATH
from tests.support.gateway import send
from tests.support.load import Load, Mix, Report
from tests.support.reliability import long_form, record
from tests.support.replicas import Replicas
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

#: Load before the fault, the fault's length (where it has one) and load after it.
#: (AFTER outlasts each test's recovery bound, so that recovery is checked in CI too.)
BEFORE, AFTER = (30.0, 60.0) if long_form() else (4.0, 14.0)
PAUSE = 30.0 if long_form() else 8.0
OUTAGE = 30.0  # the whole cluster down: the 30 s, in CI too


def mix(healthy: Replicas, namespace: str) -> Mix:
    """The steady load every fault runs under."""
    return Mix(writers=4, writer_rate=10, updaters=2, updater_rate=5, listers=1,
               lister_rate=2, kubectl_every=3, watchers=4, proxied=1, proxied_rate=5,
               proxied_path=f"{GV_PATH}/namespaces/{namespace}/flunders")


def describe_load(m: Mix, replicas: int = 3) -> str:
    return (f"{m.writers} writers ({m.writer_rate:g}/s each, python client), {m.updaters} "
            f"updaters and {m.listers} lister (raw HTTPS), {m.watchers} watchers, kubectl "
            f"every {m.kubectl_every:g} s, {m.proxied} proxied caller; over {replicas} "
            "replicas")


def finish(load: Load, healthy: Replicas) -> Report:
    load.stop()
    report = load.verify(healthy.replicas(live=True))
    assert not load.failures, load.failures
    return report


def expect_recovered(report: Report, since: float) -> None:
    """From ``since`` on (the fault over and a grace period past), every operation worked,
    and there were some (the run went on long enough for this to say something)."""
    late = report.errors(since=since)
    assert not late, [f"{op.client} {op.kind} {op.status} {op.error}" for op in late[:10]]
    checked = {op.client for op in report.ops if op.start >= since}
    assert len(checked) >= 5, f"too few clients after the recovery bound: {checked}"


def numbers(report: Report) -> dict[str, Any]:
    return report.summary()


def outcome(report: Report, extra: str = "") -> str:
    s = report.summary()
    return (f"{s['acked_writes']} acknowledged writes, {s['lost_writes']} lost, "
            f"{s['duplicates']} duplicated; {s['errors']} failed requests of "
            f"{s['operations']}; longest unavailability {s['longest_unavailability_s']} s "
            f"({s['longest_unavailability_client']}); watchers: {s['watch_events']} events, "
            f"{s['watch_missed']} missed, {s['watch_resumes']} resumed streams"
            + (f"; {extra}" if extra else ""))


def test_the_etcd_leader_killed(healthy: Replicas, namespace: str) -> None:
    cluster = healthy.cluster
    m = mix(healthy, namespace)
    load = Load(healthy.replicas(), namespace, m, name="leader").start()
    try:
        time.sleep(BEFORE)
        leader = cluster.leader()
        killed_at = time.monotonic()
        cluster.members[leader].kill()
        new_leader = cluster.leader()
        elected = time.monotonic() - killed_at
        time.sleep(AFTER / 2)
        cluster.start_member(leader)
        time.sleep(AFTER / 2)
    finally:
        report = finish(load, healthy)
    record(item="3", load=describe_load(m),
           fault=f"the etcd leader (member {leader}) SIGKILLed; member {new_leader} elected "
                 f"in {elected:.1f} s; the old leader restarted {AFTER / 2:g} s later",
           outcome=outcome(report), **numbers(report))
    report.assert_intact()
    # etcd answers a request caught by the election after its own timeout (about 7 s)
    longest, who = report.unavailability()
    assert longest < 15, (who, report.describe())
    expect_recovered(report, since=killed_at + 15)


def test_one_member_paused_and_resumed(healthy: Replicas, namespace: str) -> None:
    cluster = healthy.cluster
    m = mix(healthy, namespace)
    # the first replica talks to member 0 first: pause that one, the leader or not
    load = Load(healthy.replicas(), namespace, m, name="pause").start()
    try:
        time.sleep(BEFORE)
        was_leader = cluster.members[0].is_leader()
        paused_at = time.monotonic()
        cluster.members[0].pause()
        time.sleep(PAUSE)
        cluster.members[0].resume()
        time.sleep(AFTER)
    finally:
        report = finish(load, healthy)
    record(item="3", load=describe_load(m),
           fault=f"etcd member 0 ({'the leader' if was_leader else 'a follower'}; replica 1's "
                 f"first endpoint) SIGSTOPped for {PAUSE:g} s, then SIGCONT",
           outcome=outcome(report), **numbers(report))
    report.assert_intact()
    longest, who = report.unavailability()
    assert longest < PAUSE + 5, (who, report.describe())
    expect_recovered(report, since=paused_at + PAUSE + 5)


def _readyz(gateway: Any) -> tuple[int, str]:
    code, body, _ = send(f"{gateway.url}/readyz?verbose", "GET",
                         ssl.create_default_context(cafile=str(gateway.cert_dir / "ca.crt")),
                         timeout=10)
    return code, body.decode(errors="replace")


def test_the_whole_cluster_down_for_30_seconds(healthy: Replicas, namespace: str) -> None:
    cluster = healthy.cluster
    gateways = healthy.gateways
    pids = [g.proc.pid for g in gateways]
    m = mix(healthy, namespace)
    load = Load(healthy.replicas(), namespace, m, name="outage").start()
    probes: list[tuple[float, int, Any]] = []
    try:
        time.sleep(BEFORE)
        down_at = time.monotonic()
        for member in cluster.members:
            member.kill()
        # during the outage: a probe per second of each replica's answers
        while time.monotonic() - down_at < OUTAGE:
            for gateway in gateways:
                began = time.monotonic()
                code, raw = gateway.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
                probes.append((time.monotonic() - began, code, raw[:300]))
            time.sleep(1)
        readyz = [_readyz(g) for g in gateways]
        up_at = time.monotonic()
        cluster.start_all()
        # service resumes without a restart: every replica ready again, the same processes
        for gateway in gateways:
            gateway.wait_for("/readyz", 60)
        ready_after = time.monotonic() - up_at
        time.sleep(AFTER)
    finally:
        report = finish(load, healthy)
    assert [g.proc.pid for g in gateways] == pids
    slowest = max(p[0] for p in probes[len(gateways) * 3:])  # after the first seconds
    answers = sorted({(code, json.loads(raw).get("reason", "")) for _, code, raw in probes
                      [len(gateways) * 3:]})
    # every watcher's stream ended cleanly during the outage (not broken, not hanging)
    ended = [next((t for t in w.ends_clean if down_at <= t <= up_at), None)
             for w in load.watches]
    ended_after = max((t - down_at for t in ended if t is not None), default=float("inf"))
    record(item="3", load=describe_load(m),
           fault=f"all three etcd members SIGKILLed for {OUTAGE:g} s, then restarted",
           outcome=outcome(report, f"during the outage: answers {answers}, the slowest in "
                                   f"{slowest:.2f} s; /readyz 500 naming [-]etcd; every "
                                   f"watch ended cleanly within {ended_after:.1f} s; every "
                                   f"replica ready {ready_after:.1f} s after etcd returned, "
                                   "with no restart"),
           outage_answers=[list(a) for a in answers], slowest_answer_s=round(slowest, 2),
           watches_ended_within_s=round(ended_after, 1), ready_after_s=round(ready_after, 1),
           **numbers(report))
    # fast 5xx Status answers
    assert slowest < 3, probes
    for _, code, raw in probes[len(gateways) * 3:]:
        body = json.loads(raw)
        assert code >= 500 and body["kind"] == "Status" and body["code"] == code, raw
    # /readyz names the etcd check
    for code, text in readyz:
        assert code == 500 and "[-]etcd failed" in text, text
    # watches end cleanly
    assert None not in ended, [(w.name, w.ends_clean, w.ends_broken) for w in load.watches]
    assert not any(down_at <= t <= up_at for w in load.watches for t, _ in w.ends_broken)
    assert report.lost_writes == 0 and report.duplicates == 0, report.describe()
    expect_recovered(report, since=up_at + ready_after + 10)


def test_a_replica_sigkilled(healthy: Replicas, namespace: str) -> None:
    victim = healthy.gateways[1]
    m = mix(healthy, namespace)
    load = Load(healthy.replicas(), namespace, m, name="replica").start()
    try:
        time.sleep(BEFORE)
        killed_at = time.monotonic()
        victim.kill()
        time.sleep(AFTER)
    finally:
        report = finish(load, healthy)
    record(item="3", load=describe_load(m),
           fault="replica 2 SIGKILLed (its clients move to the next replica, its watchers "
                 "resume there from their last resourceVersion)",
           outcome=outcome(report), **numbers(report))
    report.assert_intact()
    longest, who = report.unavailability()
    assert longest < 5, (who, report.describe())
    expect_recovered(report, since=killed_at + 5)
    # the survivors drop it from the kubernetes Service
    eventually(lambda: victim.host not in healthy.gateways[0].kubectl(
        "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[*].addresses[*].ip}").stdout,
        timeout=60, interval=0.5, what="the dead replica dropped from the endpoints")
