"""API aggregation end to end, as kube-aggregator v1.32 does it: a real extension apiserver
(tests/support/backend.py) registered behind the gateway with ``kubectl apply`` of its
Namespace, Service, Endpoints and APIService, the gateway running with
``--enable-aggregator-routing``; requests through the gateway's mTLS proxy with raw HTTP,
``kubectl get --raw`` and kubectl's resource commands.

One gateway and one backend serve the whole module; a test that kills the backend starts it
again, and every test first makes sure the backend is up and its APIService Available."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.api import expect_status
from tests.support.backend import (
    APISERVICE_NAME,
    GROUP,
    GROUP_VERSION,
    BackendProcess,
    Received,
    parse_quantity,
)
from tests.support.certs import Issuer, pem
from tests.support.gateway import GatewayProcess, send, token_gateway
from tests.support.identity import token_kubeconfig
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = "alice-token,alice,uid-alice,devs\nbob-token,bob,uid-bob\n"
NAMESPACE = "wardle"
FLUNDERS = f"/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/flunders"
APISERVICE = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE_NAME}"
#: alice may do anything with flunders; bob has no RBAC at all.
POLICY = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: flunder-editor}}
rules:
- {{apiGroups: [{GROUP}], resources: ["*"], verbs: ["*"]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: alice-flunders}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flunder-editor}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
"""
PLAIN_TEXT = "text/plain; charset=utf-8"
AVAILABLE_TIMEOUT = 60.0


# -- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with token_gateway(tmp_path_factory.mktemp("aggregation"), TOKENS,
                       "--enable-aggregator-routing") as proc:
        proc.kubectl("apply", "-f", "-", input=POLICY)
        yield proc


@pytest.fixture(scope="module")
def backend(gw: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[BackendProcess]:
    proc = BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), gw)
    with proc:
        out = gw.kubectl("apply", "-f", "-", input=proc.manifests_yaml("127.0.0.1")).stdout
        assert f"apiservice.apiregistration.k8s.io/{APISERVICE_NAME} created" in out, out
        wait_available(gw)
        yield proc


@pytest.fixture(autouse=True)
def serving(gw: GatewayProcess, backend: BackendProcess) -> BackendProcess:
    """Every test starts with the backend up, trusted and Available (a test that failed
    half-way may have left it otherwise)."""
    if not backend.alive():
        backend.restart()
    code, obj = admin(gw, "GET", APISERVICE)[:2]
    assert code == 200, obj
    if obj["spec"].get("caBundle") != backend.ca_bundle_b64:
        patch_ca_bundle(gw, backend.ca_bundle_b64)
    wait_available(gw)
    return backend


def admin(gw: GatewayProcess, method: str, path: str, body: Any = None,
          headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """One request with the admin certificate: (status, JSON or text, headers)."""
    return _decoded(send(gw.url + path, method, gw.ssl_context(), body, headers))


def as_token(gw: GatewayProcess, token: str, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """One request with a bearer token and no client certificate."""
    return _decoded(send(gw.url + path, method, gw.ssl_context(None), body,
                         {**(headers or {}), "Authorization": f"Bearer {token}"}))


def _decoded(answer: tuple[int, bytes, dict[str, str]]) -> tuple[int, Any, dict[str, str]]:
    code, raw, headers = answer
    if headers.get("Content-Type", "").startswith("application/json"):
        return code, json.loads(raw), headers
    return code, raw.decode(errors="replace"), headers


def unique(prefix: str = "f") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def flunder(name: str, **spec: str) -> dict[str, Any]:
    return {"apiVersion": GROUP_VERSION, "kind": "Flunder", "metadata": {"name": name},
            "spec": spec or {"reference": "e2e"}}


def available_condition(gw: GatewayProcess) -> dict[str, Any]:
    code, obj, _ = admin(gw, "GET", APISERVICE)
    assert code == 200, obj
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or []
                  if c["type"] == "Available"]
    assert len(conditions) == 1, obj.get("status")
    return conditions[0]


def wait_available(gw: GatewayProcess) -> dict[str, Any]:
    def passed() -> dict[str, Any]:
        condition = available_condition(gw)
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "True", "Passed", "all checks passed"), condition
        return condition

    return eventually(passed, timeout=AVAILABLE_TIMEOUT, interval=0.2,
                      what=f"{APISERVICE_NAME} Available")


def patch_ca_bundle(gw: GatewayProcess, ca_bundle: str) -> None:
    code, obj, _ = admin(gw, "PATCH", APISERVICE,
                         json.dumps({"spec": {"caBundle": ca_bundle}}).encode(),
                         {"Content-Type": "application/merge-patch+json"})
    assert code == 200, obj


def one_request(backend: BackendProcess, path: str) -> Received:
    """The one request that reached the backend at ``path`` (a path used once)."""
    received = backend.requests(path)
    assert len(received) == 1, received
    return received[0]


def header_names(received: Received) -> set[str]:
    return {name.lower() for name, _ in received.headers}


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def reset_peak_rss(pid: int) -> bool:
    """Make VmHWM the current RSS (Linux's clear_refs 5); False where that is not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


# -- registration and discovery ----------------------------------------------------------------


def test_the_registered_backend_is_discovered_and_available(gw, backend):
    code, groups, _ = admin(gw, "GET", "/apis")
    assert code == 200, groups
    wardle = {"groupVersion": GROUP_VERSION, "version": "v1alpha1"}
    assert {"name": GROUP, "versions": [wardle], "preferredVersion": wardle} in groups["groups"]
    code, group, _ = admin(gw, "GET", f"/apis/{GROUP}")
    assert code == 200 and group["preferredVersion"] == wardle, group
    # /apis/<g>/<v> itself is the backend's document, through the proxy
    resources = json.loads(gw.kubectl("get", "--raw", f"/apis/{GROUP_VERSION}").stdout)
    assert resources["groupVersion"] == GROUP_VERSION
    assert [r["name"] for r in resources["resources"]] == ["flunders"]

    out = gw.kubectl("get", "apiservices", APISERVICE_NAME).stdout.splitlines()
    assert out[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert out[1].split()[:3] == [APISERVICE_NAME, f"{NAMESPACE}/api", "True"]
    condition = available_condition(gw)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True", "Passed", "all checks passed")
    # the availability checks reached the backend as kube's aggregator
    checks = backend.requests(f"/apis/{GROUP_VERSION}", method="GET")
    assert any(r.user == "system:kube-aggregator" and r.groups == ["system:masters"]
               and r.client_cn == "front-proxy-client" for r in checks), checks


# -- CRUD through the proxy --------------------------------------------------------------------


def test_crud_with_raw_http(gw, backend):
    name = unique()
    code, created, _ = admin(gw, "POST", FLUNDERS, flunder(name, reference="one"))
    assert code == 201, created
    assert (created["kind"], created["metadata"]["name"], created["metadata"]["namespace"]) \
        == ("Flunder", name, NAMESPACE)
    uid = created["metadata"]["uid"]

    code, got, _ = admin(gw, "GET", f"{FLUNDERS}/{name}")
    assert code == 200 and got["metadata"]["uid"] == uid and got["spec"] == {
        "reference": "one"}, got
    code, listed, _ = admin(gw, "GET", FLUNDERS)
    assert code == 200 and listed["kind"] == "FlunderList", listed
    assert name in [i["metadata"]["name"] for i in listed["items"]]
    # the query goes through: a field selector the backend applies
    code, selected, _ = admin(gw, "GET", f"{FLUNDERS}?fieldSelector=metadata.name%3D{name}")
    assert code == 200 and [i["metadata"]["name"] for i in selected["items"]] == [name]
    # a second create is the backend's own 409 Status
    expect_status(admin(gw, "POST", FLUNDERS, flunder(name))[:2], 409, "AlreadyExists",
                  message=f'flunders.{GROUP} "{name}" already exists')

    code, deleted, _ = admin(gw, "DELETE", f"{FLUNDERS}/{name}")
    assert code == 200 and deleted["metadata"]["uid"] == uid, deleted
    expect_status(admin(gw, "GET", f"{FLUNDERS}/{name}")[:2], 404, "NotFound",
                  message=f'flunders.{GROUP} "{name}" not found')
    # each went to the backend once, as admin
    for method in ("POST", "DELETE"):
        path = FLUNDERS if method == "POST" else f"{FLUNDERS}/{name}"
        assert any(r.user == "admin" for r in backend.requests(path, method=method))


def test_crud_with_kubectl_raw(gw, backend, tmp_path):
    name = unique()
    manifest = tmp_path / "flunder.json"
    manifest.write_text(json.dumps(flunder(name, reference="raw")))
    created = json.loads(gw.kubectl("create", "--raw", FLUNDERS, "-f", str(manifest)).stdout)
    assert created["metadata"]["name"] == name
    got = json.loads(gw.kubectl("get", "--raw", f"{FLUNDERS}/{name}").stdout)
    assert got["spec"] == {"reference": "raw"} and got["metadata"]["uid"] == \
        created["metadata"]["uid"]
    listed = json.loads(gw.kubectl("get", "--raw", FLUNDERS).stdout)
    assert name in [i["metadata"]["name"] for i in listed["items"]]
    gw.kubectl("delete", "--raw", f"{FLUNDERS}/{name}")
    missing = gw.kubectl("get", "--raw", f"{FLUNDERS}/{name}", check=False)
    assert missing.returncode != 0
    assert f'flunders.{GROUP} \\"{name}\\" not found' in missing.stderr or \
        f'flunders.{GROUP} "{name}" not found' in missing.stderr, missing.stderr


# -- who the backend sees ----------------------------------------------------------------------


def test_the_backend_sees_the_admin_certificates_user(gw, backend):
    path = f"{FLUNDERS}/{unique()}/whoami"
    code, body, headers = admin(gw, "GET", path)
    assert code == 200, body
    seen = one_request(backend, path)
    assert seen.authenticated and seen.client_cn == "front-proxy-client", seen
    assert seen.user == "admin"
    assert {"system:masters", "system:authenticated"} <= set(seen.groups), seen.groups
    assert seen.extra == {}
    # the request's Audit-ID is the one the gateway answered with
    assert headers["Audit-ID"] and seen.header("Audit-ID") == headers["Audit-ID"]
    assert seen.header("X-Forwarded-For") and "127.0.0.1" in seen.header("X-Forwarded-For")
    assert "x-remote-uid" not in header_names(seen)
    # the backend's CORS headers are kube's business, not the backend's; others pass
    assert headers.get("X-Backend") == "wardle"
    assert "Access-Control-Allow-Origin" not in headers
    assert body["user"] == "admin"


def test_the_backend_sees_a_token_user_and_never_the_token(gw, backend):
    path = f"{FLUNDERS}/{unique()}/whoami"
    code, body, headers = as_token(gw, "alice-token", "GET", path, headers={
        "X-Remote-User": "mallory", "X-Remote-Group": "system:masters",
        "X-Remote-Extra-Scopes": "everything", "X-Remote-Uid": "uid-mallory"})
    assert code == 200, body
    seen = one_request(backend, path)
    assert seen.user == "alice"
    assert seen.groups == ["devs", "system:authenticated"], seen.groups
    assert seen.extra == {}
    assert seen.header_all("X-Remote-User") == ["alice"]
    sent = [(k.lower(), v) for k, v in seen.headers]
    assert not [h for h in sent if "mallory" in h[1] or h[1] == "everything"], sent
    # alice has a uid, and kube 1.32 still does not send it (RemoteRequestHeaderUID is off)
    assert "x-remote-uid" not in header_names(seen)
    assert "authorization" not in header_names(seen)
    assert not any("alice-token" in v for _, v in seen.headers)
    assert seen.header("Audit-ID") == headers["Audit-ID"]
    assert seen.header("X-Forwarded-For")


def test_the_backend_sees_the_impersonated_user(gw, backend):
    path = f"{FLUNDERS}/{unique()}/whoami"
    code, body, headers = admin(gw, "GET", path, headers={
        "Impersonate-User": "alice", "Impersonate-Group": "devs",
        "Impersonate-Extra-Scopes.example.com%2fteam": "blue"})
    assert code == 200, body
    seen = one_request(backend, path)
    assert seen.user == "alice"
    assert set(seen.groups) == {"devs", "system:authenticated"}, seen.groups
    assert "system:masters" not in seen.groups
    # the extra's key, decoded from Impersonate-Extra- and escaped again for X-Remote-Extra-
    assert seen.extra == {"scopes.example.com/team": ["blue"]}, seen.extra
    assert seen.header_all("X-Remote-Extra-Scopes.example.com%2Fteam") == ["blue"] or \
        seen.header_all("X-Remote-Extra-scopes.example.com%2Fteam") == ["blue"], seen.headers
    assert not [k for k in header_names(seen) if k.startswith("impersonate-")], seen.headers
    assert seen.header("Audit-ID") == headers["Audit-ID"]

    # kubectl --as, with kubectl get --raw
    path = f"{FLUNDERS}/{unique()}/whoami"
    got = json.loads(gw.kubectl("get", "--raw", path, "--as=alice").stdout)
    assert got["user"] == "alice"
    seen = one_request(backend, path)
    assert (seen.user, seen.groups) == ("alice", ["system:authenticated"])
    assert not [k for k in header_names(seen) if k.startswith("impersonate-")], seen.headers


def test_authorization_comes_first(gw, backend):
    """bob may not touch flunders: the gateway says so, and the backend never hears of it."""
    before = len(backend.requests(prefix=FLUNDERS))
    name = unique()
    expect_status(as_token(gw, "bob-token", "GET", FLUNDERS)[:2], 403, "Forbidden",
                  message=f'flunders.{GROUP} is forbidden: User "bob" cannot list resource '
                          f'"flunders" in API group "{GROUP}" in the namespace "{NAMESPACE}"')
    expect_status(as_token(gw, "bob-token", "POST", FLUNDERS, flunder(name))[:2], 403,
                  "Forbidden",
                  message=f'flunders.{GROUP} is forbidden: User "bob" cannot create resource '
                          f'"flunders" in API group "{GROUP}" in the namespace "{NAMESPACE}"')
    # claiming to be someone else in front-proxy headers changes nothing
    expect_status(as_token(gw, "bob-token", "GET", f"{FLUNDERS}/{name}/whoami",
                           headers={"X-Remote-User": "admin",
                                    "X-Remote-Group": "system:masters"})[:2],
                  403, "Forbidden",
                  message=f'flunders.{GROUP} "{name}" is forbidden: User "bob" cannot get '
                          f'resource "flunders/whoami" in API group "{GROUP}" in the '
                          f'namespace "{NAMESPACE}"')
    # nor does asking to be admin without the right to impersonate
    code, body, _ = as_token(gw, "bob-token", "GET", FLUNDERS,
                             headers={"Impersonate-User": "admin"})
    assert code == 403, body
    # alice may, and her request does arrive
    assert as_token(gw, "alice-token", "GET", FLUNDERS)[0] == 200
    after = backend.requests(prefix=FLUNDERS)
    assert len(after) == before + 1, after[before:]
    assert after[-1].user == "alice"


# -- TLS to the backend ------------------------------------------------------------------------


def test_a_wrong_ca_bundle_makes_the_proxy_refuse_the_backend(gw, backend):
    """The proxy verifies the backend's certificate against spec.caBundle; the availability
    check does not (kube's check is an insecure GET), so the APIService stays Available."""
    before = available_condition(gw)
    wrong = Issuer.new("not-the-backends-ca")
    patch_ca_bundle(gw, base64.b64encode(pem(wrong.cert)).decode())
    served = len(backend.requests(prefix=FLUNDERS))
    try:
        def refused() -> str:
            code, body, headers = admin(gw, "GET", FLUNDERS)
            assert code == 503, (code, body)
            assert headers["Content-Type"] == PLAIN_TEXT, headers
            return body

        body = eventually(refused, what="the proxy refusing the backend's certificate")
        assert body == ("error trying to reach service: tls: failed to verify certificate: "
                        "x509: certificate signed by unknown authority\n"), body
        code, body, _ = admin(gw, "POST", FLUNDERS, flunder(unique()))
        assert code == 503 and body.startswith("error trying to reach service: tls: "), body
        # nothing reached the backend's handlers: the handshake failed first
        assert len(backend.requests(prefix=FLUNDERS)) == served

        # the availability check, insecure as kube's, still passes
        checks = len(backend.requests(f"/apis/{GROUP_VERSION}"))
        eventually(lambda: len(backend.requests(f"/apis/{GROUP_VERSION}")) > checks,
                   timeout=AVAILABLE_TIMEOUT, what="a discovery check after the change")
        condition = available_condition(gw)
        assert condition == before, condition
        row = gw.kubectl("get", "apiservice", APISERVICE_NAME, "--no-headers").stdout.split()
        assert row[2] == "True", row
    finally:
        patch_ca_bundle(gw, backend.ca_bundle_b64)
    eventually(lambda: admin(gw, "GET", FLUNDERS)[0] == 200, what="the backend trusted again")


# -- the backend going away and coming back ----------------------------------------------------


def test_a_killed_backend(gw, backend):
    port = backend.port
    backend.kill()
    try:
        refused = (f"error trying to reach service: dial tcp 127.0.0.1:{port}: connect: "
                   "connection refused\n")
        # at once: kube's plain-text 503, from the proxy (the dial failed) or, once the
        # controller has noticed, from the router
        code, body, headers = admin(gw, "GET", FLUNDERS)
        assert code == 503 and headers["Content-Type"] == PLAIN_TEXT, (code, headers)
        assert body == "service unavailable\n" or \
            body.startswith("error trying to reach service: "), body
        if "connection refused" in body:
            assert body == refused, body

        url = f"https://127.0.0.1:{port}/apis/{GROUP_VERSION}"

        def failed_discovery() -> dict[str, Any]:
            condition = available_condition(gw)
            assert (condition["status"], condition["reason"]) == (
                "False", "FailedDiscoveryCheck"), condition
            return condition

        condition = eventually(failed_discovery, timeout=AVAILABLE_TIMEOUT, interval=0.2,
                               what="Available False (FailedDiscoveryCheck)")
        assert condition["message"] == (
            f'failing or missing response from {url}: Get "{url}": dial tcp 127.0.0.1:{port}: '
            "connect: connection refused"), condition
        row = gw.kubectl("get", "apiservice", APISERVICE_NAME, "--no-headers").stdout.split()
        assert row[2:4] == ["False", "(FailedDiscoveryCheck)"], row

        # unavailable: kube's short answer, without trying the backend
        def short_answer() -> bool:
            code, body, headers = admin(gw, "GET", FLUNDERS)
            assert (code, body) == (503, "service unavailable\n")
            assert headers["Content-Type"] == PLAIN_TEXT
            assert headers["X-Content-Type-Options"] == "nosniff"
            return True

        eventually(short_answer, what="the plain 503 once unavailable")
        # the gateway's own groups keep working meanwhile
        assert "namespace/default" in gw.kubectl("get", "ns", "-o", "name").stdout.split()
        assert admin(gw, "GET", "/api/v1/namespaces/default/configmaps")[0] == 200
        assert admin(gw, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles")[0] == 200
        assert gw.request("GET", "/readyz")[0] == 200
    finally:
        backend.restart()

    wait_available(gw)
    name = unique()
    code, created, _ = admin(gw, "POST", FLUNDERS, flunder(name))
    assert code == 201, created
    assert admin(gw, "GET", f"{FLUNDERS}/{name}")[0] == 200


# -- streaming -----------------------------------------------------------------------------------


def test_a_watch_streams_event_by_event(gw, backend):
    first, second = unique("watched"), unique("watched")
    # the socket timeout only decides when to give up; the watch itself lasts 300 s
    response = gw.open("GET", f"{FLUNDERS}?watch=1&timeoutSeconds=300", timeout=60)
    try:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/json")

        def next_event_for(name: str) -> dict[str, Any]:
            while True:
                line = response.readline()
                assert line, "the watch ended"
                event = json.loads(line)
                if event["object"]["metadata"]["name"] == name:
                    return event

        assert admin(gw, "POST", FLUNDERS, flunder(first))[0] == 201
        event = next_event_for(first)
        assert (event["type"], event["object"]["kind"]) == ("ADDED", "Flunder"), event
        # the same stream goes on: a change made after the first event was read
        assert admin(gw, "DELETE", f"{FLUNDERS}/{first}")[0] == 200
        assert next_event_for(first)["type"] == "DELETED"
        assert admin(gw, "POST", FLUNDERS, flunder(second))[0] == 201
        assert next_event_for(second)["type"] == "ADDED"
    finally:
        response.close()
    admin(gw, "DELETE", f"{FLUNDERS}/{second}")


def test_proxied_answers_carry_the_filters_headers(gw, backend):
    """kube's filters write their headers before the proxy adds the backend's: a proxied
    answer, streamed or not, carries Cache-Control and one Audit-ID."""
    for path in (f"{FLUNDERS}/{unique()}/whoami", f"{FLUNDERS}?watch=1&timeoutSeconds=1"):
        response = gw.open("GET", path, timeout=60)
        try:
            assert response.status == 200
            assert response.headers.get_all("Cache-Control")[0] == "no-cache, private", path
            assert len(response.headers.get_all("Audit-ID")) == 1, path
        finally:
            response.close()


def test_a_50mib_list_streams_through_with_bounded_memory(gw, backend):
    pid = gw.proc.pid
    reset = reset_peak_rss(pid)
    peak_before = peak_rss_kib(pid)
    size = parse_quantity("50Mi")
    total, head, tail = 0, b"", b""
    response = gw.open("GET", f"{FLUNDERS}?bulk=50Mi", timeout=60)
    try:
        assert response.status == 200
        while chunk := response.read1(256 * 1024):
            if len(head) < 64:
                head += chunk[:64]
            tail = (tail + chunk)[-16:]
            total += len(chunk)
    finally:
        response.close()
    assert head.startswith(b'{"kind":"FlunderList"'), head
    assert tail.endswith(b"]}"), tail
    assert size <= total < size + 64 * 1024, total
    growth = peak_rss_kib(pid) - peak_before
    assert growth < 25 * 1024, (
        f"the gateway's peak RSS grew by {growth} KiB for a {total}-byte response "
        f"(peak reset: {reset})")


async def test_a_websocket_upgrade_is_relayed(gw, backend):
    url = f"wss://127.0.0.1:{gw.port}{FLUNDERS}/{unique()}/echo"
    path = url.split(str(gw.port), 1)[1]
    async with aiohttp.ClientSession() as session, session.ws_connect(
            url, ssl=gw.ssl_context(), protocols=("v5.channel.k8s.io",)) as ws:
        assert ws.protocol == "v5.channel.k8s.io"
        await ws.send_str("hello through the gateway")
        message = await ws.receive(timeout=30)
        assert (message.type, message.data) == (aiohttp.WSMsgType.TEXT,
                                                "hello through the gateway")
        await ws.send_bytes(b"\x00\x01binary")
        message = await ws.receive(timeout=30)
        assert (message.type, message.data) == (aiohttp.WSMsgType.BINARY, b"\x00\x01binary")
    seen = one_request(backend, path)
    assert seen.user == "admin" and "system:masters" in seen.groups
    assert seen.header("Upgrade").lower() == "websocket"
    assert seen.header("X-Forwarded-For")


async def test_a_spdy_upgrade_is_relayed(gw, backend):
    """``kubectl exec``'s way in: a POST upgraded to SPDY/3.1 with the stream protocol
    versions offered; the backend's 101 and then bytes both ways."""
    path = f"{FLUNDERS}/{unique()}/exec?command=sh&stdin=true"
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port, ssl=gw.ssl_context())
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\n"
                     "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                     "X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
                     "X-Stream-Protocol-Version: channel.k8s.io\r\n"
                     "Content-Length: 0\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert b"\r\nUpgrade: SPDY/3.1\r\n" in head, head
        assert b"\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n" in head, head
        frames = [b"\x80\x03\x00\x01\x00\x00\x00\x0a" + bytes(range(10)),
                  b"\x00\x00\x00\x01\x01\x00\x00\x03abc"]  # SPDY control and data frames
        for frame in frames:
            writer.write(frame)
            echoed = await asyncio.wait_for(reader.readexactly(len(frame)), 30)
            assert echoed == frame
    finally:
        writer.close()
    seen = one_request(backend, path.split("?")[0])
    assert seen.user == "admin" and "system:masters" in seen.groups
    assert seen.header("Upgrade") == "SPDY/3.1"
    assert seen.header_all("X-Stream-Protocol-Version") == ["v4.channel.k8s.io",
                                                            "channel.k8s.io"]


def test_a_backend_redirect_is_a_502(gw, backend):
    """kube's proxy replaces the backend's response with a bare 502: that message as the
    whole body (no newline: it is not http.Error), no header of the backend's."""
    path = f"{FLUNDERS}/{unique()}/redirect"
    for code in (301, 302, 307):
        status, body, headers = admin(gw, "GET", f"{path}?code={code}&to=https://example.com/x")
        assert (status, body) == (502, "the backend attempted to redirect this request, which "
                                       "is not permitted"), (status, body)
        assert headers["Content-Type"] == PLAIN_TEXT
        assert "Location" not in headers
    # nor for other methods
    status, body, _ = admin(gw, "POST", f"{path}?code=303", {"a": "b"})
    assert status == 502, (status, body)
    assert len(backend.requests(path)) == 4
    # a 3xx without a Location (here an empty one) is passed on as it is
    status, body, headers = admin(gw, "GET", f"{path}?code=304&to=")
    assert status == 304 and not headers.get("Location"), (status, headers)


# -- kubectl's resource commands (they need the backend's group in aggregated discovery) ------


def test_kubectl_resource_commands(gw, backend):
    name = unique()
    code, created, _ = admin(gw, "POST", FLUNDERS, flunder(name))
    assert code == 201, created
    assert GROUP_VERSION in gw.kubectl("api-versions").stdout.split()
    resources = gw.kubectl("api-resources", f"--api-group={GROUP}", "--no-headers").stdout
    assert resources.split() == ["flunders", "fl", GROUP_VERSION, "true", "Flunder"], resources

    rows = gw.kubectl("get", "flunders", "-n", NAMESPACE, "--no-headers",
                      "-o", "custom-columns=NAME:.metadata.name").stdout.split()
    assert name in rows
    got = json.loads(gw.kubectl("get", "fl", name, "-n", NAMESPACE, "-o", "json").stdout)
    assert got["kind"] == "Flunder" and got["spec"] == {"reference": "e2e"}
    assert f"flunder.{GROUP}/{name}" in gw.kubectl("get", "wardle", "-n", NAMESPACE,
                                                   "-o", "name").stdout.split()
    gw.kubectl("label", "flunder", name, "-n", NAMESPACE, "tier=e2e")
    gw.kubectl("patch", "flunder", name, "-n", NAMESPACE, "--type=merge",
               "-p", '{"spec":{"data":"patched"}}')
    got = json.loads(gw.kubectl("get", f"flunders.{GROUP}", name, "-n", NAMESPACE,
                                "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"tier": "e2e"}
    assert got["spec"] == {"reference": "e2e", "data": "patched"}
    out = gw.kubectl("delete", "flunder", name, "-n", NAMESPACE).stdout
    assert out == f'flunder.{GROUP} "{name}" deleted\n'
    missing = gw.kubectl("get", "flunder", name, "-n", NAMESPACE, check=False)
    assert missing.returncode != 0
    assert f'flunders.{GROUP} "{name}" not found' in missing.stderr, missing.stderr


def test_kubectl_create_and_apply_validate_against_the_backends_openapi(gw, backend,
                                                                         tmp_path):
    """kubectl validates a manifest (the default --validate=strict) with the OpenAPI the
    aggregator collects from the backend: /openapi/v3 must list apis/<group>/<version>."""
    name = unique()
    manifest = tmp_path / "flunder.json"
    manifest.write_text(json.dumps({**flunder(name), "metadata": {
        "name": name, "namespace": NAMESPACE}}))
    out = gw.kubectl("create", "-f", str(manifest)).stdout
    assert out == f"flunder.{GROUP}/{name} created\n"
    gw.kubectl("delete", "flunder", name, "-n", NAMESPACE)
    out = gw.kubectl("apply", "-f", str(manifest)).stdout
    assert out == f"flunder.{GROUP}/{name} created\n"
    gw.kubectl("delete", "flunder", name, "-n", NAMESPACE)


def test_kubectl_as_a_token_user(gw, backend, tmp_path):
    kubeconfig = token_kubeconfig(gw, tmp_path / "alice.kubeconfig", "alice-token")
    env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "cache")}

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                              capture_output=True, text=True, timeout=60, env=env)

    listed = kubectl("get", "flunders", "-n", NAMESPACE, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["kind"] == "List"
    seen = backend.requests(f"{FLUNDERS}", method="GET")[-1]
    assert seen.user == "alice" and "authorization" not in header_names(seen)
