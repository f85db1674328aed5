"""``gateway serve`` as a user meets it: kubectl against a TLS endpoint, health, errors."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import urllib.request

import pytest

from tests.support.api import API, configmap, expect_status
from tests.support.gateway import GatewayProcess, gateway_command
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


def test_kubectl_version_reports_the_server(gateway):
    out = gateway.kubectl("version").stdout
    assert "Server Version: v1.32.0+gateway." in out
    info = json.loads(gateway.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert (info["major"], info["minor"]) == ("1", "32")
    assert info["platform"].startswith("linux/")


#: Every post-start hook, in the order they run (each server's builder adds its own: the
#: generic server's, apiextensions', kube core's, the aggregator's, the controllers').
HOOKS = [f"poststarthook/{name}" for name in (
    "generic-apiserver-start-informers", "start-apiextensions-controllers",
    "crd-informer-synced", "start-system-namespaces-controller",
    "start-service-ip-repair-controllers", "bootstrap-controller", "rbac/bootstrap-roles",
    "rbac/aggregate-cluster-roles", "priority-and-fairness-config-producer",
    "priority-and-fairness-config-consumer", "apiservice-registration-controller",
    "apiservice-status-local-available-controller",
    "apiservice-status-remote-available-controller", "apiservice-discovery-controller",
    "apiservice-openapi-controller", "kube-apiserver-autoregistration",
    "start-cluster-authentication-info-controller", "start-kube-controllers")]


def test_kubectl_get_raw_readyz(gateway):
    assert gateway.kubectl("get", "--raw", "/readyz").stdout == "ok"
    verbose = gateway.kubectl("get", "--raw", "/readyz?verbose").stdout
    checks = ["ping", "etcd", "etcd-readiness", "informer-sync", *HOOKS,
              "autoregister-completion", "shutdown"]
    assert verbose.splitlines() == [f"[+]{check} ok" for check in checks] + [
        "readyz check passed"]
    healthz = gateway.kubectl("get", "--raw", "/healthz?verbose").stdout
    checks = ["ping", "etcd", *HOOKS, "autoregister-completion"]
    assert healthz.splitlines() == [f"[+]{check} ok" for check in checks] + [
        "healthz check passed"]


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
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", "Error from server (NotFound): the server could not find the requested resource\n")


def test_version_json(gateway):
    code, body = gateway.request("GET", "/version")
    info = json.loads(body)
    assert code == 200
    # kube 1.32's version.Info, field for field
    assert list(info) == ["major", "minor", "gitVersion", "gitCommit", "gitTreeState",
                          "buildDate", "goVersion", "compiler", "platform"]
    assert (info["major"], info["minor"]) == ("1", "32")
    assert info["gitVersion"].startswith("v1.32.0+gateway.")
    assert info["platform"].startswith("linux/")


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


def test_plain_http_to_the_tls_port_is_closed_without_an_answer(gateway):
    # kube-apiserver (Go's TLS server) answers "HTTP/1.0 400 Bad Request" with the body
    # "Client sent an HTTP request to an HTTPS server."; the gateway's TLS layer closes the
    # connection without writing a byte
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536) == b"", "an orderly close (EOF), nothing sent"
    with pytest.raises(http.client.RemoteDisconnected,
                       match=r"^Remote end closed connection without response$"):
        urllib.request.urlopen(f"http://127.0.0.1:{gateway.port}/healthz", timeout=30)


def test_every_log_line_of_a_request_carries_its_id(workdir):
    with GatewayProcess(workdir, "--v=4") as proc:
        code, _ = proc.request("GET", "/version", headers={"Audit-ID": "trace-me-123"})
        assert code == 200
        expect_status(API(proc).get("/nope", **{"Audit-ID": "trace-me-456"}), 404, "NotFound",
                      message="the server could not find the requested resource")
    lines = [json.loads(line) for line in proc.log().splitlines() if line.startswith("{")]
    assert lines, proc.log()
    for request_id in ("trace-me-123", "trace-me-456"):
        mine = [line for line in lines if line.get("request_id") == request_id]
        assert mine, f"no log line for {request_id}"
        assert all("timestamp" in line and "level" in line for line in mine)


@pytest.mark.parametrize(
    ("flag", "line"),
    [
        ("--secure-port=70000", "--secure-port: 70000 is not a valid port (1-65535)"),
        ("--authorization-mode=Bogus", "--authorization-mode: unknown authorization mode "
                                       "'Bogus' (supported: AlwaysAllow, AlwaysDeny, RBAC)"),
        ("--token-auth-file=/no/such/file",
         "--token-auth-file: /no/such/file does not exist or is not a file"),
        ("--secure-port=abc", "argument --secure-port: invalid int value: 'abc'"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_flag(flag, line):
    result = subprocess.run([*gateway_command(), "serve", flag], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"gateway serve: error: {line}\n")


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
    address = f"127.0.0.1:{gateway.port}"
    assert errors == [
        f"gateway serve: error: --secure-port: cannot listen on {address}: error while "
        f"attempting to bind on address ('127.0.0.1', {gateway.port}): address already in use"
    ], proc.log()


def test_a_corrupt_state_db_refuses_to_start_and_is_left_untouched(workdir):
    data = workdir / "data"
    data.mkdir()
    garbage = b"this is not a database" * 1000
    (data / "state.db").write_bytes(garbage)
    proc = GatewayProcess(workdir)
    proc.start(wait=None)
    assert proc.proc.wait(60) == 1
    errors = [line for line in proc.log().splitlines() if "error:" in line]
    assert errors == [f"gateway serve: error: {data / 'state.db'} is not a usable SQLite "
                      f"database: file is not a database"], proc.log()
    assert (data / "state.db").read_bytes() == garbage


def mutating_in_flight(proc: GatewayProcess) -> int:
    """apiserver_current_inflight_requests{request_kind="mutating"}, from /metrics."""
    code, body = proc.request("GET", "/metrics")
    assert code == 200, body
    prefix = 'apiserver_current_inflight_requests{request_kind="mutating"} '
    values = [line[len(prefix):] for line in body.decode().splitlines()
              if line.startswith(prefix)]
    return int(float(values[0])) if values else 0


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=30).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sigterm_lets_an_in_flight_request_finish(workdir):
    proc = GatewayProcess(workdir).start()
    body = json.dumps(configmap("in-flight", k="v" * 1000)).encode()
    raw = socket.create_connection(("127.0.0.1", proc.port), timeout=30)
    conn = proc.ssl_context().wrap_socket(raw, server_hostname="localhost")
    head = (f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    conn.sendall(head + body[:100])  # half the body sent...
    # ... and the gateway is serving it
    eventually(lambda: mutating_in_flight(proc) == 1, what="the POST in flight")
    proc.proc.send_signal(signal.SIGTERM)
    # the listener is closed: the gateway is draining, and waits for the request
    eventually(lambda: refused(proc.port), what="the listener closed")
    assert "shutting down: failing /readyz, draining requests" in proc.log()
    assert proc.proc.poll() is None, "the gateway waits for the in-flight request"
    conn.sendall(body[100:])
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = conn.recv(65536)
        assert chunk, response
        response += chunk
    assert response.startswith(b"HTTP/1.1 201 Created\r\n"), response[:200]
    assert b"\r\nConnection: close\r\n" in response, "a response while draining closes"
    conn.close()
    assert proc.proc.wait(30) == 0
    assert '"stopped"' in proc.log()


def test_console_logs_for_people(workdir):
    with GatewayProcess(workdir, "--log-format", "console") as proc:
        assert proc.request("GET", "/readyz")[0] == 200
    text = proc.log_path.read_text(errors="replace")  # whole: start-up lines come first
    assert "serving securely" in text
    assert not any(line.startswith("{") for line in text.splitlines())


def kubeconfig_state(proc: GatewayProcess) -> tuple[bytes, float]:
    return proc.kubeconfig.read_bytes(), proc.kubeconfig.stat().st_mtime_ns


def test_a_gateway_that_fails_to_start_leaves_the_kubeconfig_alone(workdir):
    """A second gateway on a locked data dir exits 1 and the admin kubeconfig still points at
    the first; a second one that runs (its own data dir, the same certificates) does not take
    the kubeconfig from a running gateway either; once the first has stopped, it does."""
    first = GatewayProcess(workdir).start()
    try:
        before = kubeconfig_state(first)
        assert f"server: {first.url}\n" in before[0].decode()
        locked = GatewayProcess(workdir)
        locked.start(wait=None)
        assert locked.proc.wait(60) == 1
        assert "is in use by another gateway process" in locked.log()
        assert kubeconfig_state(first) == before
        assert first.kubectl("get", "namespace", "default").returncode == 0

        other = GatewayProcess(workdir, "--data-dir", str(workdir / "other-data"))
        with other:
            assert "another running gateway" in other.log_path.read_text()
            assert kubeconfig_state(first) == before
    finally:
        first.stop()
    with other:
        assert f"server: {other.url}\n" in other.kubeconfig.read_text()
        assert other.kubectl("get", "namespace", "default").returncode == 0


def test_sigterm_while_the_post_start_hooks_run_stops(workdir):
    """A SIGTERM as soon as the port listens (the post-start hooks still running) stops the
    gateway; it once hung in 1 start in about 16 (a task whose cancellation was swallowed)."""
    for attempt in range(4):
        proc = GatewayProcess(workdir / str(attempt))
        proc.start(wait=None)
        eventually(lambda p=proc: not refused(p.port), timeout=60, interval=0.01,
                   what="the port listening")
        assert proc.stop(signal.SIGTERM, timeout=30) == 0, proc.log()
