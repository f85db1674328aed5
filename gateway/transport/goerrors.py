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
