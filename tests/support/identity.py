"""Identities for security tests: bearer-token kubeconfigs, client certificates from any CA,
service-account tokens re-signed or expired, and raw HTTPS requests as any of them.

Everything here is made with the same libraries a real client would use (cryptography,
pyjwt, the standard library's ssl), never with the gateway's own code.
"""

from __future__ import annotations

import datetime
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.gateway import GatewayProcess


@dataclass(frozen=True)
class ClientCert:
    cert: Path
    key: Path


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_pair(out: Path, stem: str, cert: x509.Certificate,
                key: ec.EllipticCurvePrivateKey) -> ClientCert:
    out.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out / f"{stem}.crt", out / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ClientCert(cert_path, key_path)


def _certificate(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
                 signer: ec.EllipticCurvePrivateKey, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def client_cert(out: Path, stem: str, cn: str, orgs: tuple[str, ...] = (), *,
                ca_cert: Path | None = None, ca_key: Path | None = None) -> ClientCert:
    """A client certificate signed by the given CA, or by a brand-new CA nobody trusts."""
    key = ec.generate_private_key(ec.SECP256R1())
    if ca_cert is not None and ca_key is not None:
        issuer_cert = x509.load_pem_x509_certificate(ca_cert.read_bytes())
        signer = serialization.load_pem_private_key(ca_key.read_bytes(), None)
        issuer = issuer_cert.subject
    else:
        signer = ec.generate_private_key(ec.SECP256R1())
        issuer = _name("a-ca-nobody-trusts")
    cert = _certificate(_name(cn, orgs), key, issuer, signer, ca=False)  # type: ignore[arg-type]
    return _write_pair(out, stem, cert, key)


def resigned_token(token: str, key_pem: bytes, **claims: Any) -> str:
    """The same token with some claims changed, signed with ``key_pem`` (same header)."""
    header = jwt.get_unverified_header(token)
    payload = jwt.decode(token, options={"verify_signature": False})
    payload.update(claims)
    key = serialization.load_pem_private_key(key_pem, None)
    return jwt.encode(payload, key, algorithm=header["alg"],  # type: ignore[arg-type]
                      headers={"kid": header.get("kid", "")})


def stranger_key_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
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
    ctx = ssl.create_default_context(cafile=str(gw.cert_dir / "ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    sent = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(gw.url + path, data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
            code, raw, got = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        code, raw, got = err.code, err.read(), dict(err.headers)
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
