"""What keeps the gateway up and accountable: in-flight limits (429, API Priority and Fairness
turned off), the request deadline (504), Cache-Control, CORS, and the audit log read back line
by line with no secret in it.

Nothing here is timed: a test waits for the event it needs (a request seen in flight by
/metrics, a 504 read off a socket, an audit line), and tells one deadline from another by the
answer each gives."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import API, configmap, expect_status
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.identity import https, token_kubeconfig
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = "alice-token-9f8e7d,alice,uid-alice\nbob-token-1a2b3c,bob,uid-bob\n"
ALICE = "alice-token-9f8e7d"
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
CMS = "/api/v1/namespaces/default/configmaps"
# A list that waits for a revision far in the future: the store gives up after its own 3 s
# with "Too large resource version" (kube's watch-cache wait), which is before the 4 s
# --request-timeout; meanwhile it holds an in-flight slot.
SLOW_LIST = f"{CMS}?resourceVersion=999999999&resourceVersionMatch=NotOlderThan"
REQUEST_TIMEOUT = "4s"
DEADLINE_MESSAGE = ("Timeout: request did not complete within requested timeout "
                    "- context deadline exceeded")
TOO_MANY = "Too many requests, please try again later."
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("limits")
    (work / "policy.yaml").write_text(POLICY)
    proc = token_gateway(
        work, TOKENS,
        "--audit-log-path", str(work / "audit" / "audit.log"),
        "--audit-policy-file", str(work / "policy.yaml"),
        "--audit-log-maxsize", "1", "--audit-log-maxbackup", "3",
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight", "2", "--max-mutating-requests-inflight", "1",
        "--request-timeout", REQUEST_TIMEOUT,
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


def _in_flight(gw: GatewayProcess, kind: str) -> int:
    """apiserver_current_inflight_requests{request_kind=kind} from /metrics, leaving out the
    admin's own scrape (a read-only request, exempt from the limits)."""
    code, raw = gw.request("GET", "/metrics")
    assert code == 200, raw
    prefix = f'apiserver_current_inflight_requests{{request_kind="{kind}"}} '
    value = next((float(line[len(prefix):]) for line in raw.decode().splitlines()
                  if line.startswith(prefix)), 0.0)
    return int(value) - (1 if kind == "readOnly" else 0)


def _hold_read_slots(gw: GatewayProcess, pool: ThreadPoolExecutor,
                     count: int = 2) -> list[Future[Any]]:
    """``count`` slow lists as alice, returned once the gateway is serving all of them."""
    assert _in_flight(gw, "readOnly") == 0
    slow = [pool.submit(https, gw, "GET", SLOW_LIST, token=ALICE) for _ in range(count)]
    eventually(lambda: _in_flight(gw, "readOnly") == count,
               what=f"{count} slow lists in flight")
    return slow


def _expect_too_large(answer: tuple[int, Any]) -> None:
    """The slow list's own end: it held its slot until the store gave up on the revision
    (storage.NewTooLargeResourceVersionError)."""
    too_large = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    body = expect_status(answer, 504, "Timeout", causes=too_large)
    current = body["message"].rpartition(" ")[2]
    assert current.isdigit(), body
    assert body["message"] == f"Timeout: Too large resource version: 999999999, current: {current}"
    assert body["details"] == {"retryAfterSeconds": 1, "causes": too_large}, body


def _expect_too_many(answer: tuple[int, Any, dict[str, str]]) -> None:
    body = expect_status(answer[:2], 429, "TooManyRequests", message=TOO_MANY)
    assert body["details"] == {"retryAfterSeconds": 1}, body
    assert answer[2]["Retry-After"] == "1"
    assert not [h for h in answer[2] if h.lower().startswith("x-kubernetes-pf-")], \
        "API Priority and Fairness is off"


def test_read_only_requests_over_the_limit_get_429(gw: GatewayProcess) -> None:
    with ThreadPoolExecutor(2) as pool:
        slow = _hold_read_slots(gw, pool)
        for _ in range(4):
            _expect_too_many(https(gw, "GET", CMS, token=ALICE))
        for future in slow:
            _expect_too_large(future.result()[:2])


def test_masters_and_watches_are_not_counted(gw: GatewayProcess) -> None:
    watches = [gw.open("GET", f"{CMS}?watch=1") for _ in range(3)]
    try:
        code, body, _ = https(gw, "GET", CMS, token=ALICE)
        assert code == 200, ("three watches are open, over the limit of two", body)
        with ThreadPoolExecutor(2) as pool:
            slow = _hold_read_slots(gw, pool)
            _expect_too_many(https(gw, "GET", CMS, token=ALICE))
            admin_code, raw = gw.request("GET", CMS)
            assert admin_code == 200, ("system:masters is exempt", raw)
            for future in slow:
                _expect_too_large(future.result()[:2])
    finally:
        for watch in watches:
            watch.close()


def _stalled_post(gw: GatewayProcess, query: str = "") -> ssl.SSLSocket:
    """A POST whose body never finishes arriving: it stays in flight until its deadline."""
    ctx = ssl.create_default_context(cafile=str(gw.cert_dir / "ca.crt"))
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gw.port), timeout=30),
                           server_hostname="localhost")
    sock.sendall(f"POST {CMS}{query} HTTP/1.1\r\n".encode()
                 + f"Host: localhost\r\nAuthorization: Bearer {ALICE}\r\n".encode()
                 + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    return sock


def _answer(sock: ssl.SSLSocket) -> tuple[int, Any]:
    """The response the gateway sends on ``sock`` (waiting at most the socket's timeout)."""
    response = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
    try:
        response.begin()
        return response.status, json.loads(response.read())
    finally:
        response.close()
        sock.close()


def test_mutating_limit_is_separate(gw: GatewayProcess) -> None:
    held = _stalled_post(gw)
    try:
        eventually(lambda: _in_flight(gw, "mutating") == 1, what="the stalled POST in flight")
        _expect_too_many(https(gw, "POST", CMS, token=ALICE, body=configmap("refused")))
        code, body, _ = https(gw, "GET", CMS, token=ALICE)
        assert code == 200, ("reads have their own limit", body)
    finally:
        held.close()
    eventually(lambda: _in_flight(gw, "mutating") == 0, what="the stalled POST to end")
    expect_status(API(gw).get(f"{CMS}/refused"), 404, "NotFound",
                  message='configmaps "refused" not found')


def test_request_outliving_the_deadline_is_504_and_watches_outlive_it(
        gw: GatewayProcess) -> None:
    name = "after-the-deadline"
    with gw.open("GET", f"{CMS}?watch=1&fieldSelector=metadata.name%3D{name}") as watch:
        # a request started after the watch reaches its deadline ...
        body = expect_status(_answer(_stalled_post(gw)), 504, "Timeout",
                             message=DEADLINE_MESSAGE)
        assert body["details"] == {}, body
        # ... while the watch goes on, and delivers what happens next
        code, raw = gw.request("POST", CMS, configmap(name))
        assert code == 201, raw
        event = json.loads(watch.readline())
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", name)


def test_timeout_parameter_shortens_the_deadline_only(gw: GatewayProcess) -> None:
    with ThreadPoolExecutor(3) as pool:
        alone, shortened = (pool.submit(https, gw, "GET", path, token=ALICE)
                            for path in (SLOW_LIST, SLOW_LIST + "&timeout=200ms"))
        # more than --request-timeout is capped: this POST would otherwise wait for its body
        # for an hour
        capped = pool.submit(lambda: _answer(_stalled_post(gw, "?timeout=1h")))
        # left alone the list ends by itself, before --request-timeout; asked for 200 ms,
        # the deadline ends it first
        _expect_too_large(alone.result()[:2])
        expect_status(shortened.result()[:2], 504, "Timeout", message=DEADLINE_MESSAGE)
        expect_status(capped.result(), 504, "Timeout", message=DEADLINE_MESSAGE)
    code, body, _ = https(gw, "GET", f"{CMS}?timeout=soon", token=ALICE)
    assert (code, body["reason"], body["code"]) == (400, "BadRequest", 400), body


def test_an_unparsable_timeout_is_kubes_bad_request(gw: GatewayProcess) -> None:
    expect_status(https(gw, "GET", f"{CMS}?timeout=soon", token=ALICE)[:2], 400, "BadRequest",
                  message='invalid timeout specified in the request URL - time: invalid '
                          'duration "soon"')


def test_api_responses_are_not_cacheable(gw: GatewayProcess) -> None:
    for path in (CMS, "/api/v1/namespaces/default/nope", "/version"):
        _, _, headers = https(gw, "GET", path, token=ALICE)
        assert headers["Cache-Control"] == "no-cache, private", path


CORS_HEADERS = {
    "Access-Control-Allow-Origin": "https://console.example.com",
    "Access-Control-Allow-Methods": "POST, GET, OPTIONS, PUT, DELETE, PATCH",
    "Access-Control-Allow-Headers": "Content-Type, Content-Length, Accept-Encoding, "
                                    "X-CSRF-Token, Authorization, X-Requested-With, "
                                    "If-Modified-Since",
    "Access-Control-Expose-Headers": "Date",
    "Access-Control-Allow-Credentials": "true",
}


def _cors(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower().startswith("access-control-")}


def test_cors_preflight_and_response_headers(gw: GatewayProcess) -> None:
    allowed = {"Origin": "https://console.example.com"}
    preflight = {"Access-Control-Request-Method": "POST"}
    code, body, headers = https(gw, "OPTIONS", CMS, headers=allowed | preflight)
    assert (code, body) == (204, "")
    assert _cors(headers) == CORS_HEADERS
    code, _, headers = https(gw, "GET", CMS, token=ALICE, headers=allowed)
    assert code == 200
    assert _cors(headers) == CORS_HEADERS
    # kube's CORS filter passes a request from another origin on untouched: this preflight
    # is an anonymous OPTIONS, which RBAC refuses
    answer = https(gw, "OPTIONS", CMS, headers={"Origin": "https://evil.example.com"} | preflight)
    body = expect_status(answer[:2], 403, "Forbidden")
    assert body["details"] == {"kind": "configmaps"}, body
    assert _cors(answer[2]) == {}


def test_cors_headers_on_a_watch(gw: GatewayProcess) -> None:
    # the head of a watch goes out before its handler returns: the headers are there anyway
    response = gw.open("GET", f"{CMS}?watch=1&timeoutSeconds=1",
                       headers={"Origin": "https://console.example.com"}, timeout=10)
    try:
        assert response.status == 200
        assert _cors(dict(response.headers)) == CORS_HEADERS
        assert response.headers.get_all("Cache-Control") == ["no-cache, private"]
    finally:
        response.close()


def test_options_on_a_resource_is_authorized_with_no_verb(gw: GatewayProcess) -> None:
    """kube's request info names no verb for a resource request by a method it does not map
    (OPTIONS): the refusal says "cannot  resource", with two spaces."""
    expect_status(https(gw, "OPTIONS", CMS, headers={"Origin": "https://evil.example.com"})[:2],
                  403, "Forbidden",
                  message='configmaps is forbidden: User "system:anonymous" cannot  '
                          'resource "configmaps" in API group "" in the namespace "default"')


# -- audit -----------------------------------------------------------------------------------


def test_audit_id_header_names_the_events(gw: GatewayProcess) -> None:
    code, _, headers = https(gw, "GET", f"{CMS}?limit=1",
                             token=ALICE, headers={"User-Agent": "audit-test/1"})
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
    code, body, h1 = https(gw, "GET", CMS, token=ALICE, headers={"Impersonate-User": "carol"})
    expect_status((code, body), 403, "Forbidden", message=(
        'users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API '
        'group "" at the cluster scope'))
    answer = API(gw).get("/api/v1/namespaces", **{
        "Impersonate-User": "carol", "Impersonate-Group": "ops", "Audit-ID": "imp-1"})
    expect_status(answer, 403, "Forbidden", message=(
        'namespaces is forbidden: User "carol" cannot list resource "namespaces" in API group '
        '"" at the cluster scope'))
    code, body, h2 = https(gw, "GET", "/version", token="no-such-token")
    expect_status((code, body), 401, "Unauthorized", message="Unauthorized")
    events = _audit_events(gw)
    denied = next(e for e in events if e["auditID"] == h1["Audit-ID"]
                  and e["stage"] == "ResponseComplete")
    assert denied["responseStatus"]["code"] == 403
    impersonated = next(e for e in events if e["auditID"] == "imp-1"
                        and e["stage"] == "ResponseComplete")
    assert impersonated["user"]["username"] == "admin"
    assert impersonated["impersonatedUser"] == {"username": "carol",
                                                "groups": ["ops", "system:authenticated"]}
    assert impersonated["responseStatus"]["code"] == 403
    failed = [e for e in events if e["auditID"] == h2["Audit-ID"]]
    assert [e["stage"] for e in failed] == ["ResponseStarted"]
    assert failed[0]["responseStatus"]["code"] == 401


def test_audit_policy_levels_and_omitted_stages(gw: GatewayProcess) -> None:
    _, _, health = https(gw, "GET", "/healthz")
    _, _, bob = https(gw, "GET", CMS, token="bob-token-1a2b3c")
    events = _audit_events(gw)
    assert not [e for e in events if e["auditID"] == health["Audit-ID"]], "level None"
    bobs = [e for e in events if e["auditID"] == bob["Audit-ID"]]
    assert [e["stage"] for e in bobs] == ["ResponseComplete"]
    assert bobs[0]["level"] == "Metadata" and "responseObject" not in bobs[0]


def test_watch_has_a_response_started_stage(gw: GatewayProcess) -> None:
    with gw.open("GET", f"{CMS}?watch=1&timeoutSeconds=1",
                 headers={"Audit-ID": "watch-1"}) as watch:
        watch.read()

    def stages() -> list[str]:
        return [e["stage"] for e in _audit_events(gw) if e["auditID"] == "watch-1"]

    # the watch's last line reaches the client before its ResponseComplete is written
    eventually(lambda: len(stages()) == 3, what="the watch's ResponseComplete audit event")
    assert stages() == ["RequestReceived", "ResponseStarted", "ResponseComplete"]


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
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": sa_token}}
    code, _, _ = https(gw, "POST", TOKEN_REVIEWS, token=ALICE, body=review)
    assert code == 403, "alice may not review tokens, and her request is audited"
    code, body = API(gw).post(TOKEN_REVIEWS, review)
    assert code == 201 and body["status"]["authenticated"] is True, body
    lines = _audit_lines(gw)
    assert any('"resource":"secrets"' in line for line in lines), "secrets are audited"
    for line in lines:
        event = json.loads(line)
        assert event["kind"] == "Event"
        for forbidden in (SECRET_VALUE, encoded, sa_token, ALICE,
                          "bob-token-1a2b3c", "no-such-token"):
            assert forbidden not in line, (forbidden[:12], event["auditID"])


def test_audit_log_rotates_by_size(gw: GatewayProcess) -> None:
    blob = "x" * 400_000
    for index in range(6):
        code, raw = gw.request("POST", CMS, configmap(f"big-{index}", blob=blob))
        assert code == 201, raw
    folder = gw.workdir / "audit"
    backups = sorted(folder.glob("audit-*.log"))
    # each of these events holds 400 kB at least twice: far more than 3 MB were written,
    # and only --audit-log-maxbackup rotated files are kept
    assert len(backups) == 3, backups
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
