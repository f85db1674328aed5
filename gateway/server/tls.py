"""The serving TLS context: our certificate, and client certificates asked for.

kube-apiserver asks for a client certificate without judging it in the handshake: a client
whose certificate is from an unknown CA still connects, and authentication answers 401 (or a
bearer token authenticates it). Python's ssl module has no verify callback, so the handshake
would otherwise refuse such a certificate; this module installs OpenSSL's own callback, one
that accepts any certificate, through ctypes. The authenticators (gateway.auth.authn.x509) then
verify the certificate against the right CA bundle. Where that is not possible (not CPython,
no libssl to load) the handshake verifies against the client CAs instead, and a certificate
from another CA fails the connection.

The serving certificate and the client CAs are files read again when they change
(gateway.apimachinery.dynamicfile; kube's DynamicServingCertificateController): each change
builds a new context, and every new connection is moved onto the newest one while its
handshake starts (OpenSSL's server-name callback, called with or without SNI). Connections
already open keep what they were made with, so watches go on. A pair whose halves do not
match or do not parse is logged and the last good one served.

--tls-sni-cert-key pairs are served to clients that ask for one of their names by SNI, chosen
in the same callback as kube chooses (crypto/tls's NameToCertificate): the exact name, else
the name with its first label a wildcard, else the default certificate. A pair's names are
those given with it, else its certificate's (the common name unless it is an IP address, and
the DNS names); for a name claimed twice, given names win over a certificate's, and earlier
pairs over later ones. They are followed like the default pair.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import platform
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from cryptography import x509

from gateway.apimachinery.dynamicfile import FileContent
from gateway.auth.authn.x509 import CABundle, ca_bundle_file
from gateway.transport.clients import cert_key_pem, load_cert_chain_pem

log = structlog.get_logger(__name__)

_SSL_VERIFY_PEER = 0x01
_VERIFY_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


@_VERIFY_CALLBACK  # type: ignore[untyped-decorator]  # ctypes makes a C callback of it
def _accept_any(preverify_ok: int, store: int) -> int:
    return 1


def _libssl() -> ctypes.CDLL | None:
    for name in ("libssl.so.3", ctypes.util.find_library("ssl")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VERIFY_CALLBACK]
        lib.SSL_CTX_set_verify.restype = None
        lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        return lib
    return None


def _request_any_client_certificate(ctx: ssl.SSLContext) -> bool:
    """Make the handshake accept any client certificate; True when that worked."""
    if platform.python_implementation() != "CPython" or ssl.OPENSSL_VERSION_INFO[0] < 3:
        return False
    lib = _libssl()
    if lib is None:
        return False
    # CPython's SSLContext object holds its SSL_CTX pointer right after the object header
    pointer = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not pointer or lib.SSL_CTX_get_verify_mode(pointer) != _SSL_VERIFY_PEER:
        return False
    lib.SSL_CTX_set_verify(pointer, _SSL_VERIFY_PEER, _accept_any)
    return True


def _context(pair_pem: bytes, client_cas: Sequence[CABundle]) -> ssl.SSLContext:
    """TLS 1.2+, HTTP/1.1 by ALPN, the pair served, client certificates asked for."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    load_cert_chain_pem(ctx, pair_pem)
    for bundle in client_cas:
        ctx.load_verify_locations(cadata=bundle.pem.decode("ascii", "replace"))
    if client_cas:
        ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _parse_pair(raw: list[bytes]) -> bytes:
    """The certificate chain and key as one PEM, once OpenSSL has taken them together (a
    key that is not the certificate's is refused here, not at the next handshake)."""
    cert, key = raw
    if not cert.strip() or not key.strip():
        raise ValueError("missing content for the serving certificate or key")
    x509.load_pem_x509_certificates(cert)  # ValueError: words better than OpenSSL's
    return cert_key_pem(cert, key, ssl.PROTOCOL_TLS_SERVER)


def serving_pair_file(cert_file: Path, key_file: Path,
                      flag: str = "") -> FileContent[bytes]:
    """--tls-cert-file and --tls-private-key-file (or ``flag``'s pair), read again when either
    changes; FileContentError when they do not load at start."""
    name = f"{flag} {cert_file},{key_file}" if flag else \
        f"--tls-cert-file {cert_file} --tls-private-key-file {key_file}"
    return FileContent(name, [cert_file, key_file], _parse_pair, errors=(ssl.SSLError,))


@dataclass(frozen=True)
class SNIPair:
    """A --tls-sni-cert-key pair (followed as its files change) and its given names."""

    pair: FileContent[bytes]
    names: tuple[str, ...] = ()


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def certificate_names(pem: bytes) -> list[str]:
    """The names an SNI pair serves without names given (kube's getCertificateNames): its
    certificate's common name, unless an IP address or not a domain, and its DNS names (IP
    addresses never: SNI carries no IP)."""
    cert = x509.load_pem_x509_certificates(pem)[0]
    names: list[str] = []
    common = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    cn = str(common[0].value) if common else ""
    try:
        ipaddress.ip_address(cn)
        cn_is_ip = True
    except ValueError:
        cn_is_ip = False
    bare = cn.removeprefix("*.")
    if not cn_is_ip and (cn == "*" or (len(bare) <= 253 and _DNS_SUBDOMAIN.match(bare))):
        names.append(cn)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names += sans.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        pass
    return names


class ServingTLS:
    """The listener's TLS context (``context``): its certificate and client CAs follow their
    files. ``context`` itself never changes; a new connection is handed the ``current``
    context, rebuilt whenever a file changes, at the start of its handshake."""

    def __init__(self, pair: FileContent[bytes],
                 client_cas: Sequence[FileContent[CABundle]] = (),
                 sni: Sequence[SNIPair] = ()) -> None:
        self.pair = pair
        self.client_cas = tuple(client_cas)
        self.sni = tuple(sni)
        #: contexts of the SNI pairs by the (lower-case) names they serve
        self.by_name: dict[str, ssl.SSLContext] = {}
        self.current, self.by_name = self._build_all()
        # what a connection starts with; the verify mode and callback stay this context's
        # after the switch (OpenSSL copies them to the connection when it is made), the
        # certificate, key and CA store are the current context's
        self.context = self._build()
        if self.client_cas and not _request_any_client_certificate(self.context):
            log.warning("client certificates are verified in the TLS handshake: one from an "
                        "unknown CA fails the connection instead of getting 401")
        self.context.sni_callback = self._select
        for content in self.files():
            content.on_change(self._rebuild)

    def files(self) -> list[FileContent]:
        """The files this context follows, for a FileWatcher."""
        return [self.pair, *self.client_cas, *(named.pair for named in self.sni)]

    def _build(self, pair: FileContent[bytes] | None = None) -> ssl.SSLContext:
        return _context((pair or self.pair).value, [c.value for c in self.client_cas])

    def _build_all(self) -> tuple[ssl.SSLContext, dict[str, ssl.SSLContext]]:
        """The default context, and the SNI pairs' by name (kube's BuildNamedCertificates:
        earlier pairs win, given names override certificates' names)."""
        by_name: dict[str, ssl.SSLContext] = {}
        given: dict[str, ssl.SSLContext] = {}
        for named in reversed(self.sni):
            context = self._build(named.pair)
            for name in named.names:
                given[name.lower()] = context
            if not named.names:
                for name in certificate_names(named.pair.value):
                    by_name[name.lower()] = context
        return self._build(), {**by_name, **given}

    def _rebuild(self, _: object) -> None:
        try:
            self.current, self.by_name = self._build_all()
        except (ssl.SSLError, ValueError) as err:  # taken apart, refused together
            log.error("cannot build the serving TLS context from the new files; new "
                      "connections get the last one", error=str(err))
            return
        log.info("new connections get the new serving certificate and client CAs")

    def _select(self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                context: ssl.SSLContext) -> None:
        """OpenSSL's server-name callback: the newest context for this connection, the SNI
        pair's for the name asked for (exact, then with a wildcard first label)."""
        current = self.current
        if server_name and self.by_name:
            name = server_name.lower()
            named = self.by_name.get(name)
            if named is None:
                labels = name.split(".")
                named = self.by_name.get(".".join(["*", *labels[1:]]))
            if named is not None:
                current = named
        if connection.context is not current:
            connection.context = current


def server_ssl_context(cert_file: Path, key_file: Path,
                       client_cas: Sequence[Path] = ()) -> ssl.SSLContext:
    """The listener's context for these files (followed only when a FileWatcher watches
    them, which ``ServingTLS`` offers)."""
    return ServingTLS(serving_pair_file(cert_file, key_file),
                      [ca_bundle_file("client CA", path) for path in client_cas]).context
