"""Every verb through the aggregator's proxy, on both of the gateway's paths, with and without
the right to it, and with a backend TLS configuration that cannot work.

One gateway (bearer tokens, RBAC) fronts the real test backend over mTLS. alice's RBAC allows
every verb on flunders; bob has none. Each case is sent

- ``lane``: as the first request of a fresh keep-alive connection, which the fast lane takes
  when it can carry it (GET, HEAD, OPTIONS, DELETE; the others it hands to aiohttp);
- ``aiohttp``: on a connection that first asked for ``/version`` (a path the lane never
  takes), so aiohttp's server has it for good;

and the lane's counter (``aggregator_proxy_fast_lane_requests_total``) says which path served
it. Each case uses a namespace of its own, so what reached the backend is known exactly: an
unauthorized or misconfigured request must never reach it.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.support.backend import (
    APISERVICE_NAME,
    GROUP,
    GROUP_VERSION,
    BackendProcess,
    apiservice_available,
)
from tests.support.certs import Issuer, pem
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = "alice-token,alice,uid-alice,devs\nbob-token,bob,uid-bob\n"
POLICY = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: proxy-verbs-flunders}}
rules:
- {{apiGroups: [{GROUP}], resources: ["*"], verbs: ["*"]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: proxy-verbs-alice}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: proxy-verbs-flunders}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
"""
APISERVICE = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE_NAME}"
COUNTER = re.compile(r"^aggregator_proxy_fast_lane_requests_total (\S+)$", re.M)
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
PATHS = ("lane", "aiohttp")
VERBS = ("GET", "HEAD", "OPTIONS", "DELETE", "POST", "PUT", "PATCH", "watch")
#: The verbs the fast lane carries (bodiless, not long-running); it hands the others over.
LANE_VERBS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
#: kube's RBAC verb of each (OPTIONS has none: kube's RequestInfo leaves it empty).
RBAC_VERB = {"GET": "get", "HEAD": "get", "OPTIONS": "", "DELETE": "delete", "POST": "create",
             "PUT": "update", "PATCH": "patch", "watch": "watch"}
NOT_PEM = "unable to load root certificates: unable to parse bytes as PEM block\n"
UNTRUSTED = ("error trying to reach service: tls: failed to verify certificate: x509: "
             "certificate signed by unknown authority\n")


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Case:
    """One verb's request in a namespace of its own."""

    verb: str
    namespace: str

    @property
    def collection(self) -> str:
        return f"/apis/{GROUP_VERSION}/namespaces/{self.namespace}/flunders"

    @property
    def item(self) -> str:
        return f"{self.collection}/obj"

    @property
    def method(self) -> str:
        return "GET" if self.verb == "watch" else self.verb

    @property
    def path(self) -> str:
        if self.verb == "watch":
            return f"{self.collection}?watch=1&timeoutSeconds=1"
        return self.collection if self.verb == "POST" else self.item

    @property
    def body(self) -> bytes | None:
        if self.verb == "POST":
            return json.dumps(_flunder("obj")).encode()
        if self.verb == "PUT":
            return json.dumps(_flunder("obj", reference="put")).encode()
        if self.verb == "PATCH":
            return json.dumps({"spec": {"reference": "patched"}}).encode()
        return None

    @property
    def headers(self) -> dict[str, str]:
        if self.verb == "PATCH":
            return {"Content-Type": "application/merge-patch+json"}
        if self.body is not None:
            return {"Content-Type": "application/json"}
        return {}

    @property
    def lane_takes(self) -> bool:
        return self.verb in LANE_VERBS

    @property
    def needs_object(self) -> bool:
        return self.verb not in ("POST", "OPTIONS")


def _flunder(name: str, **spec: str) -> dict[str, Any]:
    return {"apiVersion": GROUP_VERSION, "kind": "Flunder", "metadata": {"name": name},
            "spec": spec or {"reference": "verbs"}}


def _case(verb: str) -> Case:
    return Case(verb, f"verbs-{verb.lower()}-{uuid.uuid4().hex[:8]}")


# -- the gateway and its backend -----------------------------------------------------------------


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with token_gateway(tmp_path_factory.mktemp("proxy-verbs"), TOKENS,
                       "--enable-aggregator-routing") as proc:
        proc.kubectl("apply", "-f", "-", input=POLICY)
        yield proc


@pytest.fixture(scope="module")
def backend(gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[BackendProcess]:
    proc = BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), gw)
    with proc:
        gw.kubectl("apply", "-f", "-", input=proc.manifests_yaml("127.0.0.1"))
        eventually(lambda: apiservice_available(gw), timeout=60, what="APIService Available")
        yield proc


def _set_ca_bundle(gw: GatewayProcess, ca_bundle: str) -> None:
    code, body = gw.request("PATCH", APISERVICE, json.dumps(
        {"spec": {"caBundle": ca_bundle}}).encode(),
        {"Content-Type": "application/merge-patch+json"})
    assert code == 200, body


def _probe(gw: GatewayProcess) -> Answer:
    """A GET as alice that never names an object of a case."""
    return _send(gw, "aiohttp", "GET", f"/apis/{GROUP_VERSION}/namespaces/probe/flunders",
                 ALICE)


@pytest.fixture
def trusted(gw: GatewayProcess, backend: BackendProcess) -> BackendProcess:
    """The APIService trusts the backend's CA (a test that changed it puts it back)."""
    code, body = gw.request("GET", APISERVICE)
    assert code == 200, body
    if json.loads(body)["spec"].get("caBundle") != backend.ca_bundle_b64:
        _set_ca_bundle(gw, backend.ca_bundle_b64)
        eventually(lambda: _probe(gw).status == 200, timeout=30, what="the backend trusted")
    return backend


@pytest.fixture
def not_pem(gw: GatewayProcess, backend: BackendProcess) -> Iterator[BackendProcess]:
    """spec.caBundle is base64, but what it holds is no PEM."""
    _set_ca_bundle(gw, base64.b64encode(b"this is not a certificate bundle").decode())
    eventually(lambda: _probe(gw).status == 500, timeout=30, what="the bundle refused")
    yield backend


@pytest.fixture
def another_ca(gw: GatewayProcess, backend: BackendProcess) -> Iterator[BackendProcess]:
    """spec.caBundle is a good PEM bundle, of a CA that did not sign the backend's
    certificate."""
    other = base64.b64encode(pem(Issuer.new("not-the-backends-ca").cert)).decode()
    _set_ca_bundle(gw, other)
    eventually(lambda: _probe(gw).status == 503, timeout=30, what="the backend distrusted")
    yield backend


# -- sending ------------------------------------------------------------------------------------


def _lane_served(gw: GatewayProcess) -> float:
    code, body = gw.request("GET", "/metrics")
    assert code == 200
    match = COUNTER.search(body.decode())
    assert match, "the fast lane's counter is exported"
    return float(match.group(1))


def _send(gw: GatewayProcess, path: str, method: str, target: str, headers: dict[str, str],
          body: bytes | None = None) -> Answer:
    """One request on a keep-alive connection of its own, without a client certificate;
    ``path`` says which of the gateway's paths is to serve it."""
    conn = http.client.HTTPSConnection("127.0.0.1", gw.port, context=gw.ssl_context(None),
                                       timeout=30)
    try:
        if path == "aiohttp":
            conn.request("GET", "/version")
            first = conn.getresponse()
            first.read()
            assert first.status == 200 and not first.will_close
        conn.request(method, target, body=body, headers=headers)
        response = conn.getresponse()
        return Answer(response.status, response.getheaders(), response.read())
    finally:
        conn.close()


def _through(gw: GatewayProcess, path: str, case: Case, user: dict[str, str]
             ) -> tuple[Answer, float]:
    """(the answer, requests the lane served for it)."""
    before = _lane_served(gw)
    answer = _send(gw, path, case.method, case.path, {**user, **case.headers}, case.body)
    return answer, _lane_served(gw) - before


def _setup(gw: GatewayProcess, case: Case) -> None:
    """The object the verb acts on, created by the admin through the gateway."""
    if case.needs_object:
        code, body = gw.request("POST", case.collection, _flunder("obj"))
        assert code == 201, body


def _reached(backend: BackendProcess, case: Case) -> list:
    """What reached the backend in the case's namespace, the setup's create left out."""
    return [r for r in backend.requests(prefix=case.collection)
            if not (r.method == "POST" and r.user != "alice")]


def _assert_path(served: float, path: str, case: Case) -> None:
    expected = 1 if path == "lane" and case.lane_takes else 0
    assert served == expected, f"the lane served {served} of 1 ({path}, {case.verb})"


# -- the cases ------------------------------------------------------------------------------------

SUCCESS = {"GET": 200, "HEAD": 200, "OPTIONS": 405, "DELETE": 200, "POST": 201, "PUT": 200,
           "PATCH": 200, "watch": 200}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("verb", VERBS)
def test_authorized(gw: GatewayProcess, trusted: BackendProcess, verb: str, path: str) -> None:
    """alice may: the backend answers, and hears it from alice (never her token)."""
    case = _case(verb)
    _setup(gw, case)
    answer, served = _through(gw, path, case, ALICE)
    _assert_path(served, path, case)
    assert answer.status == SUCCESS[verb], answer.body[:500]
    reached = _reached(trusted, case)
    assert [r.method for r in reached] == [case.method], reached
    heard = reached[0]
    assert (heard.user, heard.authenticated) == ("alice", True)
    assert set(heard.groups) == {"devs", "system:authenticated"}
    assert heard.header("Authorization") is None
    assert heard.header("Audit-ID") == answer.header("Audit-ID")
    if verb == "HEAD":
        assert answer.body == b"" and int(answer.header("Content-Length") or 0) > 0
    elif verb == "watch":
        events = [json.loads(line) for line in answer.body.splitlines() if line.strip()]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
            [("ADDED", "obj")]
    elif verb != "OPTIONS":
        assert answer.json()["metadata"]["name"] == "obj"
        if verb in ("PUT", "PATCH"):
            assert answer.json()["spec"]["reference"] == ("put" if verb == "PUT" else "patched")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("verb", VERBS)
def test_unauthorized(gw: GatewayProcess, trusted: BackendProcess, verb: str,
                      path: str) -> None:
    """bob may not: a 403 Status in kube's words, and the backend never hears of it."""
    case = _case(verb)
    answer, served = _through(gw, path, case, BOB)
    _assert_path(served, path, case)
    assert answer.status == 403, answer.body[:500]
    assert answer.header("Content-Type") == "application/json"
    assert _reached(trusted, case) == []
    if verb == "HEAD":
        assert answer.body == b""
        return
    status = answer.json()
    where = f'in API group "{GROUP}" in the namespace "{case.namespace}"'
    what = "" if verb in ("POST", "watch") else ' "obj"'
    assert status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'flunders.{GROUP}{what} is forbidden: User "bob" cannot '
                   f'{RBAC_VERB[verb]} resource "flunders" {where}',
        "reason": "Forbidden",
        "details": {**({"name": "obj"} if what else {}), "group": GROUP, "kind": "flunders"},
        "code": 403}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("verb", VERBS)
def test_ca_bundle_not_pem(gw: GatewayProcess, not_pem: BackendProcess, verb: str,
                           path: str) -> None:
    """A caBundle that decodes to no PEM: kube cannot build the transport, and answers every
    request with its error as plain text, 500, before dialling anyone."""
    case = _case(verb)
    answer, served = _through(gw, path, case, ALICE)
    _assert_path(served, path, case)
    assert answer.status == 500, answer.body[:500]
    assert answer.header("Content-Type") == "text/plain; charset=utf-8"
    assert answer.header("X-Content-Type-Options") == "nosniff"
    assert answer.body == (b"" if verb == "HEAD" else NOT_PEM.encode())
    assert _reached(not_pem, case) == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("verb", VERBS)
def test_ca_bundle_of_another_ca(gw: GatewayProcess, another_ca: BackendProcess, verb: str,
                                 path: str) -> None:
    """A caBundle of a CA that did not sign the backend's certificate: the handshake fails,
    and the answer is kube's 503 with Go's words for it."""
    case = _case(verb)
    answer, served = _through(gw, path, case, ALICE)
    _assert_path(served, path, case)
    assert answer.status == 503, answer.body[:500]
    assert answer.header("Content-Type") == "text/plain; charset=utf-8"
    assert answer.body == (b"" if verb == "HEAD" else UNTRUSTED.encode())
    assert _reached(another_ca, case) == []


def test_ca_bundle_not_pem_is_one_warning_per_controller(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A gateway whose APIService has such a caBundle from the start: the discovery and
    OpenAPI controllers each say so in one warning line (no traceback), and serving it on
    either path is no panic."""
    with token_gateway(tmp_path_factory.mktemp("not-pem"), TOKENS,
                       "--enable-aggregator-routing") as proc:
        proc.kubectl("apply", "-f", "-", input=POLICY)
        backend = BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), proc)
        with backend:
            docs = backend.manifests("127.0.0.1")
            docs[-1]["spec"]["caBundle"] = base64.b64encode(b"no PEM in here").decode()
            proc.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
            eventually(lambda: apiservice_available(proc), timeout=60, what="APIService Available")
            for path in PATHS:
                answer = _send(proc, path, "GET", _case("GET").item, ALICE)
                assert (answer.status, answer.body) == (500, NOT_PEM.encode())

            def warned() -> list[dict[str, Any]]:
                warnings = [e for e in _log(proc) if e.get("level") == "warning"
                            and "unable to parse bytes as PEM block" in str(e)]
                loggers = sorted(e["logger"] for e in warnings)
                assert loggers == ["gateway.aggregator.discovery",
                                   "gateway.aggregator.openapi"], warnings
                return warnings

            eventually(warned, timeout=30, what="one warning from each controller")
            entries = _log(proc)
            assert not [e for e in entries if e.get("event") == "panic while serving a request"]
            ours = [e for e in entries if e.get("logger", "").startswith("gateway")]
            assert not [e for e in ours if "exception" in e or "Traceback" in str(e)]
            assert backend.requests(prefix=f"/apis/{GROUP_VERSION}/namespaces/") == []


def _log(gw: GatewayProcess) -> list[dict[str, Any]]:
    """The gateway's log lines (JSON)."""
    return [json.loads(line) for line in gw.log_path.read_text().splitlines()
            if line.startswith("{")]


@pytest.mark.parametrize("path", PATHS)
def test_rbac_changes_are_seen(gw: GatewayProcess, trusted: BackendProcess, path: str) -> None:
    """Authorization answers are remembered only until RBAC changes: a grant lets bob in, and
    taking it back shuts him out again, on either path."""
    case = _case("GET")
    _setup(gw, case)
    name = f"bob-reads-{case.namespace}"
    grant = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {name}}}
rules:
- {{apiGroups: [{GROUP}], resources: [flunders], verbs: [get]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {name}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}}]
"""

    def as_bob() -> int:
        answer, served = _through(gw, path, case, BOB)
        _assert_path(served, path, case)
        return answer.status

    assert as_bob() == 403
    assert as_bob() == 403  # answered from the cache now
    gw.kubectl("apply", "-f", "-", input=grant)
    eventually(lambda: as_bob() == 200, timeout=30, what="bob let in by the grant")
    gw.kubectl("delete", "clusterrolebinding", name)
    eventually(lambda: as_bob() == 403, timeout=30, what="bob shut out again")
    gw.kubectl("delete", "clusterrole", name)
