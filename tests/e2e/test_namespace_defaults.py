"""What every namespace holds, as kube-controller-manager keeps it: a ``default``
ServiceAccount and the ``kube-root-ca.crt`` ConfigMap with the CA that verifies the gateway.
Driven with kubectl."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.support.gateway import GatewayProcess, free_port, gateway_command
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

ROOT_CA = "kube-root-ca.crt"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def get(gw: GatewayProcess, ns: str, kind: str, name: str) -> dict[str, Any] | None:
    result = gw.kubectl("-n", ns, "get", kind, name, "-o", "json", check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    return json.loads(result.stdout)


def wait_for(gw: GatewayProcess, ns: str, kind: str, name: str,
             unlike: dict[str, Any] | None = None) -> dict[str, Any]:
    """The object once it exists (and is not ``unlike``: another uid or resourceVersion)."""

    def there() -> dict[str, Any] | None:
        obj = get(gw, ns, kind, name)
        if obj is None or (unlike is not None and obj["metadata"]["resourceVersion"] ==
                           unlike["metadata"]["resourceVersion"]):
            return None
        return obj

    return eventually(there, what=f"{kind} {ns}/{name}")


def new_namespace(gw: GatewayProcess) -> str:
    name = f"def-{uuid.uuid4().hex[:8]}"
    gw.kubectl("create", "ns", name)
    return name


def expected_root_ca(ca: str) -> dict[str, Any]:
    return {"data": {"ca.crt": ca},
            "annotations": {"kubernetes.io/description": DESCRIPTION}}


def root_ca_shape(cm: dict[str, Any]) -> dict[str, Any]:
    return {"data": cm.get("data"), "annotations": cm["metadata"].get("annotations")}


# -- the development PKI ------------------------------------------------------------------------


def test_a_new_namespace_gets_a_default_service_account_to_ask_tokens_for(gateway):
    ns = new_namespace(gateway)
    account = wait_for(gateway, ns, "serviceaccount", "default")
    assert set(account["metadata"]) >= {"uid", "creationTimestamp"}
    token = gateway.kubectl("create", "token", "default", "-n", ns).stdout.strip()
    assert token.count(".") == 2, token
    review = json.loads(gateway.kubectl("create", "-f", "-", "-o", "json", input=json.dumps({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}})).stdout)
    assert review["status"]["user"]["username"] == f"system:serviceaccount:{ns}:default"


def test_a_new_namespace_gets_the_root_ca(gateway):
    ns = new_namespace(gateway)
    cm = wait_for(gateway, ns, "configmap", ROOT_CA)
    assert root_ca_shape(cm) == expected_root_ca((gateway.cert_dir / "ca.crt").read_text())


def test_every_system_namespace_has_both(gateway):
    for ns in SYSTEM_NAMESPACES:
        wait_for(gateway, ns, "serviceaccount", "default")
        wait_for(gateway, ns, "configmap", ROOT_CA)


def test_the_root_ca_verifies_the_serving_certificate(gateway):
    cm = wait_for(gateway, "default", "configmap", ROOT_CA)
    ca = x509.load_pem_x509_certificate(cm["data"]["ca.crt"].encode())
    served = x509.load_pem_x509_certificate(
        ssl.get_server_certificate(("127.0.0.1", gateway.port)).encode())
    served.verify_directly_issued_by(ca)  # raises if the CA did not sign it
    # and a client trusting only that bundle gets through TLS
    context = ssl.create_default_context(cadata=cm["data"]["ca.crt"])
    with context.wrap_socket(socket.create_connection(
            ("127.0.0.1", gateway.port), timeout=30), server_hostname="localhost") as tls:
        assert tls.version()


def test_a_deleted_default_service_account_comes_back(gateway):
    ns = new_namespace(gateway)
    first = wait_for(gateway, ns, "serviceaccount", "default")
    gateway.kubectl("-n", ns, "delete", "serviceaccount", "default")
    again = wait_for(gateway, ns, "serviceaccount", "default", unlike=first)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]


def test_a_deleted_root_ca_comes_back(gateway):
    ns = new_namespace(gateway)
    first = wait_for(gateway, ns, "configmap", ROOT_CA)
    gateway.kubectl("-n", ns, "delete", "configmap", ROOT_CA)
    again = wait_for(gateway, ns, "configmap", ROOT_CA, unlike=first)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert root_ca_shape(again) == root_ca_shape(first)


def test_an_edited_root_ca_is_put_back(gateway):
    ns = new_namespace(gateway)
    first = wait_for(gateway, ns, "configmap", ROOT_CA)
    gateway.kubectl("-n", ns, "patch", "configmap", ROOT_CA, "--type=merge", "-p",
                    json.dumps({"data": {"ca.crt": "not a CA", "extra": "x"}}))
    fixed = eventually(lambda: (cm := get(gateway, ns, "configmap", ROOT_CA)) and
                       cm["data"] == first["data"] and cm, what="the data put back")
    assert root_ca_shape(fixed) == root_ca_shape(first)

    gateway.kubectl("-n", ns, "annotate", "configmap", ROOT_CA, "kubernetes.io/description-",
                    "other=kept")
    fixed = eventually(
        lambda: (cm := get(gateway, ns, "configmap", ROOT_CA)) and
        "kubernetes.io/description" in (cm["metadata"].get("annotations") or {}) and cm,
        what="the description put back")
    assert fixed["metadata"]["annotations"] == {"kubernetes.io/description": DESCRIPTION,
                                                "other": "kept"}


# -- a serving certificate of the user's own ----------------------------------------------------


@pytest.fixture(scope="module")
def own_cert(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway serving a certificate given by flags (signed by a CA it is not told of), and
    trusting the admin client certificate of a PKI made beforehand."""
    workdir = tmp_path_factory.mktemp("own-cert")
    port = free_port()
    subprocess.run([*gateway_command(), "certs", "--cert-dir", str(workdir / "certs"),
                    "--server", f"https://127.0.0.1:{port}"], check=True, capture_output=True,
                   timeout=60)
    own = workdir / "own"
    own.mkdir()
    for name in ("apiserver.crt", "apiserver.key"):
        shutil.copy(workdir / "certs" / name, own / name)
    proc = GatewayProcess(workdir, "--tls-cert-file", str(own / "apiserver.crt"),
                          "--tls-private-key-file", str(own / "apiserver.key"),
                          "--client-ca-file", str(workdir / "certs" / "ca.crt"), port=port)
    yield proc
    proc.stop()


def all_root_cas(gw: GatewayProcess) -> list[str]:
    listed = json.loads(gw.kubectl("get", "configmaps", "-A", "-o", "json").stdout)
    return [o["metadata"]["namespace"] for o in listed["items"]
            if o["metadata"]["name"] == ROOT_CA]


def test_an_unknown_ca_is_not_published_and_the_log_says_why(own_cert):
    with own_cert:
        ns = new_namespace(own_cert)
        wait_for(own_cert, ns, "serviceaccount", "default")  # the controllers run
        assert all_root_cas(own_cert) == []
        assert "not publishing kube-root-ca.crt" in own_cert.log()


def test_root_ca_file_is_published_as_it_is(own_cert, tmp_path: Path):
    bundle = tmp_path / "bundle.crt"
    certs = own_cert.cert_dir
    bundle.write_text((certs / "ca.crt").read_text() + (certs / "front-proxy-ca.crt").read_text())
    own_cert.extra += ["--root-ca-file", str(bundle)]
    with own_cert:
        ns = new_namespace(own_cert)
        cm = wait_for(own_cert, ns, "configmap", ROOT_CA)
        assert root_ca_shape(cm) == expected_root_ca(bundle.read_text())
        for namespace in SYSTEM_NAMESPACES:
            assert root_ca_shape(wait_for(own_cert, namespace, "configmap", ROOT_CA)) == \
                expected_root_ca(bundle.read_text())


def test_a_root_ca_file_that_is_not_pem_stops_the_start(tmp_path: Path):
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate\n")
    proc = GatewayProcess(tmp_path, "--root-ca-file", str(junk))
    proc.start(wait=None)
    assert proc.proc is not None and proc.proc.wait(60) == 1
    errors = [line for line in proc.log().splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith(
        f"gateway serve: error: --root-ca-file: {junk}: not a PEM certificate bundle"), \
        proc.log()
