"""The serving TLS context: our certificate, and the CAs whose client certificates we ask for."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path


def server_ssl_context(cert_file: Path, key_file: Path,
                       client_cas: Sequence[Path] = ()) -> ssl.SSLContext:
    """TLS 1.2+, HTTP/1.1 by ALPN; client certificates optional, verified against the CAs."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    loaded = False
    for ca in client_cas:
        ctx.load_verify_locations(cafile=str(ca))
        loaded = True
    ctx.verify_mode = ssl.CERT_OPTIONAL if loaded else ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
