"""An extension apiserver's flags: k8s.io/apiserver's RecommendedOptions, under kube's names.

Secure serving (``--secure-port``, ``--bind-address``, ``--tls-cert-file``,
``--tls-private-key-file``, ``--cert-dir``: a self-signed pair is made there when no pair is
given, as kube's sample-apiserver does), delegated authentication and authorization
(``--authentication-kubeconfig``, ``--authorization-kubeconfig``,
``--authorization-always-allow-paths``, the cache TTLs), and storage (``--etcd-servers`` and
``--etcd-prefix``, or the embedded SQLite store under ``--data-dir``).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateway.apimachinery.gowords import parse_duration
from gateway.extension.authn import TOKEN_CACHE_TTL
from gateway.extension.authz import ALLOW_CACHE_TTL, ALWAYS_ALLOW_PATHS, DENY_CACHE_TTL


@dataclass
class ExtensionOptions:
    secure_port: int = 443
    bind_address: str = "0.0.0.0"
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    cert_dir: Path = Path("apiserver.local.config/certificates")
    kubeconfig: Path | None = None
    authentication_kubeconfig: Path | None = None
    authorization_kubeconfig: Path | None = None
    authentication_tolerate_lookup_failure: bool = False
    authentication_token_webhook_cache_ttl: float = TOKEN_CACHE_TTL
    authorization_webhook_cache_authorized_ttl: float = ALLOW_CACHE_TTL
    authorization_webhook_cache_unauthorized_ttl: float = DENY_CACHE_TTL
    authorization_always_allow_paths: list[str] = field(
        default_factory=lambda: list(ALWAYS_ALLOW_PATHS))
    disable_admission_plugins: list[str] = field(default_factory=list)
    etcd_servers: list[str] = field(default_factory=list)
    etcd_prefix: str = ""
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None
    data_dir: Path = Path(".apiserver")
    request_timeout: float = 60.0
    min_request_timeout: int = 1800

    def serving_pair(self) -> tuple[Path, Path]:
        """--tls-cert-file and --tls-private-key-file, or a self-signed pair in --cert-dir
        (made once, for localhost and the bind address)."""
        if self.tls_cert_file is not None and self.tls_private_key_file is not None:
            return self.tls_cert_file, self.tls_private_key_file
        cert, key = self.cert_dir / "apiserver.crt", self.cert_dir / "apiserver.key"
        if not cert.exists() or not key.exists():
            self_signed(cert, key, ["localhost", "127.0.0.1", self.bind_address])
        return cert, key


#: kube's RecommendedOptions' admission plugins, in their order.
ADMISSION_PLUGINS = ("NamespaceLifecycle", "MutatingAdmissionWebhook",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook")


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def add_flags(parser: argparse.ArgumentParser, *, etcd_prefix: str = "") -> None:
    """kube's flag names and defaults on ``parser``."""
    d = ExtensionOptions()
    serving = parser.add_argument_group("secure serving")
    serving.add_argument("--secure-port", type=int, default=d.secure_port)
    serving.add_argument("--bind-address", default=d.bind_address)
    serving.add_argument("--tls-cert-file", type=Path)
    serving.add_argument("--tls-private-key-file", type=Path)
    serving.add_argument("--cert-dir", type=Path, default=d.cert_dir,
                         help="where a self-signed pair is made when none is given")
    authn = parser.add_argument_group("delegated authentication")
    authn.add_argument("--authentication-kubeconfig", type=Path,
                       help="kubeconfig of the core server for TokenReviews and the "
                            "extension-apiserver-authentication ConfigMap (default: in-cluster)")
    authn.add_argument("--authentication-tolerate-lookup-failure", action="store_true")
    authn.add_argument("--authentication-token-webhook-cache-ttl", type=parse_duration,
                       default=d.authentication_token_webhook_cache_ttl)
    authz = parser.add_argument_group("delegated authorization")
    authz.add_argument("--authorization-kubeconfig", type=Path,
                       help="kubeconfig of the core server for SubjectAccessReviews "
                            "(default: in-cluster)")
    authz.add_argument("--authorization-always-allow-paths", type=_csv,
                       default=d.authorization_always_allow_paths)
    authz.add_argument("--authorization-webhook-cache-authorized-ttl", type=parse_duration,
                       default=d.authorization_webhook_cache_authorized_ttl)
    authz.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=parse_duration,
                       default=d.authorization_webhook_cache_unauthorized_ttl)
    admission = parser.add_argument_group("admission")
    admission.add_argument("--kubeconfig", type=Path,
                           help="kubeconfig of the core server whose namespaces, webhooks and "
                                "ValidatingAdmissionPolicies admission reads (default: "
                                "--authentication-kubeconfig's, else in-cluster)")
    admission.add_argument("--disable-admission-plugins", type=_csv, default=[],
                           help=f"of {', '.join(ADMISSION_PLUGINS)} (all on by default)")
    storage = parser.add_argument_group("storage")
    storage.add_argument("--etcd-servers", type=_csv, default=[])
    storage.add_argument("--etcd-prefix", default=etcd_prefix)
    storage.add_argument("--etcd-cafile", type=Path)
    storage.add_argument("--etcd-certfile", type=Path)
    storage.add_argument("--etcd-keyfile", type=Path)
    storage.add_argument("--data-dir", type=Path, default=d.data_dir,
                         help="the embedded store's directory when no --etcd-servers")


def from_args(args: argparse.Namespace) -> ExtensionOptions:
    return ExtensionOptions(**{f: getattr(args, f) for f in ExtensionOptions.__dataclass_fields__
                               if hasattr(args, f)})


def self_signed(cert_path: Path, key_path: Path, names: list[str]) -> None:
    """A self-signed serving pair for ``names`` (IP addresses or DNS names), a year long."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                            f"{names[0]}@{int(now.timestamp())}")])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
