"""Client certificates: verified here, not in the TLS handshake, as kube-apiserver does it.

The handshake asks for a certificate and accepts any (see gateway.server.tls); this module
checks it against a CA bundle (chain, validity, client-auth usage). A certificate from another
CA is an authentication error (401), not a failed connection. Results are cached per
certificate, since a connection shows the same one on every request.

The bundle is a file read again when it changes (gateway.apimachinery.dynamicfile, kube's
DynamicFileCAContent): from then on every request, on a new connection or an old one, is
judged by the new bundle, and what was remembered under the old one is forgotten.
"""

from __future__ import annotations

import datetime
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateway.apimachinery.context import Request
from gateway.apimachinery.dynamicfile import FileContent
from gateway.apimachinery.user import UserInfo
from gateway.auth.authn import Authenticated, AuthenticationError, Authenticator

_CACHE_SIZE = 1024


def peer_certificate(request: Request) -> bytes | None:
    """The DER of the client's certificate, if it showed one."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True)


@dataclass(frozen=True)
class CABundle:
    """A CA bundle as its file holds it, and its certificates."""

    pem: bytes
    certificates: tuple[x509.Certificate, ...]


def parse_ca_bundle(pem: bytes) -> CABundle:
    """ValueError when ``pem`` holds no certificate or one that does not parse."""
    if not pem.strip():
        raise ValueError("missing content for the CA bundle")
    return CABundle(pem, tuple(x509.load_pem_x509_certificates(pem)))


def ca_bundle_file(flag: str, path: Path) -> FileContent[CABundle]:
    """The CA bundle of ``flag`` (e.g. --client-ca-file), read again when it changes;
    FileContentError when it does not load at start."""
    return FileContent(f"{flag} {path}", [path], lambda raw: parse_ca_bundle(raw[0]))


class CertificateVerifier:
    """Verifies client certificates against one CA bundle (a file, read again when it
    changes); remembers the outcome until the bundle changes."""

    def __init__(self, bundle: FileContent[CABundle]) -> None:
        self.bundle = bundle
        self._generation = bundle.generation
        self._cache: OrderedDict[bytes, tuple[x509.Certificate | None, str, float]] = \
            OrderedDict()

    @property
    def cas(self) -> tuple[x509.Certificate, ...]:
        return self.bundle.value.certificates

    @property
    def generation(self) -> int:
        """Changes whenever the bundle does: answers given under another are stale."""
        return self.bundle.generation

    def verify(self, der: bytes) -> x509.Certificate:
        """The certificate, if it chains to the bundle; AuthenticationError otherwise."""
        if self._generation != self.bundle.generation:
            self._generation = self.bundle.generation
            self._cache.clear()
        now = datetime.datetime.now(datetime.UTC).timestamp()
        cached = self._cache.get(der)
        if cached is not None and now < cached[2]:
            self._cache.move_to_end(der)
            if cached[0] is None:
                raise AuthenticationError(cached[1])
            return cached[0]
        cert, error, until = self._check(der, now)
        self._cache[der] = (cert, error, until)
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        if cert is None:
            raise AuthenticationError(error)
        return cert

    def _check(self, der: bytes, now: float) -> tuple[x509.Certificate | None, str, float]:
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError as err:
            return None, f"unreadable client certificate: {err}", now + 60
        error = self._problem(cert, now)
        if error:
            return None, f"client certificate not verified: {error}", now + 60
        return cert, "", min(now + 300, cert.not_valid_after_utc.timestamp())

    def _problem(self, cert: x509.Certificate, now: float) -> str:
        """Why ``cert`` is not a client certificate issued by the bundle ("" when it is).

        The certificate must be signed by one of the bundle's CAs directly (intermediate CAs
        are not followed), be within its validity, and allow client authentication.
        """
        if not cert.not_valid_before_utc.timestamp() <= now <= \
                cert.not_valid_after_utc.timestamp():
            return "outside its validity period"
        try:
            usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            if ExtendedKeyUsageOID.CLIENT_AUTH not in usages and \
                    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
                return "not allowed for client authentication"
        except x509.ExtensionNotFound:
            pass
        for ca in self.cas:
            if ca.subject != cert.issuer:
                continue
            try:
                cert.verify_directly_issued_by(ca)
            except (ValueError, TypeError, InvalidSignature):
                continue
            return ""
        return "signed by an unknown authority"


def common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def organizations(cert: x509.Certificate) -> tuple[str, ...]:
    return tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME))


def x509_authenticator(verifier: CertificateVerifier) -> Authenticator:
    """user = the certificate's CN, groups = its O values (kube's x509 authenticator).

    A connection shows one certificate for its whole life: the answer is kept with the
    connection's TLS object (and expires as the verifier's does, or when the CA bundle
    changes), so a request on a known connection does not read the certificate again."""
    by_connection: weakref.WeakKeyDictionary[Any, tuple[Authenticated, float, int]] = \
        weakref.WeakKeyDictionary()

    async def authenticate(request: Request) -> Authenticated | None:
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        if ssl_object is None:
            return None
        known = by_connection.get(ssl_object)
        now = time.time()
        if known is not None and now < known[1] and known[2] == verifier.generation:
            return known[0]
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return None
        cert = verifier.verify(der)
        result = Authenticated(_user_of(cert))
        by_connection[ssl_object] = (
            result, min(now + _CONNECTION_TTL, cert.not_valid_after_utc.timestamp()),
            verifier.generation)
        return result

    return authenticate


#: How long a connection's verified certificate is taken as verified (never past its
#: expiry).
_CONNECTION_TTL = 10.0


@lru_cache(maxsize=_CACHE_SIZE)
def _user_of(cert: x509.Certificate) -> UserInfo:
    """The certificate's user, read once per certificate (connections show it every request)."""
    name = common_name(cert)
    if not name:
        raise AuthenticationError("client certificate has no common name")
    return UserInfo(name, groups=organizations(cert))
