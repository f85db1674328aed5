"""``gateway serve`` on a real etcd: unreachable at start, then ready; a failed write."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.api import API, CM, expect_status, sized_configmap
from tests.support.delayproxy import DelayProxy
from tests.support.etcd import EtcdServer
from tests.support.gateway import ADMIN, GatewayProcess, free_port
from tests.support.identity import https
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


def log_events(proc: GatewayProcess, event: str) -> list[dict]:
    """The gateway's JSON log lines whose event is ``event`` (the whole log, not its tail)."""
    lines = proc.log_path.read_text(errors="replace").splitlines()
    return [entry for entry in (json.loads(line) for line in lines if line.startswith("{"))
            if entry.get("event") == event]


def test_unreachable_etcd_at_start_then_ready_as_soon_as_it_answers(workdir):
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = GatewayProcess(workdir, f"--etcd-servers={endpoint}")
    proc.start(wait="/healthz/ping")
    try:
        # the first attempt failed
        first = eventually(lambda: log_events(proc, "storage not reachable; retrying"),
                           what="the retry log line")[0]
        assert (first["level"], first["storage"], first["attempts"]) == (
            "warning", f"etcd {endpoint}", 1)
        assert first["error"].startswith("etcd is unavailable: "), first
        code, body = proc.request("GET", "/readyz")
        assert code == 500
        assert "[-]etcd failed: reason withheld\n" in body.decode()
        assert body.decode().endswith("readyz check failed\n")
        code, body = proc.request("GET", "/readyz/etcd")
        assert code == 500
        assert body.startswith(b"internal server error: etcd is unavailable: "), body
        assert body.endswith(b"\n") and body.count(b"\n") == 1, body
        # routes are not all installed yet (no APIService could be read): a path nobody
        # serves may be served in a moment, so it is 503 with Retry-After, not 404
        unknown = "/apis/nope.example.com/v1/things"
        code, status, headers = https(proc, "GET", unknown, cert=ADMIN)
        expect_status((code, status), 503, "ServiceUnavailable",
                      message="the request has been made before all known HTTP paths have "
                              "been installed, please try again")
        assert (status["details"], headers["Retry-After"]) == ({"retryAfterSeconds": 5}, "5")

        # several attempts fail (backing off from 0.2 s) inside one 10-second log window
        time.sleep(2)
        with EtcdServer(port=port):
            proc.wait_for("/readyz", timeout=60)
            expect_status(API(proc).get(unknown), 404, "NotFound")
            code, made = API(proc).post(CM.format(ns="default"), sized_configmap("after-etcd"))
            assert (code, made["metadata"]["name"]) == (201, "after-etcd"), made
            assert proc.kubectl("get", "--raw", "/readyz").stdout == "ok"
        [reached] = log_events(proc, "storage reachable")
        retries = log_events(proc, "storage not reachable; retrying")
        failed = reached["attempts"] - 1
        # one line per 10-second window, not one per attempt: each says how many were made
        assert retries[0]["attempts"] == 1
        assert len(retries) < failed, (retries, reached)
    finally:
        proc.stop()


def test_a_write_etcd_refuses_is_a_500_status_and_nothing_is_stored(workdir):
    with EtcdServer(quota_backend_bytes=1024 * 1024) as etcd:
        proc = GatewayProcess(workdir, f"--etcd-servers={etcd.endpoint}").start()
        api = API(proc)
        path = CM.format(ns="default")
        try:
            assert api.post(path, sized_configmap("small"))[0] == 201
            for i in range(20):  # until the 1 MiB quota is used up
                answer = api.post(path, sized_configmap(f"big-{i}", 900_000))
                if answer[0] != 201:
                    break
            # the etcd3 store returns etcd's error untranslated, and ErrorToAPIStatus makes a
            # 500 of it: no reason, no details, etcd's words as the message
            refused = (500, {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "etcdserver: mvcc: database space exceeded", "code": 500})
            assert answer == refused
            # the write that crossed the quota may be applied all the same (etcd checks the
            # quota again after applying and answers NOSPACE either way); once the alarm is
            # raised, a write is refused before it is applied: nothing of it is stored
            assert api.post(path, sized_configmap("after-alarm", 900_000)) == refused
            expect_status(api.get(f"{path}/after-alarm"), 404, "NotFound",
                          message='configmaps "after-alarm" not found')
            assert api.get(f"{path}/small")[0] == 200
        finally:
            proc.stop()


def test_a_consistent_list_sees_a_write_made_through_another_gateway(tmp_path):
    """A list without a resourceVersion is served from the watch cache only once the cache
    holds etcd's current revision (kube's consistent list from cache): a write acknowledged
    by another gateway on the same etcd is in it at once, however late the reading
    gateway's watch is (here etcd's answers reach it 0.1 s late)."""
    with EtcdServer() as etcd:
        port = int(etcd.endpoint.rsplit(":", 1)[1])
        with DelayProxy(port, 0.1) as slow, \
                GatewayProcess(tmp_path / "a", f"--etcd-servers={etcd.endpoint}") as a, \
                GatewayProcess(tmp_path / "b",
                               f"--etcd-servers=http://127.0.0.1:{slow.port}") as b:
            writer, reader = API(a), API(b)
            path = CM.format(ns="default")
            assert reader.get(f"{path}?resourceVersion=0")[0] == 200  # b's cache is warm
            for i in range(5):
                code, made = writer.post(path, sized_configmap(f"seen-{i}"))
                assert code == 201, made
                code, listed = reader.get(path)
                assert code == 200, listed
                names = {item["metadata"]["name"] for item in listed["items"]}
                assert f"seen-{i}" in names, i
                assert int(listed["metadata"]["resourceVersion"]) >= \
                    int(made["metadata"]["resourceVersion"])
