"""``gateway serve`` on a real etcd: unreachable at start, then ready; a failed write."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.etcd import EtcdServer
from tests.support.gateway import GatewayProcess, free_port

pytestmark = pytest.mark.slow


def configmap(name: str, size: int = 10) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"v": "x" * size}}


def test_unreachable_etcd_at_start_then_ready_as_soon_as_it_answers(workdir):
    port = free_port()
    proc = GatewayProcess(workdir, f"--etcd-servers=http://127.0.0.1:{port}")
    proc.start(wait="/healthz/ping")
    try:
        time.sleep(3)
        code, body = proc.request("GET", "/readyz")
        assert code == 500
        assert "[-]etcd failed: reason withheld" in body.decode()
        assert body.decode().endswith("readyz check failed\n")
        code, body = proc.request("GET", "/readyz/etcd")
        assert code == 500 and body.startswith(b"internal server error:")
        retries = [line for line in proc.log().splitlines()
                   if "storage not reachable" in line]
        assert len(retries) == 1, "one log line per attempt window, not one per attempt"
        assert "etcd http://127.0.0.1" in retries[0]

        with EtcdServer(port=port):
            proc.wait_for("/readyz", timeout=60)
            code, body = proc.request("POST", "/api/v1/namespaces/default/configmaps",
                                      configmap("after-etcd"))
            assert code == 201, body
            assert proc.kubectl("get", "--raw", "/readyz").stdout == "ok"
    finally:
        proc.stop()


def test_a_write_etcd_refuses_is_a_500_status_and_nothing_is_stored(workdir):
    with EtcdServer(extra_args=["--quota-backend-bytes", str(1024 * 1024)]) as etcd:
        proc = GatewayProcess(workdir, f"--etcd-servers={etcd.endpoint}").start()
        try:
            path = "/api/v1/namespaces/default/configmaps"
            assert proc.request("POST", path, configmap("small"))[0] == 201
            for i in range(20):
                code, body = proc.request("POST", path, configmap(f"big-{i}", 900_000))
                if code != 201:
                    break
            status = json.loads(body)
            assert (code, status["kind"], status["reason"]) == (500, "Status", "InternalError")
            assert "database space exceeded" in status["message"]
            assert proc.request("GET", f"{path}/big-{i}")[0] == 404
            assert proc.request("GET", f"{path}/small")[0] == 200
        finally:
            proc.stop()
