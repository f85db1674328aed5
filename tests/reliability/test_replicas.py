"""Replicas on an etcd cluster (issue 19, item 2): three gateways on a three-member etcd
cluster over TLS, each on its own loopback address, driven with kubectl, the kubernetes
Python client and raw HTTPS.

- a write on one replica is read and watched on the others with the same resourceVersion;
- conflicting updates through two replicas: one success and one 409, every time;
- a watch whose replica dies resumes on another from its last resourceVersion, no event
  missed or repeated, and the ``kubernetes`` Service drops the dead replica (and lists it
  again once it is back);
- an APIService's availability is the same on every replica, and stays put.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import kubernetes
import pytest
import urllib3

from tests.support.backend import APISERVICE_NAME, GV_PATH
from tests.support.load import RawClient, kube_client
from tests.support.reliability import record
from tests.support.replicas import Replicas
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

CM = "/api/v1/namespaces/{ns}/configmaps"


def kubectl_json(gateway: Any, *args: str) -> dict[str, Any]:
    return json.loads(gateway.kubectl(*args, "-o", "json").stdout)


def read_watch(client: RawClient, path: str, count: int, timeout: float = 30
               ) -> list[dict[str, Any]]:
    """The first ``count`` events of a raw HTTPS watch."""
    conn = client.connection(timeout=timeout)
    try:
        conn.request("GET", path, headers={"Accept": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()[:300]
        return [json.loads(resp.readline()) for _ in range(count)]
    finally:
        conn.close()


def test_writes_on_one_replica_are_read_and_watched_on_the_others(healthy: Replicas,
                                                                  namespace: str) -> None:
    first, second, third = healthy.gateways
    replicas = healthy.replicas()
    path = CM.format(ns=namespace)
    # a list on the third replica gives the resourceVersion the others watch from
    listed = json.loads(third.request("GET", path)[1])["metadata"]["resourceVersion"]
    watched: dict[str, list[dict[str, Any]]] = {}

    def watch(index: int) -> None:
        client = RawClient([replicas[index]], failover=False)
        watched[replicas[index].name] = read_watch(
            client, f"{path}?watch=1&resourceVersion={listed}", 2)

    watchers = [threading.Thread(target=watch, args=(i,)) for i in (1, 2)]
    for thread in watchers:
        thread.start()
    # kubectl writes through the first replica
    first.kubectl("create", "configmap", "shared", "-n", namespace, "--from-literal=k=v1")
    made = kubectl_json(first, "get", "configmap", "shared", "-n", namespace)
    rv = made["metadata"]["resourceVersion"]
    # the official client reads it through the others: the same object, the same version
    for gateway in (second, third):
        read = kube_client(replicas[healthy.gateways.index(gateway)]).read_namespaced_config_map(
            "shared", namespace)
        assert (read.metadata.resource_version, read.metadata.uid, read.data) == (
            rv, made["metadata"]["uid"], {"k": "v1"}), gateway.host
    first.kubectl("patch", "configmap", "shared", "-n", namespace, "--type=merge",
                  "-p", '{"data":{"k":"v2"}}')
    patched = kubectl_json(second, "get", "configmap", "shared", "-n", namespace)
    for thread in watchers:
        thread.join(60)
    assert set(watched) == {replicas[1].name, replicas[2].name}
    for name, events in watched.items():
        assert [(e["type"], e["object"]["metadata"]["resourceVersion"], e["object"]["data"])
                for e in events] == [
            ("ADDED", rv, {"k": "v1"}),
            ("MODIFIED", patched["metadata"]["resourceVersion"], {"k": "v2"})], name
    # the same resourceVersion for the namespace's list on every replica
    lists = {g.host: json.loads(g.request("GET", path)[1])["metadata"]["resourceVersion"]
             for g in healthy.gateways}
    record(item="2", load="kubectl writes on replica 1; raw HTTPS watches on 2 and 3; "
                          "python client reads on 2 and 3",
           fault="none", outcome="same object, uid and resourceVersion on all three; both "
                                 "watches saw ADDED and MODIFIED with the writer's versions",
           list_resource_versions=lists)
    assert len(set(lists.values())) == 1 or all(
        int(v) >= int(patched["metadata"]["resourceVersion"]) for v in lists.values()), lists


def test_conflicting_updates_through_two_replicas(healthy: Replicas, namespace: str) -> None:
    path = CM.format(ns=namespace)
    replicas = healthy.replicas()
    code, body = healthy.gateways[0].request("POST", path, {"metadata": {"name": "race"},
                                                           "data": {"n": "0"}})
    assert code == 201, body
    rounds, outcomes = 20, []
    for n in range(rounds):
        current = json.loads(healthy.gateways[0].request("GET", f"{path}/race")[1])
        barrier = threading.Barrier(2)
        answers: dict[int, tuple[int, dict[str, Any]]] = {}

        def put(index: int, current: dict[str, Any] = current, n: int = n,
                barrier: threading.Barrier = barrier,
                answers: dict[int, tuple[int, dict[str, Any]]] = answers) -> None:
            client = RawClient([replicas[index]], failover=False)
            body = {**current, "data": {"n": f"{n + 1} from {index}"}}
            barrier.wait()
            code, raw = client.request("PUT", f"{path}/race", body)
            answers[index] = (code, json.loads(raw))
            client.close()

        threads = [threading.Thread(target=put, args=(i,)) for i in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        codes = sorted(code for code, _ in answers.values())
        outcomes.append(codes)
        assert codes == [200, 409], answers
        loser = next(body for code, body in answers.values() if code == 409)
        assert (loser["kind"], loser["reason"]) == ("Status", "Conflict"), loser
        winner = next(body for code, body in answers.values() if code == 200)
        stored = json.loads(healthy.gateways[0].request("GET", f"{path}/race")[1])
        assert stored["data"] == winner["data"]
    record(item="2", load=f"{rounds} rounds of two simultaneous PUTs with the same "
                          "resourceVersion through replicas 2 and 3 (raw HTTPS)",
           fault="none", outcome=f"one 200 and one 409 Conflict in each of {rounds} rounds; "
                                 "the stored object is the winner's",
           rounds=rounds, conflicts=sum(1 for c in outcomes if c == [200, 409]))


def _endpoint_addresses(gateway: Any) -> list[str]:
    endpoints = kubectl_json(gateway, "get", "endpoints", "kubernetes", "-n", "default")
    return sorted(a["ip"] for s in endpoints.get("subsets") or [] for a in s["addresses"])


def test_a_dead_replica_its_watch_resumes_on_another_and_the_service_drops_it(
        healthy: Replicas, namespace: str) -> None:
    first, second, third = healthy.gateways
    replicas = healthy.replicas()
    assert _endpoint_addresses(first) == healthy.hosts
    path = CM.format(ns=namespace)
    writer = RawClient([replicas[0]], failover=False)
    acked: dict[str, int] = {}
    failed: list[str] = []
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            code, raw = writer.request("POST", path, {"metadata": {"name": f"w-{n:05d}"}})
            if code != 201:
                failed.append(raw[:200].decode())
            else:
                acked[f"w-{n:05d}"] = int(json.loads(raw)["metadata"]["resourceVersion"])
                n += 1
            time.sleep(0.02)

    # the official client watches through the third replica from a list's resourceVersion
    api = kube_client(replicas[2])
    start = api.list_namespaced_config_map(namespace).metadata.resource_version
    seen: list[tuple[str, str, int]] = []
    thread = threading.Thread(target=write)
    thread.start()
    try:
        watch = kubernetes.watch.Watch()
        broken, killed_at = None, 0.0
        try:
            for event in watch.stream(api.list_namespaced_config_map, namespace,
                                      resource_version=start, _request_timeout=(3, 30)):
                obj = event["object"]
                seen.append((event["type"], obj.metadata.name,
                             int(obj.metadata.resource_version)))
                if len(seen) == 20:
                    third.kill()  # SIGKILL while events flow
                    killed_at = time.monotonic()
                elif killed_at and time.monotonic() - killed_at > 10:
                    break  # events still coming: the stream was not the dead replica's
        except (urllib3.exceptions.HTTPError, OSError) as err:
            broken = err
        assert broken is not None, "the stream went on after its replica died"
        last = seen[-1][2]
        # it resumes on another replica from the last resourceVersion it saw
        resumed = kube_client(replicas[1])
        time.sleep(1)  # writes go on meanwhile
        stop.set()
        thread.join(30)
        final = max(acked.values())
        watch = kubernetes.watch.Watch()
        for event in watch.stream(resumed.list_namespaced_config_map, namespace,
                                  resource_version=str(last), timeout_seconds=30):
            obj = event["object"]
            seen.append((event["type"], obj.metadata.name, int(obj.metadata.resource_version)))
            if int(obj.metadata.resource_version) >= final:
                watch.stop()
    finally:
        stop.set()
        thread.join(30)
    assert not failed, failed[:5]
    names = [name for kind, name, _ in seen if kind == "ADDED" and name.startswith("w-")]
    duplicated = len(names) - len(set(names))
    missed = sorted(set(acked) - set(names))
    versions = [rv for _, _, rv in seen]
    in_order = all(b > a for a, b in itertools.pairwise(versions))
    # the kubernetes Service drops the dead replica once its lease runs out, and lists it
    # again when it is back
    dropped_at = time.monotonic()
    eventually(lambda: _endpoint_addresses(first) == healthy.hosts[:2], timeout=60,
               interval=0.5, what="the dead replica dropped from the kubernetes endpoints")
    dropped_after = time.monotonic() - dropped_at
    third.start()
    eventually(lambda: _endpoint_addresses(second) == healthy.hosts, timeout=60, interval=0.5,
               what="the replica back in the kubernetes endpoints")
    record(item="2", load=f"a writer on replica 1 ({len(acked)} creates, raw HTTPS); the "
                          "python client watching through replica 3",
           fault="replica 3 SIGKILLed after 20 events; the watch resumed on replica 2 from "
                 "its last resourceVersion",
           outcome=f"{len(names)} ADDED events for {len(acked)} acknowledged creates: "
                   f"{len(missed)} missed, {duplicated} duplicated; the kubernetes endpoints "
                   f"dropped the dead replica (within {dropped_after:.0f} s more) and listed "
                   "it again once restarted",
           acked=len(acked), missed=len(missed), duplicated=duplicated, in_order=in_order)
    assert (missed, duplicated, in_order) == ([], 0, True), (missed[:10], seen[:5])


def _availability(gateway: Any) -> tuple[str, str, str]:
    obj = kubectl_json(gateway, "get", "apiservice", APISERVICE_NAME)
    condition = next(c for c in obj["status"]["conditions"] if c["type"] == "Available")
    return condition["status"], condition["reason"], obj["metadata"]["resourceVersion"]


def test_apiservice_availability_agrees_across_replicas(healthy: Replicas) -> None:
    gateways, backend = healthy.gateways, healthy.backend
    views = {g.host: _availability(g)[:2] for g in gateways}
    assert set(views.values()) == {("True", "Passed")}, views
    backend.kill()
    try:
        def all_unavailable() -> dict[str, tuple[str, str]]:
            seen = {g.host: _availability(g)[:2] for g in gateways}
            assert set(seen.values()) == {("False", "FailedDiscoveryCheck")}, seen
            return seen

        began = time.monotonic()
        eventually(all_unavailable, timeout=90, interval=0.5,
                   what="Available False on every replica")
        noticed = time.monotonic() - began
        # every replica's router answers alike while it is down
        codes = {g.host: g.request("GET", GV_PATH)[0] for g in gateways}
        assert set(codes.values()) == {503}, codes
        # and the replicas do not fight over the condition: it stays as written
        version = {_availability(g)[2] for g in gateways}
        time.sleep(3)
        assert {_availability(g)[2] for g in gateways} == version
    finally:
        backend.start()
    began = time.monotonic()
    eventually(lambda: {_availability(g)[:2] for g in gateways} == {("True", "Passed")},
               timeout=90, interval=0.5, what="Available True again on every replica")
    back = time.monotonic() - began
    record(item="2", load="kubectl get apiservice on each replica",
           fault="the backend SIGKILLed, then restarted",
           outcome=f"all three replicas said Available=False (FailedDiscoveryCheck) within "
                   f"{noticed:.0f} s and answered 503; the condition stayed put (no "
                   f"flapping); True again on all three {back:.0f} s after the restart",
           noticed_s=round(noticed, 1), recovered_s=round(back, 1))
