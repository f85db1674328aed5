"""Identities for security tests: bearer-token kubeconfigs, client certificates from any CA,
service-account tokens re-signed or expired, and raw HTTPS requests as any of them.

Everything here is made with the same libraries a real client would use (cryptography,
pyjwt, the standard library's ssl), never with the gateway's own code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography.hazmat.primitives import serialization

from tests.support.certs import CLIENT_AUTH, Issuer, Pair, issue_pair, new_key
from tests.support.gateway import GatewayProcess, send

ClientCert = Pair


def client_cert(out: Path, stem: str, cn: str, orgs: tuple[str, ...] = (), *,
                ca_cert: Path | None = None, ca_key: Path | None = None) -> ClientCert:
    """A client certificate signed by the given CA, or by a brand-new CA nobody trusts."""
    issuer = Issuer.load(ca_cert, ca_key) if ca_cert is not None and ca_key is not None \
        else Issuer.new("a-ca-nobody-trusts")
    return issue_pair(out, stem, cn, issuer, orgs=orgs, usages=(CLIENT_AUTH,))


def resigned_token(token: str, key_pem: bytes, **claims: Any) -> str:
    """The same token with some claims changed, signed with ``key_pem`` (same header)."""
    header = jwt.get_unverified_header(token)
    payload = jwt.decode(token, options={"verify_signature": False})
    payload.update(claims)
    key = serialization.load_pem_private_key(key_pem, None)
    return jwt.encode(payload, key, algorithm=header["alg"],  # type: ignore[arg-type]
                      headers={"kid": header.get("kid", "")})


def stranger_key_pem() -> bytes:
    return new_key().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def token_kubeconfig(gw: GatewayProcess, path: Path, token: str) -> Path:
    """A kubeconfig that authenticates with a bearer token only (no client certificate)."""
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gw",
        "clusters": [{"name": "gw", "cluster": {
            "server": gw.url, "certificate-authority": str(gw.cert_dir / "ca.crt")}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "gw", "context": {"cluster": "gw", "user": "u",
                                                 "namespace": "default"}}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def https(gw: GatewayProcess, method: str, path: str, *, token: str | None = None,
          cert: ClientCert | None = None, body: Any = None,
          headers: dict[str, str] | None = None,
          timeout: float = 30) -> tuple[int, Any, dict[str, str]]:
    """One request as whoever the arguments say: (status, JSON or text, response headers)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    code, raw, got = send(gw.url + path, method, gw.ssl_context(cert), body, sent, timeout)
    try:
        return code, json.loads(raw), got
    except ValueError:
        return code, raw.decode(errors="replace"), got


def whoami(gw: GatewayProcess, **identity: Any) -> tuple[int, Any]:
    """POST a SelfSubjectReview as the given identity; (status, userInfo or Status)."""
    code, body, _ = https(gw, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          body={"apiVersion": "authentication.k8s.io/v1",
                                "kind": "SelfSubjectReview"}, **identity)
    return code, body.get("status", {}).get("userInfo") if code == 201 else body
