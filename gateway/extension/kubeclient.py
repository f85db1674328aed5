"""Calls to the core server (the gateway, or any kube-apiserver) from an extension apiserver:
TokenReviews, SubjectAccessReviews and the extension-apiserver-authentication ConfigMap.

Configured as client-go's clientcmd and in-cluster config are: a kubeconfig file (its current
context's server, CA and client certificate or bearer token, embedded or as file paths), or,
without one, the pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the token
and CA under /var/run/secrets/kubernetes.io/serviceaccount). One aiohttp session with
keep-alive connections per client; the calls here are few and cached by their users.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from gateway.transport.clients import load_cert_chain_pem

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeConfigError(Exception):
    """The kubeconfig (or the in-cluster configuration) cannot be used; says why."""


class APIError(Exception):
    """The core server answered with an error status."""

    def __init__(self, code: int, body: bytes) -> None:
        super().__init__(f"{code}: {body[:300]!r}")
        self.code = code


@dataclass
class ClientConfig:
    """Where the core server is and how to talk to it."""

    server: str
    ssl_context: ssl.SSLContext
    headers: dict[str, str] = field(default_factory=dict)


def _material(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    """``<key>-data`` (base64) or ``<key>`` (a path, relative to the kubeconfig's folder)."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        return (base / entry[key]).read_bytes()
    return None


def load_kubeconfig(path: Path) -> ClientConfig:
    """The current context of the kubeconfig at ``path``; KubeConfigError when unusable."""
    try:
        config = yaml.safe_load(Path(path).read_text()) or {}
        contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
        context = contexts[config["current-context"]]
        cluster = {c["name"]: c["cluster"] for c in config["clusters"]}[context["cluster"]]
        users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
        user = users.get(context.get("user", ""), {})
        base = Path(path).parent
        ca = _material(cluster, "certificate-authority", base)
        ctx = ssl.create_default_context(cadata=ca.decode() if ca else None)
        if cluster.get("insecure-skip-tls-verify"):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        cert = _material(user, "client-certificate", base)
        key = _material(user, "client-key", base)
        if cert and key:
            load_cert_chain_pem(ctx, cert + b"\n" + key)
        headers = {}
        token = user.get("token") or (
            (base / user["tokenFile"]).read_text().strip() if user.get("tokenFile") else "")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return ClientConfig(cluster["server"].rstrip("/"), ctx, headers)
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, ssl.SSLError) as err:
        raise KubeConfigError(f"{path}: cannot use this kubeconfig: {err!r}") from None


def in_cluster_config() -> ClientConfig:
    """The pod's service account, as client-go's rest.InClusterConfig."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeConfigError("unable to load in-cluster configuration, "
                              "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
                              "defined (or give a kubeconfig)")
    try:
        token = (SERVICE_ACCOUNT_DIR / "token").read_text().strip()
        ctx = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
    except (OSError, ssl.SSLError) as err:
        raise KubeConfigError(f"unable to load in-cluster configuration: {err}") from None
    if ":" in host:
        host = f"[{host}]"
    return ClientConfig(f"https://{host}:{port}", ctx, {"Authorization": f"Bearer {token}"})


def client_config(kubeconfig: Path | None) -> ClientConfig:
    return load_kubeconfig(kubeconfig) if kubeconfig is not None else in_cluster_config()


class KubeClient:
    """JSON calls to the core server."""

    def __init__(self, config: ClientConfig, *, timeout: float = 10.0) -> None:
        self.config = config
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.config.ssl_context),
                headers={**self.config.headers, "Accept": "application/json",
                         "User-Agent": "gateway-extension-apiserver"})
        return self._session

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded answer; APIError for an error status, aiohttp.ClientError or
        TimeoutError when the server cannot be reached."""
        data = None if body is None else json.dumps(body).encode()
        async with self._open().request(
                method, self.config.server + path, data=data,
                headers={"Content-Type": "application/json"} if data else None,
                timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise APIError(resp.status, raw)
            return json.loads(raw)

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        """Watch events of ``path`` from ``resource_version`` (kube's 5-10 minute watches are
        ended by the server; the caller watches again)."""
        separator = "&" if "?" in path else "?"
        url = (f"{self.config.server}{path}{separator}watch=1&allowWatchBookmarks=true"
               f"&resourceVersion={resource_version}")
        async with self._open().get(url, timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self.timeout)) as resp:
            if resp.status >= 300:
                raise APIError(resp.status, await resp.read())
            pending = bytearray()  # events split on newlines, however long (no line limit)
            async for chunk in resp.content.iter_any():
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line = bytes(pending[:end])
                    del pending[:end + 1]
                    if line.strip():
                        yield json.loads(line)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
