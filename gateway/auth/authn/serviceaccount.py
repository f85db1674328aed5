"""Service-account tokens: bound JWTs signed by the gateway (pyjwt), as kube-apiserver mints
them for TokenRequest and checks them on every request.

A token is accepted when its signature verifies with one of --service-account-key-file's
keys, its issuer is one of --service-account-issuer, an audience is one of --api-audiences,
it has not expired, and the service account (and the object it is bound to) still exists with
the same uid.

The key files are read again when they change (gateway.apimachinery.dynamicfile): a token
signed by a key added to --service-account-key-file verifies from then on, and once
--service-account-signing-key-file changes new tokens are signed by the new key (whose
public half verifies too). A change that does not load is logged and the last keys kept.
kube-apiserver 1.32 reads these files at start only; rotating them there takes a restart.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gateway.apimachinery.dynamicfile import FileContent, FileContentError
from gateway.apimachinery.user import service_account_user
from gateway.apimachinery.uuids import new_uuid
from gateway.auth.authn import Authenticated, AuthenticationError

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
#: (kind, namespace, name) -> the object's uid, or None when it does not exist.
UidLookup = Callable[[str, str, str], Awaitable[str | None]]

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class KeyFileError(ValueError):
    pass


def _algorithm(key: PublicKey | PrivateKey) -> str:
    if isinstance(key, rsa.RSAPublicKey | rsa.RSAPrivateKey):
        return "RS256"
    curve = key.curve.name
    return {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(curve, "ES256")


def key_id(public: PublicKey) -> str:
    """kube's kid: base64url of the SHA-256 of the public key's DER."""
    der = public.public_bytes(serialization.Encoding.DER,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")


def _pem_blocks(data: bytes) -> list[bytes]:
    blocks, current = [], []
    for line in data.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN"):
            current = [line]
        elif current:
            current.append(line)
            if line.startswith(b"-----END"):
                blocks.append(b"".join(current))
                current = []
    return blocks


def parse_public_keys(data: bytes) -> list[PublicKey]:
    """Every public key in PEM ``data`` (private keys count for their public half);
    KeyFileError when one does not parse or there is none."""
    keys: list[PublicKey] = []
    for block in _pem_blocks(data):
        try:
            if b"PRIVATE KEY" in block:
                key = serialization.load_pem_private_key(block, None).public_key()
            elif b"CERTIFICATE" in block:
                key = x509.load_pem_x509_certificate(block).public_key()
            else:
                key = serialization.load_pem_public_key(block)
        except (ValueError, TypeError, UnsupportedAlgorithm) as err:
            raise KeyFileError(f"unreadable key: {err}") from None
        if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            raise KeyFileError(f"unsupported key type {type(key).__name__}")
        keys.append(key)
    if not keys:
        raise KeyFileError("no PEM key in it")
    return keys


def parse_private_key(data: bytes) -> PrivateKey:
    """An RSA or ECDSA private key in PEM; KeyFileError otherwise."""
    try:
        key = serialization.load_pem_private_key(data, None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as err:
        raise KeyFileError(f"unreadable private key: {err}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise KeyFileError(f"unsupported private key type {type(key).__name__}")
    return key


def load_public_keys(path: Path) -> list[PublicKey]:
    """Every public key in a PEM file (private keys count for their public half)."""
    try:
        return parse_public_keys(path.read_bytes())
    except KeyFileError as err:
        raise KeyFileError(f"{path}: {err}") from None


@dataclass(frozen=True)
class BoundObject:
    kind: str  # Secret, Pod or Node
    name: str
    uid: str


class ServiceAccountTokens:
    """Mints bound service-account tokens and checks any presented to the gateway."""

    def __init__(self, signing_key: PrivateKey | None, verify_keys: Sequence[PublicKey],
                 issuers: Sequence[str], audiences: Sequence[str], lookup: UidLookup) -> None:
        self.signing_key = signing_key
        self.verify_keys = {key_id(k): k for k in verify_keys}
        self.issuers = tuple(issuers) or (DEFAULT_ISSUER,)
        self.audiences = tuple(audiences) or self.issuers
        self.lookup = lookup
        #: the key files, read again when they change (empty: keys given, fixed)
        self.files: list[FileContent] = []

    @classmethod
    def from_files(cls, signing_key_file: Path | None, key_files: Sequence[Path],
                   issuers: Sequence[str], audiences: Sequence[str],
                   lookup: UidLookup) -> ServiceAccountTokens:
        """Keys from files, taken again whenever a file changes and still loads;
        KeyFileError when one does not load at start."""
        try:
            signing = None if signing_key_file is None else FileContent(
                f"--service-account-signing-key-file {signing_key_file}", [signing_key_file],
                lambda raw: parse_private_key(raw[0]))
            verifying = [FileContent(f"--service-account-key-file {path}", [path],
                                     lambda raw: parse_public_keys(raw[0]))
                         for path in key_files]
        except FileContentError as err:
            raise KeyFileError(str(err)) from None
        tokens = cls(None, [], issuers, audiences, lookup)

        def take(_: object = None) -> None:
            keys = [k for content in verifying for k in content.value]
            tokens.signing_key = signing.value if signing is not None else None
            if tokens.signing_key is not None:
                keys.append(tokens.signing_key.public_key())  # its own tokens verify
            tokens.verify_keys = {key_id(k): k for k in keys}

        take()
        tokens.files = [c for c in (signing, *verifying) if c is not None]
        for content in tokens.files:
            content.on_change(take)
        return tokens

    # -- minting ----------------------------------------------------------------------------

    def mint(self, namespace: str, name: str, uid: str, audiences: Sequence[str],
             expiration_seconds: int, bound: BoundObject | None = None) -> tuple[str, int]:
        """A signed token and its expiry (Unix seconds)."""
        if self.signing_key is None:
            raise AuthenticationError("no --service-account-signing-key-file")
        now = int(time.time())
        expires = now + expiration_seconds
        private: dict[str, Any] = {"namespace": namespace,
                                   "serviceaccount": {"name": name, "uid": uid}}
        if bound is not None:
            private[bound.kind.lower()] = {"name": bound.name, "uid": bound.uid}
        claims = {
            "aud": list(audiences or self.audiences), "exp": expires,
            "iat": now, "iss": self.issuers[0], "jti": new_uuid(), "nbf": now,
            "sub": f"system:serviceaccount:{namespace}:{name}", "kubernetes.io": private,
        }
        public = self.signing_key.public_key()
        token = jwt.encode(claims, self.signing_key, algorithm=_algorithm(self.signing_key),
                           headers={"kid": key_id(public)})
        return token, expires

    # -- checking ----------------------------------------------------------------------------

    async def authenticate(self, token: str,
                           audiences: tuple[str, ...] = ()) -> Authenticated | None:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None  # not a JWT: not ours
        if unverified.get("iss") not in self.issuers:
            return None  # some other issuer's token
        claims = self._verified(token, header, audiences or self.audiences)
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            raise AuthenticationError("service account token has no kubernetes.io claims")
        namespace = private.get("namespace", "")
        account = private.get("serviceaccount") or {}
        await self._still_exists("ServiceAccount", namespace, account.get("name", ""),
                                 account.get("uid", ""))
        for kind in ("secret", "pod", "node"):
            if isinstance(private.get(kind), dict):
                bound = private[kind]
                await self._still_exists(kind.capitalize(), "" if kind == "node" else namespace,
                                         bound.get("name", ""), bound.get("uid", ""))
        user = service_account_user(namespace, account.get("name", ""), account.get("uid", ""),
                                    {CREDENTIAL_ID: (f"JTI={claims.get('jti', '')}",)})
        accepted = tuple(a for a in _audiences(claims) if a in (audiences or self.audiences))
        return Authenticated(user, audiences=accepted)

    def _verified(self, token: str, header: dict, audiences: tuple[str, ...]) -> dict:
        candidates = [self.verify_keys[header["kid"]]] if header.get("kid") in \
            self.verify_keys else list(self.verify_keys.values())
        last: Exception | None = None
        for key in candidates:
            try:
                return jwt.decode(token, key, algorithms=[_algorithm(key)],
                                  audience=list(audiences), issuer=list(self.issuers),
                                  leeway=0, options={"require": ["exp", "iss", "sub"]})
            except jwt.InvalidSignatureError as err:
                last = err
            except jwt.PyJWTError as err:
                raise AuthenticationError(f"service account token: {err}") from None
        raise AuthenticationError(f"service account token: {last or 'no key to verify it'}")

    async def _still_exists(self, kind: str, namespace: str, name: str, uid: str) -> None:
        current = await self.lookup(kind, namespace, name)
        if current is None:
            raise AuthenticationError(f"{kind} {namespace}/{name} of the token no longer exists")
        if uid and current != uid:
            raise AuthenticationError(f"{kind} {namespace}/{name} of the token was replaced")


def _audiences(claims: dict) -> list[str]:
    aud = claims.get("aud", [])
    return [aud] if isinstance(aud, str) else list(aud)
