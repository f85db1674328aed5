"""The admin kubeconfig names an address the gateway listens on, and the development serving
certificate names it too (replicas on 127.0.0.2 and 127.0.0.3 are reached there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from gateway.app.run import complete_with_dev_pki, server_url
from gateway.cli import build_parser
from gateway.options import ServeOptions


def options(*argv: str) -> ServeOptions:
    return ServeOptions.from_args(build_parser().parse_args(["serve", *argv]))


@pytest.mark.parametrize(("bind", "url"), [
    ("0.0.0.0", "https://127.0.0.1:7443"),
    ("::", "https://127.0.0.1:7443"),
    ("127.0.0.1", "https://127.0.0.1:7443"),
    ("127.0.0.2", "https://127.0.0.2:7443"),
    ("::1", "https://[::1]:7443"),
    ("192.0.2.5", "https://192.0.2.5:7443"),
])
def test_the_kubeconfig_server_is_where_the_gateway_listens(bind: str, url: str) -> None:
    assert server_url(options("--bind-address", bind, "--secure-port", "7443",
                              "--advertise-address", "192.0.2.9")) == url


def test_the_development_certificate_names_a_loopback_bind_address(tmp_path: Path) -> None:
    done = complete_with_dev_pki(options("--bind-address", "127.0.0.2",
                                         "--cert-dir", str(tmp_path)))
    assert done.tls_cert_file is not None
    cert = x509.load_pem_x509_certificate(done.tls_cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    addresses = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.1", "::1", "127.0.0.2"} <= addresses
