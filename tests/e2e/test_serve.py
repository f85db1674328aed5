"""``gateway serve`` as a user meets it: kubectl against a TLS endpoint, health, errors."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from tests.support.gateway import GatewayProcess, gateway_command

pytestmark = pytest.mark.slow


def test_kubectl_version_reports_the_server(gateway):
    out = gateway.kubectl("version").stdout
    assert "Server Version: v1.32.0+gateway." in out
    info = json.loads(gateway.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert (info["major"], info["minor"]) == ("1", "32")
    assert info["platform"].startswith("linux/")


def test_kubectl_get_raw_readyz(gateway):
    assert gateway.kubectl("get", "--raw", "/readyz").stdout == "ok"
    verbose = gateway.kubectl("get", "--raw", "/readyz?verbose").stdout
    for check in ("ping", "etcd", "etcd-readiness", "informer-sync", "shutdown",
                  "poststarthook/start-system-namespaces-controller"):
        assert f"[+]{check} ok" in verbose
    assert verbose.endswith("readyz check passed\n")


def test_health_endpoints_checks_and_exclusions(gateway):
    for path in ("/healthz", "/livez", "/readyz", "/readyz/etcd", "/livez/ping",
                 "/healthz/etcd"):
        assert gateway.request("GET", path) == (200, b"ok"), path
    code, body = gateway.request("GET", "/livez?verbose&exclude=etcd&exclude=nothing")
    text = body.decode()
    assert code == 200
    assert "[+]etcd excluded: ok" in text
    assert 'warn: some health checks cannot be excluded: no matches for "nothing"' in text
    assert text.endswith("livez check passed\n")


def test_unknown_paths_are_a_not_found_status(gateway):
    for path in ("/nope", "/apis/nothing.example.com/v1/things", "/api/v1/nonexistent"):
        code, body = gateway.request("GET", path)
        assert code == 404, path
        assert json.loads(body) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource",
            "reason": "NotFound", "details": {}, "code": 404,
        }
    result = gateway.kubectl("get", "--raw", "/nope", check=False)
    assert result.returncode != 0 and "NotFound" in result.stderr


def test_version_json(gateway):
    code, body = gateway.request("GET", "/version")
    info = json.loads(body)
    assert code == 200
    assert set(info) >= {"major", "minor", "gitVersion", "gitCommit", "gitTreeState",
                         "buildDate", "goVersion", "compiler", "platform"}


def test_system_namespaces_exist(gateway):
    code, body = gateway.request("GET", "/api/v1/namespaces")
    names = {item["metadata"]["name"] for item in json.loads(body)["items"]}
    assert code == 200
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_the_development_pki_is_written_with_private_keys_private(gateway):
    for name in ("ca.crt", "apiserver.crt", "front-proxy-ca.crt", "front-proxy-client.crt",
                 "sa.pub", "admin.crt", "admin.kubeconfig"):
        assert (gateway.cert_dir / name).is_file(), name
    for name in ("ca.key", "apiserver.key", "front-proxy-client.key", "sa.key", "admin.key",
                 "admin.kubeconfig"):
        assert (gateway.cert_dir / name).stat().st_mode & 0o077 == 0, name


def test_plain_http_is_not_served(gateway):
    import urllib.request

    with pytest.raises(Exception):  # noqa: B017 - any failure: there is no HTTP listener
        urllib.request.urlopen(f"http://127.0.0.1:{gateway.port}/healthz", timeout=5)


def test_every_log_line_of_a_request_carries_its_id(workdir):
    with GatewayProcess(workdir, "--v=4") as proc:
        code, _ = proc.request("GET", "/version", headers={"Audit-ID": "trace-me-123"})
        assert code == 200
        proc.request("GET", "/nope", headers={"Audit-ID": "trace-me-456"})
    lines = [json.loads(line) for line in proc.log().splitlines() if line.startswith("{")]
    assert lines, proc.log()
    for request_id in ("trace-me-123", "trace-me-456"):
        mine = [line for line in lines if line.get("request_id") == request_id]
        assert mine, f"no log line for {request_id}"
        assert all("timestamp" in line and "level" in line for line in mine)


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("--secure-port=70000", "--secure-port"),
        ("--authorization-mode=Bogus", "--authorization-mode"),
        ("--token-auth-file=/no/such/file", "--token-auth-file"),
        ("--secure-port=abc", "--secure-port"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_flag(flag, named):
    result = subprocess.run([*gateway_command(), "serve", flag], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert named in result.stderr


def test_sigterm_stops_gracefully(workdir):
    proc = GatewayProcess(workdir).start()
    assert proc.stop(signal.SIGTERM) == 0
    assert '"stopped"' in proc.log()


def test_sigint_stops_gracefully(workdir):
    proc = GatewayProcess(workdir).start()
    assert proc.stop(signal.SIGINT) == 0


def test_a_port_in_use_is_one_clear_line(gateway, workdir):
    proc = GatewayProcess(workdir, port=gateway.port)
    proc.start(wait=None)
    assert proc.proc.wait(60) == 1
    errors = [line for line in proc.log().splitlines() if "error:" in line]
    assert len(errors) == 1 and "--secure-port" in errors[0], proc.log()


def test_a_corrupt_state_db_refuses_to_start_and_is_left_untouched(workdir):
    data = workdir / "data"
    data.mkdir()
    garbage = b"this is not a database" * 1000
    (data / "state.db").write_bytes(garbage)
    proc = GatewayProcess(workdir)
    proc.start(wait=None)
    assert proc.proc.wait(60) == 1
    errors = [line for line in proc.log().splitlines() if "error:" in line]
    assert len(errors) == 1 and "state.db" in errors[0], proc.log()
    assert (data / "state.db").read_bytes() == garbage


def test_sigterm_lets_an_in_flight_request_finish(workdir):
    import socket
    import time

    proc = GatewayProcess(workdir).start()
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "in-flight"}, "data": {"k": "v" * 1000}}).encode()
    raw = socket.create_connection(("127.0.0.1", proc.port), timeout=30)
    conn = proc.ssl_context().wrap_socket(raw, server_hostname="localhost")
    head = (f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    conn.sendall(head + body[:100])  # the request is in flight: half its body sent
    time.sleep(0.3)
    proc.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert proc.proc.poll() is None, "the gateway waits for the in-flight request"
    conn.sendall(body[100:])
    response = b""
    while b"\r\n\r\n" not in response:
        response += conn.recv(65536)
    assert response.startswith(b"HTTP/1.1 201"), response[:200]
    conn.close()
    assert proc.proc.wait(30) == 0
    # a new connection after SIGTERM is refused: the listener is closed
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proc.port), timeout=2).close()


def test_console_logs_for_people(workdir):
    with GatewayProcess(workdir, "--log-format", "console") as proc:
        assert proc.request("GET", "/readyz")[0] == 200
    text = proc.log()
    assert "serving securely" in text
    assert not any(line.startswith("{") for line in text.splitlines())
