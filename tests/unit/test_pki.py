"""The development PKI: what it makes, what it keeps, and what it refuses."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store

from gateway import pki
from gateway.cli import main
from tests.support.gateway import gateway_command


def load(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def verify_server(cert_path, ca_path, name) -> None:
    store = Store([load(ca_path)])
    verifier = PolicyBuilder().store(store).build_server_verifier(name)
    verifier.verify(load(cert_path), [])


def sans(cert: x509.Certificate) -> set[str]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(n) for n in ext.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in ext.get_values_for_type(x509.IPAddress)
    }


def usages(cert: x509.Certificate) -> list:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


@pytest.fixture
def dev(tmp_path) -> pki.DevPKI:
    return pki.ensure_dev_pki(tmp_path / "certs", sans=["gw.example.com", "10.9.8.7"],
                              server_url="https://127.0.0.1:7443")


def test_every_file_is_made_with_keys_private(dev):
    for field in ("ca_cert", "serving_cert", "front_proxy_ca_cert", "front_proxy_client_cert",
                  "sa_public_key", "admin_cert"):
        path = getattr(dev, field)
        assert path.is_file() and path.stat().st_mode & 0o777 == 0o644, field
    for field in ("ca_key", "serving_key", "front_proxy_ca_key", "front_proxy_client_key",
                  "sa_private_key", "admin_key", "kubeconfig"):
        path = getattr(dev, field)
        assert path.is_file() and path.stat().st_mode & 0o777 == 0o600, field
    assert dev.cert_dir.stat().st_mode & 0o777 == 0o700


def test_the_serving_certificate_covers_local_names_and_extra_sans(dev):
    cert = load(dev.serving_cert)
    assert {"localhost", "127.0.0.1", "::1", "kubernetes.default.svc", "gw.example.com",
            "10.9.8.7"} <= sans(cert)
    assert usages(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    verify_server(dev.serving_cert, dev.ca_cert, x509.DNSName("localhost"))
    verify_server(dev.serving_cert, dev.ca_cert,
                  x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    verify_server(dev.serving_cert, dev.ca_cert, x509.DNSName("gw.example.com"))


def test_the_admin_is_in_system_masters(dev):
    cert = load(dev.admin_cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == (
        "system:masters"
    )
    assert usages(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(load(dev.ca_cert))


def test_the_front_proxy_client_is_signed_by_its_own_ca(dev):
    client = load(dev.front_proxy_client_cert)
    client.verify_directly_issued_by(load(dev.front_proxy_ca_cert))
    with pytest.raises(ValueError, match=r"^Issuer certificate subject does not match"):
        client.verify_directly_issued_by(load(dev.ca_cert))  # not the cluster CA's
    assert usages(client) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_the_service_account_keys_are_a_pair(dev):
    private = serialization.load_pem_private_key(dev.sa_private_key.read_bytes(), None)
    public = serialization.load_pem_public_key(dev.sa_public_key.read_bytes())
    signature = private.sign(b"token", ec.ECDSA(hashes.SHA256()))
    public.verify(signature, b"token", ec.ECDSA(hashes.SHA256()))


def test_openssl_agrees(dev):
    result = subprocess.run(
        ["openssl", "verify", "-CAfile", str(dev.ca_cert), str(dev.serving_cert),
         str(dev.admin_cert)], capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr


def test_a_second_run_changes_nothing(dev):
    files = sorted(p for p in dev.cert_dir.iterdir())
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    again = pki.ensure_dev_pki(dev.cert_dir, sans=["gw.example.com"],
                               server_url="https://127.0.0.1:7443")
    assert again == dev
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before


def test_a_missing_san_on_an_existing_certificate_is_refused(dev):
    before = dev.serving_cert.read_bytes()
    with pytest.raises(pki.PKIError, match=r"lacks the SAN new\.example\.com") as err:
        pki.ensure_dev_pki(dev.cert_dir, sans=["new.example.com"])
    assert "apiserver.crt" in str(err.value) and "\n" not in str(err.value)
    assert dev.serving_cert.read_bytes() == before


def test_a_corrupt_ca_is_named_and_left_alone(dev):
    dev.ca_cert.write_bytes(b"garbage")
    with pytest.raises(pki.PKIError, match=r"ca\.crt"):
        pki.ensure_dev_pki(dev.cert_dir)
    assert dev.ca_cert.read_bytes() == b"garbage"


def _self_signed(key, public_key) -> bytes:
    """A CA certificate for ``public_key``, signed by ``key``."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "other")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(public_key).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize("kind", ["ecdsa", "ed25519"])
def test_a_certificate_of_another_key_is_refused(dev, kind):
    """An Ed25519 one was an AttributeError (no public_numbers) with a stack trace instead of
    this one line (found by mypy)."""
    other = ec.generate_private_key(ec.SECP256R1()) if kind == "ecdsa" \
        else ed25519.Ed25519PrivateKey.generate()
    dev.ca_cert.write_bytes(_self_signed(other, other.public_key()))
    with pytest.raises(pki.PKIError, match=r"ca\.key does not belong to .*ca\.crt"):
        pki.ensure_dev_pki(dev.cert_dir)


def test_a_key_without_its_certificate_is_refused(dev):
    dev.admin_cert.unlink()
    with pytest.raises(pki.PKIError, match=r"admin\.crt is missing"):
        pki.ensure_dev_pki(dev.cert_dir)
    assert dev.admin_key.exists()


def test_the_kubeconfig_embeds_everything_and_follows_the_server(dev):
    config = yaml.safe_load(dev.kubeconfig.read_text())
    assert config["current-context"] == "gateway"
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:7443"
    assert cluster["certificate-authority-data"]
    user = config["users"][0]["user"]
    assert user["client-certificate-data"] and user["client-key-data"]
    pki.ensure_dev_pki(dev.cert_dir, server_url="https://127.0.0.1:9443")
    moved = yaml.safe_load(dev.kubeconfig.read_text())
    assert moved["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:9443"
    assert dev.kubeconfig.stat().st_mode & 0o777 == 0o600


def test_a_backend_serving_certificate(dev, tmp_path):
    out = tmp_path / "backend"
    cert_path, key_path, ca_path = pki.mint_serving_cert(dev.cert_dir, name="api",
                                                         namespace="tenant", out_dir=out)
    cert = load(cert_path)
    assert sans(cert) == {"api.tenant.svc", "api.tenant", "api.tenant.svc.cluster.local"}
    verify_server(cert_path, ca_path, x509.DNSName("api.tenant.svc"))
    assert key_path.stat().st_mode & 0o777 == 0o600
    assert ca_path.read_bytes() == dev.ca_cert.read_bytes()
    with pytest.raises(pki.PKIError, match="exists"):
        pki.mint_serving_cert(dev.cert_dir, name="api", namespace="tenant", out_dir=out)
    with pytest.raises(pki.PKIError, match="DNS-1123"):
        pki.mint_serving_cert(dev.cert_dir, name="Bad_Name", namespace="x", out_dir=tmp_path)


def test_minting_without_a_ca_says_what_to_do(tmp_path):
    with pytest.raises(pki.PKIError, match="gateway certs"):
        pki.mint_serving_cert(tmp_path, name="a", namespace="b", out_dir=tmp_path / "out")


def test_the_certs_commands(tmp_path, capsys):
    certs = tmp_path / "certs"
    assert main(["certs", "--cert-dir", str(certs), "--tls-san", "gw.local"]) == 0
    assert (certs / "admin.kubeconfig").exists()
    assert "gw.local" in sans(load(certs / "apiserver.crt"))
    out = tmp_path / "backend"
    assert main(["certs", "serving", "--cert-dir", str(certs), "--name", "api",
                 "--namespace", "ns", "--out", str(out)]) == 0
    assert (out / "tls.crt").exists()
    assert main(["certs", "serving", "--cert-dir", str(certs), "--name", "api",
                 "--namespace", "ns", "--out", str(out)]) == 1
    assert "exists" in capsys.readouterr().err


def test_the_console_script_makes_certs(tmp_path):
    result = subprocess.run([*gateway_command(), "certs", "--cert-dir", str(tmp_path / "c")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "c" / "ca.crt").exists()
