"""The development PKI: the certificates and keys ``gateway serve`` needs, made with cryptography.

File names follow kubeadm's, so they read familiar:

    ca.crt / ca.key                         cluster CA: signs serving, admin and backend certs
    apiserver.crt / apiserver.key           the gateway's serving certificate
    front-proxy-ca.crt / front-proxy-ca.key CA of the front-proxy client certificate
    front-proxy-client.crt / .key           the identity the gateway shows backends
    sa.key / sa.pub                         service-account token signing key pair
    admin.crt / admin.key                   CN=admin, O=system:masters
    admin.kubeconfig                        kubectl configuration for the admin

Existing files are loaded and kept, never overwritten (admin.kubeconfig, a derived file, is
rewritten when its content would change). Keys are created 0600 and never exist with wider
permissions, not even briefly. Every problem is a PKIError with one line naming the file.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 365
DEFAULT_SERVING_SANS = (
    "localhost", "127.0.0.1", "::1",
    "kubernetes", "kubernetes.default", "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

PrivateKey = ec.EllipticCurvePrivateKey


class PKIError(Exception):
    """A one-line, user-facing reason the PKI cannot be made or used."""


@dataclass(frozen=True)
class DevPKI:
    cert_dir: Path
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    front_proxy_ca_cert: Path
    front_proxy_ca_key: Path
    front_proxy_client_cert: Path
    front_proxy_client_key: Path
    sa_private_key: Path
    sa_public_key: Path
    admin_cert: Path
    admin_key: Path
    kubeconfig: Path

    @classmethod
    def at(cls, cert_dir: Path) -> DevPKI:
        d = Path(cert_dir)
        return cls(
            cert_dir=d,
            ca_cert=d / "ca.crt", ca_key=d / "ca.key",
            serving_cert=d / "apiserver.crt", serving_key=d / "apiserver.key",
            front_proxy_ca_cert=d / "front-proxy-ca.crt",
            front_proxy_ca_key=d / "front-proxy-ca.key",
            front_proxy_client_cert=d / "front-proxy-client.crt",
            front_proxy_client_key=d / "front-proxy-client.key",
            sa_private_key=d / "sa.key", sa_public_key=d / "sa.pub",
            admin_cert=d / "admin.crt", admin_key=d / "admin.key",
            kubeconfig=d / "admin.kubeconfig",
        )


# -- files ----------------------------------------------------------------------------------


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` whole, with ``mode`` from the first byte; never replace an existing file.

    The content goes to a temporary file in the same directory, is synced, and is then linked
    into place: a crash leaves either no file or the complete one.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise PKIError(
                f"{path} appeared while it was being created; not overwriting it"
            ) from None
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Atomically replace a derived file (the kubeconfig)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise PKIError(f"{path}: cannot read it: {err.strerror or err}") from None


def load_pem_certificates(path: Path) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle; PKIError when there is none or it is not PEM."""
    try:
        certs = x509.load_pem_x509_certificates(_read(path))
    except ValueError as err:
        raise PKIError(f"{path}: not a PEM certificate bundle ({err})") from None
    return certs


def _load_cert(path: Path) -> x509.Certificate:
    return load_pem_certificates(path)[0]


def _public_der(key: CertificatePublicKeyTypes) -> bytes:
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def _load_key(path: Path) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(_read(path), password=None)
    except (ValueError, TypeError) as err:
        raise PKIError(f"{path}: not an unencrypted PEM private key ({err})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PKIError(f"{path}: expected an ECDSA private key")
    return key


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


# -- certificates ---------------------------------------------------------------------------


def _name(cn: str, orgs: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _san(names: Sequence[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _build(subject: x509.Name, key: PrivateKey, issuer: x509.Certificate | None,
           issuer_key: PrivateKey, *, ca: bool, days: int,
           usages: Sequence[x509.ObjectIdentifier] = (),
           sans: Sequence[str] = ()) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=not ca, key_cert_sign=ca, crl_sign=ca,
            content_commitment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
    )
    # the issuer's key (its certificate's, which _pair checked), or the key itself
    builder = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
        critical=False)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if sans:
        builder = builder.add_extension(_san(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _cert_sans(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    names = {str(n) for n in ext.get_values_for_type(x509.DNSName)}
    names |= {str(ip) for ip in ext.get_values_for_type(x509.IPAddress)}
    return names


def _normalize(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


class _Maker:
    """Loads what exists in a certificate directory and creates what is missing."""

    def __init__(self, cert_dir: Path) -> None:
        self.dir = cert_dir

    def ca(self, cert_path: Path, key_path: Path, cn: str) -> tuple[x509.Certificate, PrivateKey]:
        if cert_path.exists() or key_path.exists():
            cert, key = self._pair(cert_path, key_path)
            return cert, key
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _build(_name(cn), key, None, key, ca=True, days=CA_DAYS)
        _write_new(key_path, _key_pem(key), 0o600)
        _write_new(cert_path, _cert_pem(cert), 0o644)
        return cert, key

    def leaf(self, cert_path: Path, key_path: Path, ca: tuple[x509.Certificate, PrivateKey],
             subject: x509.Name, usage: x509.ObjectIdentifier,
             sans: Sequence[str] = ()) -> x509.Certificate:
        if cert_path.exists() or key_path.exists():
            cert, _ = self._pair(cert_path, key_path)
            if not _signed_by(cert, ca[0]):
                raise PKIError(f"{cert_path} was not signed by the CA next to it; remove it to "
                               "regenerate it")
            missing = {_normalize(s) for s in sans} - _cert_sans(cert)
            if missing:
                raise PKIError(f"{cert_path} lacks the SAN {sorted(missing)[0]}; remove "
                               f"{cert_path.name} and its key to regenerate it")
            return cert
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _build(subject, key, ca[0], ca[1], ca=False, days=LEAF_DAYS, usages=[usage],
                      sans=sans)
        _write_new(key_path, _key_pem(key), 0o600)
        _write_new(cert_path, _cert_pem(cert), 0o644)
        return cert

    def _pair(self, cert_path: Path, key_path: Path) -> tuple[x509.Certificate, PrivateKey]:
        for path in (cert_path, key_path):
            if not path.exists():
                other = key_path if path == cert_path else cert_path
                raise PKIError(f"{path} is missing while {other} exists; restore it or remove "
                               f"{other.name} to regenerate both")
        cert, key = _load_cert(cert_path), _load_key(key_path)
        # compared as encoded: a certificate may hold any type of key (an Ed25519 one has no
        # public_numbers), the key is ECDSA
        if _public_der(cert.public_key()) != _public_der(key.public_key()):
            raise PKIError(f"{key_path} does not belong to {cert_path}")
        return cert, key

    def key_pair(self, private_path: Path, public_path: Path) -> None:
        if private_path.exists():
            key = _load_key(private_path)
            if not public_path.exists():
                _write_new(public_path, _public_pem(key), 0o644)
            return
        if public_path.exists():
            raise PKIError(f"{private_path} is missing while {public_path} exists")
        key = ec.generate_private_key(ec.SECP256R1())
        _write_new(private_path, _key_pem(key), 0o600)
        _write_new(public_path, _public_pem(key), 0o644)


def _public_pem(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


# -- public API -----------------------------------------------------------------------------


def ensure_dev_pki(cert_dir: Path, *, sans: Sequence[str] = (),
                   server_url: str | None = "https://127.0.0.1:6443") -> DevPKI:
    """Create whatever is missing of the development PKI in ``cert_dir``; keep the rest. The
    admin kubeconfig is written for ``server_url`` unless it is None (``gateway serve``
    writes it once it listens: see write_admin_kubeconfig)."""
    paths = DevPKI.at(Path(cert_dir))
    try:
        paths.cert_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise PKIError(f"{paths.cert_dir}: cannot create it: {err.strerror or err}") from None
    maker = _Maker(paths.cert_dir)
    ca = maker.ca(paths.ca_cert, paths.ca_key, "gateway-ca")
    maker.leaf(paths.serving_cert, paths.serving_key, ca, _name("gateway-apiserver"),
               ExtendedKeyUsageOID.SERVER_AUTH, [*DEFAULT_SERVING_SANS, *sans])
    proxy_ca = maker.ca(paths.front_proxy_ca_cert, paths.front_proxy_ca_key,
                        "gateway-front-proxy-ca")
    maker.leaf(paths.front_proxy_client_cert, paths.front_proxy_client_key, proxy_ca,
               _name("front-proxy-client"), ExtendedKeyUsageOID.CLIENT_AUTH)
    maker.key_pair(paths.sa_private_key, paths.sa_public_key)
    maker.leaf(paths.admin_cert, paths.admin_key, ca, _name("admin", ["system:masters"]),
               ExtendedKeyUsageOID.CLIENT_AUTH)
    if server_url is not None:
        write_admin_kubeconfig(paths, server_url)
    return paths


def write_admin_kubeconfig(paths: DevPKI, server_url: str) -> bool:
    """The admin kubeconfig for ``server_url``; False when an identical one is there."""
    return write_kubeconfig(paths.kubeconfig, server=server_url, ca_pem=_read(paths.ca_cert),
                            cert_pem=_read(paths.admin_cert), key_pem=_read(paths.admin_key))


def kubeconfig_server(path: Path) -> str | None:
    """The server URL of the kubeconfig at ``path`` (None when there is none or unreadable)."""
    try:
        document = yaml.safe_load(Path(path).read_bytes())
        return document["clusters"][0]["cluster"]["server"]
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError):
        return None


def mint_serving_cert(cert_dir: Path, *, name: str, namespace: str,
                      out_dir: Path) -> tuple[Path, Path, Path]:
    """A serving certificate for the backend Service ``name.namespace``, signed by the cluster
    CA: writes tls.crt, tls.key and ca.crt (for the APIService's caBundle) into ``out_dir``."""
    for what, value in (("name", name), ("namespace", namespace)):
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise PKIError(f"--{what}: {value!r} is not a DNS-1123 label")
    paths = DevPKI.at(Path(cert_dir))
    if not paths.ca_cert.exists() or not paths.ca_key.exists():
        raise PKIError(f"no cluster CA in {paths.cert_dir}; run `gateway certs` first")
    ca = _Maker(paths.cert_dir)._pair(paths.ca_cert, paths.ca_key)
    out = Path(out_dir)
    cert_path, key_path, ca_path = out / "tls.crt", out / "tls.key", out / "ca.crt"
    for path in (cert_path, key_path):
        if path.exists():
            raise PKIError(f"{path} exists; not overwriting it")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PKIError(f"{out}: cannot create it: {err.strerror or err}") from None
    service = f"{name}.{namespace}.svc"
    sans = [service, f"{name}.{namespace}", f"{service}.cluster.local"]
    _Maker(out).leaf(cert_path, key_path, ca, _name(service), ExtendedKeyUsageOID.SERVER_AUTH,
                     sans)
    if not ca_path.exists():
        _write_new(ca_path, _read(paths.ca_cert), 0o644)
    return cert_path, key_path, ca_path


def kubeconfig_document(*, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes,
                        user: str = "admin", cluster: str = "gateway",
                        context: str = "gateway") -> dict:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {
            "server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: Path, *, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes,
                     user: str = "admin", cluster: str = "gateway",
                     context: str = "gateway") -> bool:
    """Write a kubeconfig (0600, it embeds a key); False when an identical one is there."""
    document = kubeconfig_document(server=server, ca_pem=ca_pem, cert_pem=cert_pem,
                                   key_pem=key_pem, user=user, cluster=cluster, context=context)
    data = yaml.safe_dump(document, sort_keys=False).encode()
    path = Path(path)
    if path.exists() and _read(path) == data:
        return False
    _replace(path, data, 0o600)
    return True
