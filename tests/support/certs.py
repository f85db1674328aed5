"""Certificates for tests, made with cryptography as any client or backend would make them
(never with the gateway's own PKI code): CAs, client and server pairs, written as PEM."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Key = ec.EllipticCurvePrivateKey
CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH
SERVER_AUTH = ExtendedKeyUsageOID.SERVER_AUTH


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, as files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Issuer:
    """A CA that signs: its certificate and key, in memory."""

    cert: x509.Certificate
    key: Key

    @classmethod
    def load(cls, cert: Path, key: Path) -> Issuer:
        loaded = serialization.load_pem_private_key(key.read_bytes(), None)
        return cls(x509.load_pem_x509_certificate(cert.read_bytes()), loaded)  # type: ignore[arg-type]

    @classmethod
    def new(cls, cn: str = "test-ca") -> Issuer:
        key = new_key()
        return cls(certificate(cn, key, None, ca=True), key)


def new_key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def certificate(cn: str, key: Key, issuer: Issuer | None, *, ca: bool = False,
                orgs: tuple[str, ...] = (), usages: tuple[x509.ObjectIdentifier, ...] = (),
                sans: tuple[str, ...] = ()) -> x509.Certificate:
    """A certificate for ``key`` signed by ``issuer`` (self-signed when None), valid for a day;
    ``sans`` holds DNS names and IP addresses alike."""
    subject = name(cn, orgs)
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer.cert.subject if issuer else subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(san) for san in sans]), critical=False)
    return builder.sign(issuer.key if issuer else key, hashes.SHA256())


def _general_name(san: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(san))
    except ValueError:
        return x509.DNSName(san)


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def write_pair(out: Path, stem: str, cert: x509.Certificate, key: Key) -> Pair:
    """``<stem>.crt`` and ``<stem>.key`` (PKCS#8, unencrypted) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    pair = Pair(out / f"{stem}.crt", out / f"{stem}.key")
    pair.cert.write_bytes(pem(cert))
    pair.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return pair


def issue_pair(out: Path, stem: str, cn: str, issuer: Issuer | None, **kwargs: object) -> Pair:
    """A new key, its certificate from ``issuer`` (see ``certificate``), written as files."""
    key = new_key()
    return write_pair(out, stem, certificate(cn, key, issuer, **kwargs), key)  # type: ignore[arg-type]
