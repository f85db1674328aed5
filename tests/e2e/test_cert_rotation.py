"""Certificate rotation without a restart (issue 19, item 6): a real gateway whose serving
certificate, client CA, front-proxy CA and service-account keys are files this test replaces
while it runs, as a rotation tool would (a new file renamed over the old one), driven by real
TLS clients (the standard library's ssl, kubectl).

The gateway looks at its files every second (kube: a file watch, and a re-check every minute):
each test waits for the change to show, never for a time. Each test starts from whatever the
files hold when it runs (the module's tests share one gateway and may run in any order): the
admin works with a bearer token, which no rotation touches.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.support import reliability
from tests.support.backend import GV_PATH, BackendProcess
from tests.support.certs import (
    CLIENT_AUTH,
    SERVER_AUTH,
    Issuer,
    Pair,
    certificate,
    issue_pair,
    new_key,
    pem,
)
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "rotation-admin-token"
UNAUTHORIZED = 401
#: How long a change may take to show before the test fails (the gateway looks every second;
#: generous for a busy machine).
PICKUP = 20.0


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file and rename it over ``path`` (what rotation tools do)."""
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}")
    temp.write_bytes(data)
    os.replace(temp, path)


@dataclass
class Rig:
    """The gateway and the files it was started with, and every CA this test made."""

    gw: GatewayProcess
    files: Path
    serving_cas: list[Issuer] = field(default_factory=list)
    client_ca: Issuer | None = None
    front_proxy_ca: Issuer | None = None
    sa_key: Any = None

    @property
    def serving(self) -> Pair:
        return Pair(self.files / "serving.crt", self.files / "serving.key")

    @property
    def client_ca_file(self) -> Path:
        return self.files / "client-ca.crt"

    @property
    def front_proxy_ca_file(self) -> Path:
        return self.files / "front-proxy-ca.crt"

    @property
    def proxy_client(self) -> Pair:
        return Pair(self.files / "proxy-client.crt", self.files / "proxy-client.key")

    @property
    def proxy_ca_file(self) -> Path:
        return self.files / "proxy-ca.crt"

    @property
    def sa_pub(self) -> Path:
        return self.files / "sa.pub"

    @property
    def sa_signing(self) -> Path:
        return self.files / "sa.key"

    # -- clients ----------------------------------------------------------------------------

    def context(self, cert: Pair | None = None) -> ssl.SSLContext:
        """Trusting every serving CA made so far, presenting ``cert``."""
        ctx = ssl.create_default_context(cadata="".join(
            pem(ca.cert).decode() for ca in self.serving_cas))
        if cert is not None:
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
        return ctx

    def connect(self, cert: Pair | None = None) -> http.client.HTTPSConnection:
        """A new connection (its handshake done)."""
        conn = http.client.HTTPSConnection(self.gw.host, self.gw.port,
                                           context=self.context(cert), timeout=30)
        conn.connect()
        return conn

    def request(self, method: str, path: str, body: Any = None, *, cert: Pair | None = None,
                token: str | None = ADMIN_TOKEN, headers: dict[str, str] | None = None,
                conn: http.client.HTTPSConnection | None = None) -> tuple[int, Any]:
        """One request on ``conn`` or a new connection; (status, JSON or text)."""
        own = conn is None
        conn = conn or self.connect(cert)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        try:
            conn.request(method, path, None if body is None else json.dumps(body), sent)
            response = conn.getresponse()
            raw = response.read()
        finally:
            if own:
                conn.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw.decode(errors="replace")

    def whoami(self, **identity: Any) -> tuple[int, Any]:
        code, body = self.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                  {"apiVersion": "authentication.k8s.io/v1",
                                   "kind": "SelfSubjectReview"}, **identity)
        return code, body["status"]["userInfo"]["username"] if code == 201 else body

    def served_certificate(self, server_name: str | None = "localhost") -> bytes:
        """The DER of the certificate a new connection is shown (asking for ``server_name``
        by SNI; None: no SNI)."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with socket.create_connection((self.gw.host, self.gw.port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname=server_name) as tls:
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return der

    def configmap(self) -> dict[str, str]:
        code, body = self.request(
            "GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
        assert code == 200, body
        return body["data"]


def _serving_pair(ca: Issuer) -> tuple[bytes, bytes]:
    """A serving certificate from ``ca`` for the names clients use, and its key (PEM)."""
    key = new_key()
    cert = certificate("gateway", key, ca, usages=(SERVER_AUTH,),
                       sans=("localhost", "127.0.0.1"))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return pem(cert), key_pem


def _key_pems(key: Any) -> tuple[bytes, bytes]:
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def _kid(key: Any) -> str:
    """kube's key id: base64url of the SHA-256 of the public key's DER."""
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")


def _ca_certs(bundle: str) -> list[bytes]:
    return [c.public_bytes(serialization.Encoding.DER)
            for c in x509.load_pem_x509_certificates(bundle.encode())]


def _der(issuer: Issuer) -> bytes:
    return issuer.cert.public_bytes(serialization.Encoding.DER)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    workdir = tmp_path_factory.mktemp("rotation")
    files = workdir / "pki"
    files.mkdir()
    serving_ca, client_ca, front_proxy_ca = (Issuer.new("serving-ca-0"),
                                             Issuer.new("client-ca-0"),
                                             Issuer.new("front-proxy-ca-0"))
    sa_key = new_key()
    (workdir / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
    rig = Rig(GatewayProcess(
        workdir,
        "--tls-cert-file", str(files / "serving.crt"),
        "--tls-private-key-file", str(files / "serving.key"),
        "--client-ca-file", str(files / "client-ca.crt"),
        "--requestheader-client-ca-file", str(files / "front-proxy-ca.crt"),
        "--requestheader-allowed-names", "front-proxy",
        "--service-account-key-file", str(files / "sa.pub"),
        "--service-account-signing-key-file", str(files / "sa.key"),
        "--token-auth-file", str(workdir / "tokens.csv"),
        "--proxy-client-cert-file", str(files / "proxy-client.crt"),
        "--proxy-client-key-file", str(files / "proxy-client.key"),
        "--enable-aggregator-routing",
        "--tls-sni-cert-key", f"{files / 'sni-a.crt'},{files / 'sni-a.key'}",
        "--tls-sni-cert-key", f"{files / 'sni-b.crt'},{files / 'sni-b.key'}:*.wild.example",
    ), files, [serving_ca], client_ca, front_proxy_ca, sa_key)
    proxy_ca = Issuer.new("proxy-ca")
    rig.proxy_ca_file.write_bytes(pem(proxy_ca.cert))
    (files / "proxy-ca.key").write_bytes(proxy_ca.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    issue_pair(files, "proxy-client", "proxy-client-0", proxy_ca, usages=(CLIENT_AUTH,))
    issue_pair(files, "sni-a", "sni-a", serving_ca, usages=(SERVER_AUTH,), sans=("sni.example",))
    # its own names given: the certificate's (sni.example too) are not used
    issue_pair(files, "sni-b", "sni-b", serving_ca, usages=(SERVER_AUTH,),
               sans=("sni.example", "b.example"))
    cert, key = _serving_pair(serving_ca)
    rig.serving.cert.write_bytes(cert)
    rig.serving.key.write_bytes(key)
    rig.client_ca_file.write_bytes(pem(client_ca.cert))
    rig.front_proxy_ca_file.write_bytes(pem(front_proxy_ca.cert))
    private, public = _key_pems(sa_key)
    rig.sa_signing.write_bytes(private)
    rig.sa_pub.write_bytes(public)
    rig.gw.start(wait=None)

    def ready() -> bool:
        if rig.gw.proc is not None and rig.gw.proc.poll() is not None:
            raise RuntimeError(f"gateway exited:\n{rig.gw.log()}")
        try:
            code, body = rig.request("GET", "/readyz")
        except OSError as err:
            raise AssertionError(str(err)) from None
        assert code == 200, body
        return True

    eventually(ready, timeout=60, interval=0.1, what="/readyz")
    try:
        yield rig
    finally:
        rig.gw.stop()


@pytest.fixture
def ns(rig: Rig) -> str:
    name = f"rot-{uuid.uuid4().hex[:8]}"
    code, body = rig.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert code == 201, body
    return name


# -- the serving certificate ----------------------------------------------------------------


def _open_watch(rig: Rig, ns: str) -> tuple[http.client.HTTPSConnection,
                                            http.client.HTTPResponse]:
    conn = rig.connect()
    conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&timeoutSeconds=120",
                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    response = conn.getresponse()
    assert response.status == 200
    return conn, response


def _next_event(response: http.client.HTTPResponse, name: str) -> dict[str, Any]:
    """The next event of the object ``name`` (others, a controller's, are passed over)."""
    while True:
        line = response.readline()
        assert line, "the watch ended"
        event = json.loads(line)
        if event["object"]["metadata"]["name"] == name:
            return event


def test_serving_certificate_from_a_new_ca(rig: Rig, ns: str, tmp_path: Path) -> None:
    """New connections are shown the new certificate (kubectl trusting only the new CA
    works); a watch opened before goes on, on its connection and its old certificate."""
    before = rig.served_certificate()
    assert before == x509.load_pem_x509_certificate(rig.serving.cert.read_bytes()) \
        .public_bytes(serialization.Encoding.DER)
    conn, watch = _open_watch(rig, ns)
    watch_cert = conn.sock.getpeercert(binary_form=True)
    assert watch_cert == before
    assert rig.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                       {"metadata": {"name": "before"}})[0] == 201
    assert _next_event(watch, "before")["type"] == "ADDED"

    new_ca = Issuer.new(f"serving-ca-{len(rig.serving_cas)}")
    rig.serving_cas.append(new_ca)
    cert, key = _serving_pair(new_ca)
    new_der = x509.load_pem_x509_certificate(cert).public_bytes(serialization.Encoding.DER)
    started = time.monotonic()
    _replace(rig.serving.cert, cert)  # the certificate first: a moment of mismatched halves
    _replace(rig.serving.key, key)
    eventually(lambda: rig.served_certificate() == new_der, timeout=PICKUP, interval=0.1,
               what="new connections shown the new certificate")
    picked_up = time.monotonic() - started

    # a client that trusts only the new CA (Go's TLS, kubectl)
    (tmp_path / "new-ca.crt").write_bytes(pem(new_ca.cert))
    kubeconfig = tmp_path / "new-ca.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gw",
        "clusters": [{"name": "gw", "cluster": {
            "server": f"https://127.0.0.1:{rig.gw.port}",
            "certificate-authority": str(tmp_path / "new-ca.crt")}}],
        "users": [{"name": "u", "user": {"token": ADMIN_TOKEN}}],
        "contexts": [{"name": "gw", "context": {"cluster": "gw", "user": "u",
                                                 "namespace": ns}}]}))
    created = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "create", "configmap",
                              "after"], capture_output=True, text=True, timeout=60)
    # the watch opened before the rotation sees it, on its first connection
    event = _next_event(watch, "after")
    reliability.record(
        item="6", load="a watch open across the rotation; requests on new connections",
        fault="serving certificate replaced",
        outcome="new connections shown the new certificate; the open watch went on",
        pickup_seconds=round(picked_up, 2))
    assert created.returncode == 0, created.stderr
    assert event["type"] == "ADDED"
    assert conn.sock.getpeercert(binary_form=True) == before
    conn.close()


def _file_der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(
        serialization.Encoding.DER)


def test_sni_certificates_chosen_by_name_and_rotated(rig: Rig, tmp_path: Path) -> None:
    """--tls-sni-cert-key: a client asking for a pair's name by SNI is shown that pair (its
    certificate's names, or the names given with it, wildcards too), others the default; a
    rotated pair is shown to new connections."""
    a, b = rig.files / "sni-a.crt", rig.files / "sni-b.crt"
    default = _file_der(rig.serving.cert)
    shown = {name: rig.served_certificate(name) for name in
             ("sni.example", "SNI.Example", "x.wild.example", "b.example", "other.example",
              None)}
    assert shown == {"sni.example": _file_der(a), "SNI.Example": _file_der(a),
                     "x.wild.example": _file_der(b), "b.example": default,
                     "other.example": default, None: default}

    new_ca = Issuer.new(f"serving-ca-{len(rig.serving_cas)}")
    rig.serving_cas.append(new_ca)
    rotated = issue_pair(tmp_path, "sni-a", "sni-a-rotated", new_ca, usages=(SERVER_AUTH,),
                         sans=("sni.example",))
    started = time.monotonic()
    _replace(a, rotated.cert.read_bytes())
    _replace(rig.files / "sni-a.key", rotated.key.read_bytes())
    eventually(lambda: rig.served_certificate("sni.example") == _file_der(rotated.cert),
               timeout=PICKUP, interval=0.1, what="the rotated SNI certificate shown")
    picked_up = time.monotonic() - started
    others = (rig.served_certificate("x.wild.example"), rig.served_certificate(None))
    # a client that checks the name: Python's ssl, trusting the new CA
    ctx = ssl.create_default_context(cadata=pem(new_ca.cert).decode())
    with socket.create_connection((rig.gw.host, rig.gw.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="sni.example") as tls:
        verified = tls.getpeercert()
    reliability.record(
        item="6", load="new connections asking for each name by SNI",
        fault="SNI certificate replaced (--tls-sni-cert-key)",
        outcome="the new certificate shown for its name; the others unchanged",
        pickup_seconds=round(picked_up, 2))
    assert others == (_file_der(b), _file_der(rig.serving.cert))
    assert ("commonName", "sni-a-rotated") in [n for rdn in verified["subject"] for n in rdn]


# -- the client CA --------------------------------------------------------------------------


def test_client_ca_rotated(rig: Rig, tmp_path: Path) -> None:
    """A client certificate from the new CA authenticates and one from the old CA gets 401,
    on new connections and on one opened before; the ConfigMap lists the new CA."""
    assert rig.client_ca is not None
    old_ca = rig.client_ca
    old_user = issue_pair(tmp_path, "old", "old-user", old_ca, usages=(CLIENT_AUTH,))
    new_ca = Issuer.new(f"client-ca-{uuid.uuid4().hex[:6]}")
    new_user = issue_pair(tmp_path, "new", "new-user", new_ca, usages=(CLIENT_AUTH,))
    kept = rig.connect(old_user)
    assert rig.whoami(cert=old_user, token=None) == (201, "old-user")
    assert rig.whoami(conn=kept, token=None) == (201, "old-user")
    assert rig.whoami(cert=new_user, token=None)[0] == UNAUTHORIZED

    started = time.monotonic()
    _replace(rig.client_ca_file, pem(new_ca.cert))
    rig.client_ca = new_ca
    eventually(lambda: rig.whoami(cert=new_user, token=None) == (201, "new-user"),
               timeout=PICKUP, interval=0.1, what="the new CA's client certificate accepted")
    picked_up = time.monotonic() - started
    old_new_connection = rig.whoami(cert=old_user, token=None)
    old_kept_connection = rig.whoami(conn=kept, token=None)
    kept.close()
    cm = eventually(lambda: _der(new_ca) in _ca_certs(rig.configmap()["client-ca-file"])
                    and rig.configmap(), timeout=PICKUP, interval=0.1,
                    what="the ConfigMap's client-ca-file listing the new CA")
    reliability.record(
        item="6", load="requests with client certificates of the old and the new CA",
        fault="client CA file replaced", outcome="new CA accepted, old CA refused (401)",
        pickup_seconds=round(picked_up, 2))
    assert old_new_connection[0] == UNAUTHORIZED, old_new_connection
    assert old_kept_connection[0] == UNAUTHORIZED, old_kept_connection
    # as kube's controller: the old CA stays listed beside the new one until it expires
    assert _ca_certs(cm["client-ca-file"])[-1] == _der(new_ca)
    assert _der(old_ca) in _ca_certs(cm["client-ca-file"])


# -- the front proxy's CA -------------------------------------------------------------------


def test_requestheader_ca_rotated(rig: Rig, tmp_path: Path) -> None:
    """A front proxy with a certificate of the new CA names users; the old CA's proxy is no
    longer trusted; the ConfigMap's requestheader-client-ca-file lists the new CA."""
    assert rig.front_proxy_ca is not None
    old_ca = rig.front_proxy_ca
    old_proxy = issue_pair(tmp_path, "old-proxy", "front-proxy", old_ca, usages=(CLIENT_AUTH,))
    new_ca = Issuer.new(f"front-proxy-ca-{uuid.uuid4().hex[:6]}")
    new_proxy = issue_pair(tmp_path, "new-proxy", "front-proxy", new_ca, usages=(CLIENT_AUTH,))
    carol = {"X-Remote-User": "carol", "X-Remote-Group": "devs"}
    assert rig.whoami(cert=old_proxy, token=None, headers=carol) == (201, "carol")
    assert rig.whoami(cert=new_proxy, token=None, headers=carol)[0] == UNAUTHORIZED

    started = time.monotonic()
    _replace(rig.front_proxy_ca_file, pem(new_ca.cert))
    rig.front_proxy_ca = new_ca
    eventually(lambda: rig.whoami(cert=new_proxy, token=None, headers=carol) == (201, "carol"),
               timeout=PICKUP, interval=0.1, what="the new front proxy trusted")
    picked_up = time.monotonic() - started
    old = rig.whoami(cert=old_proxy, token=None, headers=carol)
    cm = eventually(
        lambda: _der(new_ca) in _ca_certs(rig.configmap()["requestheader-client-ca-file"])
        and rig.configmap(), timeout=PICKUP, interval=0.1,
        what="the ConfigMap's requestheader-client-ca-file listing the new CA")
    reliability.record(
        item="6", load="front-proxy requests signed by the old and the new CA",
        fault="requestheader client CA file replaced",
        outcome="new front proxy authenticates, old one refused (401); ConfigMap updated",
        pickup_seconds=round(picked_up, 2))
    assert old[0] == UNAUTHORIZED, old
    assert _der(old_ca) in _ca_certs(cm["requestheader-client-ca-file"])
    assert json.loads(cm["requestheader-allowed-names"]) == ["front-proxy"]


# -- service-account keys -------------------------------------------------------------------


def _token(rig: Rig, ns: str, account: str) -> str:
    code, body = rig.request(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    assert code == 201, body
    return body["status"]["token"]


def _resigned(token: str, key: Any) -> str:
    """The same claims signed with ``key`` (and its kid)."""
    claims = jwt.decode(token, options={"verify_signature": False})
    private, _ = _key_pems(key)
    return jwt.encode(claims, private, algorithm="ES256", headers={"kid": _kid(key)})


def test_service_account_keys_rotated(rig: Rig, ns: str) -> None:
    """The verifying keys follow --service-account-key-file (a token of a key added verifies,
    one of a key removed gets 401) and new tokens are signed with the new
    --service-account-signing-key-file."""
    assert rig.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                       {"metadata": {"name": "robot"}})[0] == 201
    user = f"system:serviceaccount:{ns}:robot"
    old_key, new_key_ = rig.sa_key, new_key()
    old_token = _token(rig, ns, "robot")
    assert jwt.get_unverified_header(old_token)["kid"] == _kid(old_key)
    by_new_key = _resigned(old_token, new_key_)
    assert rig.whoami(token=old_token) == (201, user)
    assert rig.whoami(token=by_new_key)[0] == UNAUTHORIZED

    # both public keys verify, the new private key signs (kube's rotation, first step)
    started = time.monotonic()
    _replace(rig.sa_pub, _key_pems(old_key)[1] + _key_pems(new_key_)[1])
    _replace(rig.sa_signing, _key_pems(new_key_)[0])
    rig.sa_key = new_key_
    eventually(lambda: rig.whoami(token=by_new_key) == (201, user), timeout=PICKUP,
               interval=0.1, what="a token of the new key verifying")
    eventually(lambda: jwt.get_unverified_header(_token(rig, ns, "robot"))["kid"]
               == _kid(new_key_), timeout=PICKUP, interval=0.1,
               what="new tokens signed by the new key")
    picked_up = time.monotonic() - started
    new_token = _token(rig, ns, "robot")
    verified = jwt.decode(new_token, new_key_.public_key(), algorithms=["ES256"],
                          options={"verify_aud": False})
    still_old = rig.whoami(token=old_token)
    fresh = rig.whoami(token=new_token)

    # the old public key removed (the last step): its tokens are refused
    _replace(rig.sa_pub, _key_pems(new_key_)[1])
    eventually(lambda: rig.whoami(token=old_token)[0] == UNAUTHORIZED, timeout=PICKUP,
               interval=0.1, what="a token of the removed key refused")
    reliability.record(
        item="6", load="requests with service-account tokens of the old and the new key",
        fault="service-account key files replaced",
        outcome="new key verifies and signs; old key verifies until removed",
        pickup_seconds=round(picked_up, 2))
    assert verified["sub"] == user
    assert still_old == (201, user)
    assert fresh == (201, user)
    assert rig.whoami(token=new_token) == (201, user)


# -- the proxy's client certificate ---------------------------------------------------------


def test_proxy_client_certificate_rotated(rig: Rig, tmp_path: Path) -> None:
    """The certificate the gateway shows backends follows its files: requests proxied after
    the rotation, by the fast lane (a plain GET) and by aiohttp's side (a POST), reach the
    backend with the new one."""
    backend = BackendProcess(tmp_path / "backend", requestheader_ca=rig.proxy_ca_file,
                             allowed_names=("proxy-client-0", "proxy-client-1"))
    backend.start()
    try:
        for path, doc in (
                ("/api/v1/namespaces", None),
                (f"/api/v1/namespaces/{backend.namespace}/services", "Service"),
                (f"/api/v1/namespaces/{backend.namespace}/endpoints", "Endpoints"),
                ("/apis/apiregistration.k8s.io/v1/apiservices", "APIService")):
            body = next(d for d in backend.manifests() if d["kind"] == (doc or "Namespace"))
            code, answer = rig.request("POST", path, body)
            assert code == 201, answer
        flunders = f"{GV_PATH}/namespaces/default/flunders"

        def shown(method: str = "GET", body: Any = None) -> str | None:
            """The client certificate CN the backend saw on a proxied request."""
            backend.clear_requests()
            code, answer = rig.request(method, flunders, body)
            assert code in (200, 201), (code, answer)
            seen = backend.requests(prefix=flunders)
            assert seen, "the backend saw nothing"
            return seen[-1].client_cn

        assert eventually(shown, timeout=30, interval=0.2,
                          what="the backend reachable") == "proxy-client-0"
        proxy_ca = Issuer.load(rig.proxy_ca_file, rig.files / "proxy-ca.key")
        rotated = issue_pair(tmp_path, "rotated", "proxy-client-1", proxy_ca,
                             usages=(CLIENT_AUTH,))
        started = time.monotonic()
        _replace(rig.proxy_client.cert, rotated.cert.read_bytes())
        _replace(rig.proxy_client.key, rotated.key.read_bytes())
        eventually(lambda: shown() == "proxy-client-1", timeout=PICKUP, interval=0.1,
                   what="the backend shown the new client certificate")
        picked_up = time.monotonic() - started
        by_lane = [shown() for _ in range(3)]
        by_aiohttp = shown("POST", {"apiVersion": "wardle.example.com/v1alpha1",
                                    "kind": "Flunder",
                                    "metadata": {"name": f"f-{uuid.uuid4().hex[:6]}"}})
        reliability.record(
            item="6", load="requests proxied to a backend over mTLS",
            fault="proxy client certificate replaced",
            outcome="new connections to the backend present the new certificate",
            pickup_seconds=round(picked_up, 2))
        assert by_lane == ["proxy-client-1"] * 3
        assert by_aiohttp == "proxy-client-1"
    finally:
        backend.stop()


# -- a bad rotation -------------------------------------------------------------------------


def test_garbage_is_logged_and_the_last_good_files_kept(rig: Rig, tmp_path: Path) -> None:
    """A half-written certificate, a CA file of garbage and a key file of garbage: each is
    logged, the last good one stays in use, the gateway serves on; once the certificate is
    written whole it is served."""
    assert rig.client_ca is not None
    served = rig.served_certificate()
    user = issue_pair(tmp_path, "user", "steady-user", rig.client_ca, usages=(CLIENT_AUTH,))
    log_before = len(rig.gw.log_path.read_bytes())
    new_ca = Issuer.new(f"serving-ca-{len(rig.serving_cas)}")
    rig.serving_cas.append(new_ca)
    cert, key = _serving_pair(new_ca)
    good_ca, good_pub = rig.client_ca_file.read_bytes(), rig.sa_pub.read_bytes()

    # written in place and cut short, as a copy interrupted half-way
    rig.serving.key.write_bytes(key)
    rig.serving.cert.write_bytes(cert[: len(cert) // 2])
    rig.client_ca_file.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot a certificate\n")
    rig.sa_pub.write_bytes(b"garbage")

    flags = ("--tls-cert-file", "--client-ca-file", "--service-account-key-file")

    def logged() -> list[str]:
        with open(rig.gw.log_path, "rb") as log:
            log.seek(log_before)
            lines = log.read().decode(errors="replace").splitlines()
        refused = [line for line in lines if "does not load" in line]
        assert all(any(flag in line for line in refused) for flag in flags), refused
        return refused

    refusals = eventually(logged, timeout=PICKUP, interval=0.1,
                          what="each file's refusal logged")
    still_served = rig.served_certificate()
    whoami = rig.whoami(cert=user, token=None)
    alive = rig.request("GET", "/readyz")[0]

    # the write finishes: the certificate is taken; the other files are put back
    rig.serving.cert.write_bytes(cert)
    _replace(rig.client_ca_file, good_ca)
    _replace(rig.sa_pub, good_pub)
    new_der = x509.load_pem_x509_certificate(cert).public_bytes(serialization.Encoding.DER)
    eventually(lambda: rig.served_certificate() == new_der, timeout=PICKUP, interval=0.1,
               what="the whole certificate served")
    reliability.record(
        item="6", load="new connections during a bad rotation",
        fault="serving certificate half-written; client CA and service-account key garbage",
        outcome="each logged, the last good one kept, the gateway served on",
        refusals_logged=len(refusals))
    assert still_served == served
    assert whoami == (201, "steady-user")
    assert alive == 200
    assert rig.gw.proc is not None and rig.gw.proc.poll() is None
