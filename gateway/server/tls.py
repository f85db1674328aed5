"""The serving TLS context: our certificate, and client certificates asked for.

kube-apiserver asks for a client certificate without judging it in the handshake: a client
whose certificate is from an unknown CA still connects, and authentication answers 401 (or a
bearer token authenticates it). Python's ssl module has no verify callback, so the handshake
would otherwise refuse such a certificate; this module installs OpenSSL's own callback, one
that accepts any certificate, through ctypes. The authenticators (gateway.auth.authn.x509) then
verify the certificate against the right CA bundle. Where that is not possible (not CPython,
no libssl to load) the handshake verifies against the client CAs instead, and a certificate
from another CA fails the connection.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import ssl
from collections.abc import Sequence
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_SSL_VERIFY_PEER = 0x01
_VERIFY_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


@_VERIFY_CALLBACK
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


def server_ssl_context(cert_file: Path, key_file: Path,
                       client_cas: Sequence[Path] = ()) -> ssl.SSLContext:
    """TLS 1.2+, HTTP/1.1 by ALPN; client certificates asked for and checked later."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    for ca in client_cas:
        ctx.load_verify_locations(cafile=str(ca))
    if client_cas:
        ctx.verify_mode = ssl.CERT_OPTIONAL
        if not _request_any_client_certificate(ctx):
            log.warning("client certificates are verified in the TLS handshake: one from an "
                        "unknown CA fails the connection instead of getting 401")
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
