"""What keeps the gateway up and accountable: in-flight limits (429), the request deadline
(504), Cache-Control, CORS, and the audit log read back line by line with no secret in it."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import GatewayProcess
from tests.support.identity import https, token_kubeconfig

pytestmark = pytest.mark.slow

TOKENS = "alice-token-9f8e7d,alice,uid-alice\nbob-token-1a2b3c,bob,uid-bob\n"
SECRET_VALUE = "s3cr3t-value-that-must-never-be-logged"
POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: Metadata
  users: ["bob"]
  omitStages: ["RequestReceived"]
- level: RequestResponse
"""
# A list that waits for a revision far in the future: the store answers only after ~3 s,
# so it outlives a shorter deadline and holds an in-flight slot meanwhile.
SLOW_LIST = ("/api/v1/namespaces/default/configmaps?resourceVersion=999999999"
             "&resourceVersionMatch=NotOlderThan")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("limits")
    (work / "tokens.csv").write_text(TOKENS)
    (work / "policy.yaml").write_text(POLICY)
    proc = GatewayProcess(
        work, "--token-auth-file", str(work / "tokens.csv"),
        "--audit-log-path", str(work / "audit" / "audit.log"),
        "--audit-policy-file", str(work / "policy.yaml"),
        "--audit-log-maxsize", "1", "--audit-log-maxbackup", "3",
        "--max-requests-inflight", "2", "--max-mutating-requests-inflight", "1",
        "--request-timeout", "2s",
        "--cors-allowed-origins", r"^https://console\.example\.com$",
    )
    with proc:
        proc.kubectl("create", "rolebinding", "alice-edit", "--clusterrole", "edit",
                     "--user", "alice")
        yield proc


def _audit_lines(gw: GatewayProcess) -> list[str]:
    folder = gw.workdir / "audit"
    files = [*sorted(folder.glob("audit-*.log")), folder / "audit.log"]
    return [line for f in files if f.exists() for line in f.read_text().splitlines()]


def _audit_events(gw: GatewayProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _audit_lines(gw)]


# -- limits ----------------------------------------------------------------------------------


def test_read_only_burst_over_the_limit_gets_429(gw: GatewayProcess) -> None:
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(
            lambda _: https(gw, "GET", SLOW_LIST, token="alice-token-9f8e7d"), range(6)))
    refused = [(body, headers) for code, body, headers in answers if code == 429]
    assert len(refused) >= 3, [code for code, _, _ in answers]
    body, headers = refused[0]
    assert headers["Retry-After"] == "1"
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Too many requests, please try again later."
    assert body["details"] == {"retryAfterSeconds": 1}


def test_masters_and_watches_are_not_counted(gw: GatewayProcess) -> None:
    watches = [gw.open("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=5")
               for _ in range(3)]
    try:
        with ThreadPoolExecutor(4) as pool:
            slow = [pool.submit(https, gw, "GET", SLOW_LIST, token="alice-token-9f8e7d")
                    for _ in range(2)]
            time.sleep(0.5)
            code, _, _ = https(gw, "GET", "/api/v1/namespaces/default/configmaps",
                               cert=None, token="alice-token-9f8e7d")
            assert code == 429, "both read-only slots are taken"
            admin_code, _ = gw.request("GET", "/api/v1/namespaces/default/configmaps")
            assert admin_code == 200, "system:masters is exempt"
            for future in slow:
                future.result()
    finally:
        for watch in watches:
            watch.close()


def _hold_a_mutating_slot(gw: GatewayProcess) -> ssl.SSLSocket:
    """A POST whose body never finishes arriving: it stays in flight until the deadline."""
    ctx = ssl.create_default_context(cafile=str(gw.cert_dir / "ca.crt"))
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gw.port)),
                           server_hostname="localhost")
    sock.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\n"
                 b"Host: localhost\r\nAuthorization: Bearer alice-token-9f8e7d\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    return sock


def test_mutating_limit_is_separate(gw: GatewayProcess) -> None:
    held = _hold_a_mutating_slot(gw)
    try:
        time.sleep(0.3)
        code, body, _ = https(gw, "POST", "/api/v1/namespaces/default/configmaps",
                              token="alice-token-9f8e7d",
                              body={"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "refused"}})
        assert code == 429, body
        code, _, _ = https(gw, "GET", "/api/v1/namespaces/default/configmaps",
                           token="alice-token-9f8e7d")
        assert code == 200, "reads have their own limit"
    finally:
        held.close()
    assert gw.kubectl("get", "configmap", "refused", check=False).returncode != 0


def test_request_outliving_the_deadline_is_504(gw: GatewayProcess) -> None:
    # Left alone the list would end after ~3 s with a different 504 (resource version too
    # large); the Timeout message shows the 2 s --request-timeout ended it first.
    started = time.monotonic()
    code, body, _ = https(gw, "GET", SLOW_LIST, token="alice-token-9f8e7d")
    assert code == 504
    assert body["reason"] == "Timeout"
    assert body["message"] == ("Timeout: request did not complete within requested timeout "
                               "- context deadline exceeded")
    assert time.monotonic() - started >= 1.9


def test_timeout_parameter_shortens_the_deadline_only(gw: GatewayProcess) -> None:
    started = time.monotonic()
    code, body, _ = https(gw, "GET", SLOW_LIST + "&timeout=200ms", token="alice-token-9f8e7d")
    assert (code, body["reason"]) == (504, "Timeout")
    assert time.monotonic() - started < 1.8, "ended by ?timeout, not by --request-timeout"
    code, body, _ = https(gw, "GET", SLOW_LIST + "&timeout=1h", token="alice-token-9f8e7d")
    assert body["message"].startswith("Timeout: request did not complete"), \
        "capped at --request-timeout"
    code, body, _ = https(gw, "GET", "/api/v1/namespaces/default/configmaps?timeout=soon",
                          token="alice-token-9f8e7d")
    assert code == 400 and body["reason"] == "BadRequest"


def test_watches_outlive_the_request_timeout(gw: GatewayProcess) -> None:
    started = time.monotonic()
    with gw.open("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=3") \
            as watch:
        watch.read()
    assert time.monotonic() - started > 2.5


def test_api_responses_are_not_cacheable(gw: GatewayProcess) -> None:
    for path in ("/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/nope",
                 "/version"):
        _, _, headers = https(gw, "GET", path, token="alice-token-9f8e7d")
        assert headers["Cache-Control"] == "no-cache, private", path


def test_cors_preflight_and_response_headers(gw: GatewayProcess) -> None:
    origin = {"Origin": "https://console.example.com"}
    code, _, headers = https(gw, "OPTIONS", "/api/v1/namespaces/default/configmaps",
                             headers=origin | {"Access-Control-Request-Method": "POST"})
    assert code == 204
    assert headers["Access-Control-Allow-Origin"] == "https://console.example.com"
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert "Authorization" in headers["Access-Control-Allow-Headers"]
    assert headers["Access-Control-Allow-Credentials"] == "true"
    code, _, headers = https(gw, "GET", "/api/v1/namespaces/default/configmaps",
                             token="alice-token-9f8e7d", headers=origin)
    assert code == 200 and headers["Access-Control-Allow-Origin"] == origin["Origin"]
    code, _, headers = https(gw, "OPTIONS", "/api/v1/namespaces/default/configmaps",
                             headers={"Origin": "https://evil.example.com",
                                      "Access-Control-Request-Method": "POST"})
    assert code != 204
    assert "Access-Control-Allow-Origin" not in headers


# -- audit -----------------------------------------------------------------------------------


def test_audit_id_header_names_the_events(gw: GatewayProcess) -> None:
    code, _, headers = https(gw, "GET", "/api/v1/namespaces/default/configmaps?limit=1",
                             token="alice-token-9f8e7d", headers={"User-Agent": "audit-test/1"})
    assert code == 200
    audit_id = headers["Audit-ID"]
    events = [e for e in _audit_events(gw) if e["auditID"] == audit_id]
    assert [e["stage"] for e in events] == ["RequestReceived", "ResponseComplete"]
    done = events[-1]
    assert done["kind"] == "Event" and done["apiVersion"] == "audit.k8s.io/v1"
    assert done["level"] == "RequestResponse"
    assert done["verb"] == "list"
    assert done["user"] == {"username": "alice", "uid": "uid-alice",
                            "groups": ["system:authenticated"]}
    assert done["objectRef"] == {"resource": "configmaps", "namespace": "default",
                                 "apiVersion": "v1"}
    assert done["responseStatus"]["code"] == 200
    assert done["sourceIPs"] == ["127.0.0.1"]
    assert done["userAgent"] == "audit-test/1"
    assert done["requestURI"] == "/api/v1/namespaces/default/configmaps?limit=1"
    assert done["requestReceivedTimestamp"] <= done["stageTimestamp"]
    assert done["annotations"]["authorization.k8s.io/decision"] == "allow"
    assert done["responseObject"]["kind"] == "ConfigMapList"


def test_audit_records_impersonation_denials_and_failed_logins(gw: GatewayProcess) -> None:
    _, _, h1 = https(gw, "GET", "/api/v1/namespaces/default/configmaps",
                     cert=None, token="alice-token-9f8e7d",
                     headers={"Impersonate-User": "carol"})
    admin_code, _ = gw.request("GET", "/api/v1/namespaces", headers={
        "Impersonate-User": "carol", "Impersonate-Group": "ops", "Audit-ID": "imp-1"})
    _, _, h2 = https(gw, "GET", "/version", token="no-such-token")
    events = _audit_events(gw)
    denied = next(e for e in events if e["auditID"] == h1["Audit-ID"]
                  and e["stage"] == "ResponseComplete")
    assert denied["responseStatus"]["code"] == 403
    impersonated = next(e for e in events if e["auditID"] == "imp-1"
                        and e["stage"] == "ResponseComplete")
    assert impersonated["user"]["username"] == "admin"
    assert impersonated["impersonatedUser"] == {"username": "carol",
                                                "groups": ["ops", "system:authenticated"]}
    assert impersonated["responseStatus"]["code"] == admin_code == 403
    failed = [e for e in events if e["auditID"] == h2["Audit-ID"]]
    assert [e["stage"] for e in failed] == ["ResponseStarted"]
    assert failed[0]["responseStatus"]["code"] == 401


def test_audit_policy_levels_and_omitted_stages(gw: GatewayProcess) -> None:
    _, _, health = https(gw, "GET", "/healthz")
    _, _, bob = https(gw, "GET", "/api/v1/namespaces/default/configmaps",
                      token="bob-token-1a2b3c")
    events = _audit_events(gw)
    assert not [e for e in events if e["auditID"] == health["Audit-ID"]], "level None"
    bobs = [e for e in events if e["auditID"] == bob["Audit-ID"]]
    assert [e["stage"] for e in bobs] == ["ResponseComplete"]
    assert bobs[0]["level"] == "Metadata" and "responseObject" not in bobs[0]


def test_watch_has_a_response_started_stage(gw: GatewayProcess) -> None:
    with gw.open("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
                 headers={"Audit-ID": "watch-1"}) as watch:
        watch.read()
    time.sleep(0.2)
    stages = [e["stage"] for e in _audit_events(gw) if e["auditID"] == "watch-1"]
    assert stages == ["RequestReceived", "ResponseStarted", "ResponseComplete"]


def test_audit_log_holds_no_secret(gw: GatewayProcess, tmp_path: Path) -> None:
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    gw.kubectl("create", "secret", "generic", "db", f"--from-literal=password={SECRET_VALUE}")
    gw.kubectl("get", "secret", "db", "-o", "yaml")
    gw.kubectl("get", "secrets", "-o", "json")
    gw.kubectl("patch", "secret", "db", "-p", json.dumps({"stringData": {"more": SECRET_VALUE}}))
    gw.kubectl("create", "serviceaccount", "robot")
    sa_token = gw.kubectl("create", "token", "robot").stdout.strip()
    config = token_kubeconfig(gw, tmp_path / "robot.kubeconfig", sa_token)
    gw.kubectl("--kubeconfig", str(config), "auth", "whoami")
    https(gw, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                       cert=None, token="alice-token-9f8e7d", body={
                           "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                           "spec": {"token": sa_token}})
    gw.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": sa_token}})
    lines = _audit_lines(gw)
    assert any('"resource":"secrets"' in line for line in lines), "secrets are audited"
    for line in lines:
        event = json.loads(line)
        assert event["kind"] == "Event"
        for forbidden in (SECRET_VALUE, encoded, sa_token, "alice-token-9f8e7d",
                          "bob-token-1a2b3c", "no-such-token"):
            assert forbidden not in line, (forbidden[:12], event["auditID"])


def test_audit_log_rotates_by_size(gw: GatewayProcess) -> None:
    blob = "x" * 400_000
    for index in range(6):
        code, _ = gw.request("POST", "/api/v1/namespaces/default/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"big-{index}"},
            "data": {"blob": blob}})
        assert code == 201
    folder = gw.workdir / "audit"
    backups = sorted(folder.glob("audit-*.log"))
    assert 1 <= len(backups) <= 3
    for path in [*backups, folder / "audit.log"]:
        assert path.stat().st_size <= 1024 * 1024 + 2 * 1024 * 1024
        for line in path.read_text().splitlines():
            json.loads(line)


def test_a_policy_file_that_is_not_a_policy_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("kind: ConfigMap\n")
    proc = GatewayProcess(tmp_path, "--audit-log-path", "-",
                          "--audit-policy-file", str(tmp_path / "policy.yaml"))
    proc.start(wait=None)
    assert proc.proc is not None
    assert proc.proc.wait(60) == 1
    assert "not an audit.k8s.io Policy" in proc.log().splitlines()[-1]
