"""A failed outgoing call (webhooks, the proxy, availability checks, discovery and OpenAPI
downloads) in the words Go's net/http and crypto/tls use, which is what kube's own clients
show: never Python's wording or an object's repr."""

from __future__ import annotations

import re
import ssl

import aiohttp


def describe_error(err: BaseException, host: str, port: int, server_name: str) -> str:
    """A failed call as Go's net/http and crypto/tls say it (dial, lookup, TLS, EOF); never
    Python's own words or an object's repr."""
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        return _verify_words(err.certificate_error, server_name)
    cause = getattr(err, "os_error", None) or err
    if isinstance(cause, ssl.SSLCertVerificationError):
        return _verify_words(cause, server_name)
    if isinstance(cause, TimeoutError | aiohttp.ServerTimeoutError):
        return "context deadline exceeded"
    if isinstance(err, aiohttp.ClientConnectorDNSError) or (
            isinstance(cause, OSError) and getattr(cause, "errno", None) in (-2, -3, -5)):
        return f"dial tcp: lookup {host}: no such host"
    address = _dialled(cause, host, port)
    if isinstance(cause, ConnectionRefusedError):
        return f"dial tcp {address}: connect: connection refused"
    if isinstance(cause, ssl.SSLError) and cause.reason == "WRONG_VERSION_NUMBER":
        return "http: server gave HTTP response to HTTPS client"
    if isinstance(cause, ssl.SSLError):
        reason = re.sub(r"^(SSLV3|TLSV1|TLSV13)_ALERT_", "", cause.reason or "handshake failure")
        return f"remote error: tls: {reason.replace('_', ' ').lower()}"
    if isinstance(err, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return "EOF"
    if isinstance(cause, OSError) and cause.strerror:
        return f"dial tcp {address}: connect: {cause.strerror.lower()}"
    if isinstance(err, aiohttp.ClientResponseError | aiohttp.ClientOSError):
        return "net/http: HTTP/1.x transport connection broken: malformed HTTP response"
    return "EOF"  # a connection lost some other way, as Go's transport most often says it


def _dialled(err: BaseException, host: str, port: int) -> str:
    """The address Go names: the one asyncio says it tried, else the host asked for."""
    match = re.search(r"\('([^']+)', (\d+)", str(err))
    if match:
        host, port = match.group(1), int(match.group(2))
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _verify_words(err: BaseException, server_name: str) -> str:
    message = getattr(err, "verify_message", "") or ""
    prefix = "tls: failed to verify certificate: x509: "
    if "mismatch" in message:
        return f"{prefix}certificate is not valid for {server_name}"
    if "expired" in message or "not yet valid" in message:
        return f"{prefix}certificate has expired or is not yet valid"
    if "unsupported certificate purpose" in message:
        return f"{prefix}certificate specifies an incompatible key usage"
    return f"{prefix}certificate signed by unknown authority"


def root_certificates_error(ca_data: bytes) -> str:
    """Why client-go refuses a CA bundle that holds no certificate it can use, in its words
    (transport.TLSConfigFor: ``unable to load root certificates: <why>``, the why found by
    walking the PEM blocks as its createErrorParsingCAData does)."""
    from cryptography import x509  # only when a bundle is refused

    rest = ca_data
    while rest:
        block, rest = _pem_decode(rest)
        if block is None:
            return "unable to load root certificates: unable to parse bytes as PEM block"
        kind, has_headers, der = block
        if kind != b"CERTIFICATE" or has_headers:
            continue
        try:
            x509.load_der_x509_certificate(der)
        except ValueError:
            return ("unable to load root certificates: failed to parse certificate: "
                    "x509: malformed certificate")
    return "unable to load root certificates: no valid certificate authority data seen"


_PEM_BEGIN = b"\n-----BEGIN "
_PEM_END = b"\n-----END "
_DASHES = b"-----"


def _line(data: bytes) -> tuple[bytes, bytes]:
    """Go's pem getLine: the first line without its end (and trailing spaces), the rest."""
    end = data.find(b"\n")
    line, rest = (data, b"") if end < 0 else (data[:end], data[end + 1:])
    return line.rstrip(b" \t\r"), rest


def _pem_decode(data: bytes) -> tuple[tuple[bytes, bool, bytes] | None, bytes]:
    """Go's pem.Decode: the next block (type, whether it has headers, its bytes) and what
    follows it; (None, data) when there is none."""
    import base64
    import binascii

    rest = data
    while True:
        if rest.startswith(_PEM_BEGIN[1:]):
            rest = rest[len(_PEM_BEGIN) - 1:]
        elif (at := rest.find(_PEM_BEGIN)) >= 0:
            rest = rest[at + len(_PEM_BEGIN):]
        else:
            return None, data
        type_line, rest = _line(rest)
        if not type_line.endswith(_DASHES):
            continue
        kind = type_line[:-len(_DASHES)]
        headers = False
        while True:
            if not rest:
                return None, data
            line, after = _line(rest)
            if b":" not in line:
                break
            headers, rest = True, after
        if not headers and rest.startswith(_PEM_END[1:]):
            end, trailer_at = 0, len(_PEM_END) - 1
        else:
            end = rest.find(_PEM_END)
            trailer_at = end + len(_PEM_END)
        if end < 0:
            continue
        trailer = rest[trailer_at:trailer_at + len(kind) + len(_DASHES)]
        if trailer != kind + _DASHES or _line(rest[trailer_at + len(trailer):])[0]:
            continue
        encoded = rest[:end].replace(b" ", b"").replace(b"\t", b"").replace(b"\r", b"") \
            .replace(b"\n", b"")
        try:
            der = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        _, rest = _line(rest[end + len(_PEM_END) - 1:])
        return (kind, headers, der), rest
