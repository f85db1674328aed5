"""The proxy's fast lane answers exactly as the slow lane (aiohttp's server and the handler
chain) does, and takes only what it may.

Each case is sent twice to a gateway fronting the real test backend over mTLS, with a bearer
token, on keep-alive connections of its own:

- fast: the request is the connection's first, so the lane takes it when it can;
- slow: the connection first asks for ``/version`` (not a remote group version), which hands
  it to aiohttp for good, then sends the same request.

The two answers must be the same (status, reason, every header but Date's value, body), apart
from the request id where the client sent none; the lane's own counter
(``aggregator_proxy_fast_lane_requests_total``) says which lane served each one, so a case the
lane must decline is checked to be declined, and the others to be taken."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.backend import (
    APISERVICE_NAME,
    GROUP_VERSION,
    BackendProcess,
    apiservice_available,
)
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = "alice-token,alice,uid-alice,devs\nbob-token,bob,uid-bob\n"
POLICY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: fast-lane-flunders}
rules:
- {apiGroups: [wardle.example.com], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fast-lane-alice}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: fast-lane-flunders}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"""
FLUNDERS = f"/apis/{GROUP_VERSION}/namespaces/wardle/flunders"
COUNTER = re.compile(r"^aggregator_proxy_fast_lane_requests_total (\S+)$", re.M)


@dataclass
class Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with token_gateway(tmp_path_factory.mktemp("fast-lane"), TOKENS,
                       "--enable-aggregator-routing") as proc:
        proc.kubectl("apply", "-f", "-", input=POLICY)
        backend = BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), proc)
        with backend:
            proc.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
            eventually(lambda: apiservice_available(proc), timeout=60,
                       what=f"APIService {APISERVICE_NAME} Available")
            for name in ("kept", "gone-fast", "gone-slow"):
                code, body = proc.request("POST", FLUNDERS, {
                    "apiVersion": GROUP_VERSION, "kind": "Flunder",
                    "metadata": {"name": name, "labels": {"app": "lane"}}})
                assert code == 201, body
            yield proc


def _served_by_lane(gw: GatewayProcess) -> float:
    code, body = gw.request("GET", "/metrics")
    assert code == 200
    match = COUNTER.search(body.decode())
    assert match, "the fast lane's counter is exported"
    return float(match.group(1))


def _connection(gw: GatewayProcess) -> http.client.HTTPSConnection:
    """A keep-alive connection with no client certificate (the token says who)."""
    return http.client.HTTPSConnection("127.0.0.1", gw.port, context=gw.ssl_context(None),
                                       timeout=30)


def _send(gw: GatewayProcess, method: str, path: str, headers: dict[str, str], *,
          slow: bool) -> Answer:
    conn = _connection(gw)
    try:
        if slow:
            conn.request("GET", "/version")
            first = conn.getresponse()
            first.read()
            assert first.status == 200 and not first.will_close
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        body = response.read()
        return Answer(response.status, response.reason, response.getheaders(), body)
    finally:
        conn.close()


def _both(gw: GatewayProcess, method: str, path: str, headers: dict[str, str]
          ) -> tuple[Answer, Answer, float]:
    """(the fast answer, the slow answer, requests the lane served of the two)."""
    before = _served_by_lane(gw)
    fast = _send(gw, method, path, headers, slow=False)
    slow = _send(gw, method, path, headers, slow=True)
    return fast, slow, _served_by_lane(gw) - before


def _normalized(answer: Answer, client_id: str | None) -> tuple:
    """What must be equal: the request id (and the backend's echo of it) masked unless the
    client chose it; Date's value masked."""
    ids = answer.header("Audit-ID")
    assert len(ids) == 1, answer.headers
    if client_id is not None:
        assert ids == [client_id]
    body = answer.body.replace(ids[0].encode(), b"<audit-id>") if client_id is None \
        else answer.body
    headers = sorted((k, "<date>" if k.lower() == "date" else
                      ("<audit-id>" if k.lower() == "audit-id" and client_id is None else v))
                     for k, v in answer.headers)  # names as written: clients may compare them
    return answer.status, answer.reason, headers, hashlib.sha256(body).hexdigest(), len(body)


ALICE = {"Authorization": "Bearer alice-token"}
#: What client-go based controllers send: their errors come back in protobuf.
PROTOBUF_FIRST = "application/vnd.kubernetes.protobuf, application/json"

#: (name, method, path, headers, status, taken by the lane)
CASES = [
    ("list", "GET", FLUNDERS, ALICE, 200, True),
    ("get", "GET", f"{FLUNDERS}/kept", ALICE, 200, True),
    ("missing", "GET", f"{FLUNDERS}/nothing-here", ALICE, 404, True),
    ("head", "HEAD", FLUNDERS, ALICE, 200, True),
    ("options", "OPTIONS", f"{FLUNDERS}/kept", ALICE, None, True),
    ("query sorted as Go does", "GET", f"{FLUNDERS}?limit=5&labelSelector=app=lane", ALICE,
     200, True),
    ("discovery", "GET", f"/apis/{GROUP_VERSION}", ALICE, 200, True),
    ("what the backend sees", "GET", f"{FLUNDERS}/kept/whoami",
     {**ALICE, "X-Forwarded-For": "10.0.0.1", "User-Agent": "lane-test"}, 200, True),
    ("client's own Audit-ID", "GET", f"{FLUNDERS}/kept/whoami",
     {**ALICE, "Audit-ID": "lane-test-id-1"}, 200, True),
    ("Connection: close", "GET", f"{FLUNDERS}/kept", {**ALICE, "Connection": "close"}, 200,
     True),
    ("backend's Status", "GET", f"{FLUNDERS}/kept/fail?code=500", ALICE, 500, True),
    ("redirect refused", "GET", f"{FLUNDERS}/kept/redirect", ALICE, 502, True),
    ("streamed and chunked", "GET", f"{FLUNDERS}?bulk=300Ki", ALICE, 200, True),
    ("bad timeout", "GET", f"{FLUNDERS}?timeout=soon", ALICE, 400, True),
    ("deadline", "GET", f"{FLUNDERS}/kept/slow?seconds=5&timeout=1s", ALICE, 504, True),
    ("bad token", "GET", FLUNDERS, {"Authorization": "Bearer nobody"}, 401, True),
    ("no RBAC", "GET", FLUNDERS, {"Authorization": "Bearer bob-token"}, 403, True),
    ("bad token, protobuf asked", "GET", FLUNDERS,
     {"Authorization": "Bearer nobody", "Accept": PROTOBUF_FIRST}, 401, True),
    ("no RBAC, protobuf asked", "GET", FLUNDERS,
     {"Authorization": "Bearer bob-token", "Accept": PROTOBUF_FIRST}, 403, True),
    ("deadline, protobuf asked", "GET", f"{FLUNDERS}/kept/slow?seconds=5&timeout=1s",
     {**ALICE, "Accept": PROTOBUF_FIRST}, 504, True),
    ("anonymous", "GET", FLUNDERS, {}, 403, True),
    ("declined: claimed identity", "GET", f"{FLUNDERS}/kept/whoami",
     {**ALICE, "X-Remote-User": "mallory"}, 200, False),
    ("declined: impersonation", "GET", FLUNDERS, {**ALICE, "Impersonate-User": "bob"}, 403,
     False),
    ("declined: watch", "GET", f"{FLUNDERS}?watch=1&timeoutSeconds=1", ALICE, 200, False),
    ("declined: escaped path", "GET", f"{FLUNDERS}/k%65pt", ALICE, 200, False),
    ("declined: local group", "GET", "/api/v1/namespaces/default", ALICE, 403, False),
]


@pytest.mark.parametrize(("method", "path", "headers", "code", "taken"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_both_lanes_answer_alike(gw: GatewayProcess, method: str, path: str,
                                 headers: dict[str, str], code: int | None,
                                 taken: bool) -> None:
    fast, slow, served = _both(gw, method, path, headers)
    assert served == (1 if taken else 0), "the lane took what it should, and only that"
    if code is not None:
        assert fast.status == code, fast.body[:500]
    client_id = headers.get("Audit-ID")
    assert _normalized(fast, client_id) == _normalized(slow, client_id)


def test_a_body_goes_to_aiohttp(gw: GatewayProcess) -> None:
    """A GET with a body is left to aiohttp (the lane relays bodiless requests only)."""
    before = _served_by_lane(gw)
    conn = _connection(gw)
    try:
        conn.request("GET", FLUNDERS, body=b"{}", headers=ALICE)
        response = conn.getresponse()
        assert response.status == 200, response.read()[:300]
        response.read()
    finally:
        conn.close()
    assert _served_by_lane(gw) == before


def test_deletes_alike(gw: GatewayProcess) -> None:
    """A DELETE through each lane: the same answer but for the object's own fields."""
    before = _served_by_lane(gw)
    fast = _send(gw, "DELETE", f"{FLUNDERS}/gone-fast", ALICE, slow=False)
    slow = _send(gw, "DELETE", f"{FLUNDERS}/gone-slow", ALICE, slow=True)
    assert _served_by_lane(gw) - before == 1
    assert fast.status == slow.status == 200, (fast.body[:300], slow.body[:300])
    assert sorted(k.lower() for k, _ in fast.headers) == \
        sorted(k.lower() for k, _ in slow.headers)
    assert json.loads(fast.body)["metadata"]["name"] == "gone-fast"


def test_many_requests_on_one_connection(gw: GatewayProcess) -> None:
    """Keep-alive: a connection serves request after request in the lane, then goes to
    aiohttp at the first request the lane does not take, and keeps serving."""
    before = _served_by_lane(gw)
    conn = _connection(gw)
    ids = set()
    try:
        for path in [f"{FLUNDERS}/kept"] * 20 + ["/version", f"{FLUNDERS}/kept"]:
            conn.request("GET", path, headers=ALICE)
            response = conn.getresponse()
            assert response.status == 200, response.read()[:300]
            response.read()
            ids.add(response.getheader("Audit-ID"))
    finally:
        conn.close()
    assert _served_by_lane(gw) - before == 20
    assert len(ids) == 22 and None not in ids
    assert all(uuid.UUID(i).version == 4 for i in ids)
