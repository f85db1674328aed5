"""An extension apiserver written on gateway.extension (examples/wardle), run as a user runs
it behind a gateway: its own serving CA and certificate for ``api.wardle.svc``, its own
identity at the gateway (a client certificate from the gateway's CA, bound to
``system:auth-delegator`` and to ``extension-apiserver-authentication-reader`` as kube's
sample-apiserver is), a kubeconfig with that identity for ``--authentication-kubeconfig`` and
``--authorization-kubeconfig``, and the Namespace, Service, Endpoints and APIServices that
register it (the gateway runs with ``--enable-aggregator-routing``).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.support.certs import CLIENT_AUTH, SERVER_AUTH, Issuer, Pair, issue_pair, pem
from tests.support.gateway import GatewayProcess, free_port
from tests.support.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
GROUP = "wardle.example.com"
VERSIONS = ("v1alpha1", "v1beta1")
NAME, NAMESPACE = "api", "wardle"
IDENTITY = "wardle-apiserver"
#: What the sample-apiserver's deployment binds its service account to: delegation, and
#: reading what its admission reads (namespaces, webhook configurations, policies).
DELEGATION_RBAC = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: wardle:admission-reader}}
rules:
- {{apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations,
              validatingadmissionpolicies, validatingadmissionpolicybindings]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: wardle:admission-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: wardle:admission-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {IDENTITY}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: wardle:system:auth-delegator}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {IDENTITY}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: wardle-auth-reader, namespace: kube-system}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {IDENTITY}}}]
"""


class WardleProcess:
    """``python -m examples.wardle`` on a free port, for ``gateway``."""

    def __init__(self, workdir: Path, gateway: GatewayProcess, *extra: str) -> None:
        self.workdir = workdir
        #: More flags (e.g. --etcd-servers; the store is SQLite in the workdir otherwise).
        self.extra = list(extra)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.gateway = gateway
        self.port = free_port()
        ca = Issuer.new("wardle-ca")
        self.ca_file = self.workdir / "wardle-ca.crt"
        self.ca_file.write_bytes(pem(ca.cert))
        host = f"{NAME}.{NAMESPACE}.svc"
        self.serving = issue_pair(self.workdir, "serving", host, ca, usages=(SERVER_AUTH,),
                                  sans=(host, "localhost", "127.0.0.1"))
        cluster_ca = Issuer.load(gateway.cert_dir / "ca.crt", gateway.cert_dir / "ca.key")
        client = issue_pair(self.workdir, "identity", IDENTITY, cluster_ca, usages=(CLIENT_AUTH,))
        self.kubeconfig = self.workdir / "wardle.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "gateway",
            "clusters": [{"name": "gateway", "cluster": {
                "server": gateway.url, "certificate-authority": str(gateway.cert_dir / "ca.crt")}}],
            "users": [{"name": IDENTITY, "user": {"client-certificate": str(client.cert),
                                                  "client-key": str(client.key)}}],
            "contexts": [{"name": "gateway", "context": {"cluster": "gateway",
                                                         "user": IDENTITY}}]}))
        self.log_path = self.workdir / "wardle.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def args(self) -> list[str]:
        return [sys.executable, "-m", "examples.wardle", "--secure-port", str(self.port),
                "--bind-address", "127.0.0.1", "--tls-cert-file", str(self.serving.cert),
                "--tls-private-key-file", str(self.serving.key),
                "--authentication-kubeconfig", str(self.kubeconfig),
                "--authorization-kubeconfig", str(self.kubeconfig),
                "--data-dir", str(self.workdir / "data"), *self.extra]

    def start(self, *, rbac: str = DELEGATION_RBAC, wait: bool = True) -> WardleProcess:
        """Its identity's RBAC applied in the gateway, then the server started (and, with
        ``wait``, ready)."""
        self.gateway.kubectl("apply", "-f", "-", input=rbac)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=ROOT, env=env)
        if wait:
            eventually(self._ready, timeout=30, interval=0.1, what="wardle /readyz")
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"wardle exited with {self.proc.returncode}:\n{self.log()}")
        try:
            code, body, _ = self.request("GET", "/readyz")
        except (OSError, ssl.SSLError) as err:
            raise AssertionError(str(err)) from None
        assert code == 200, body
        return True

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def manifests(self) -> str:
        """Namespace, Service, Endpoints and an APIService per version (v1beta1 first)."""
        docs: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": NAME, "namespace": NAMESPACE},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": self.port}]}},
            {"apiVersion": "v1", "kind": "Endpoints",
             "metadata": {"name": NAME, "namespace": NAMESPACE},
             "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                          "ports": [{"name": "https", "port": self.port}]}]}]
        for priority, version in enumerate(VERSIONS, start=15):
            docs.append({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": f"{version}.{GROUP}"},
                "spec": {"group": GROUP, "version": version, "groupPriorityMinimum": 1000,
                         "versionPriority": priority,
                         "service": {"namespace": NAMESPACE, "name": NAME, "port": 443},
                         "caBundle": base64.b64encode(self.ca_file.read_bytes()).decode()}})
        return yaml.safe_dump_all(docs)

    def request(self, method: str, path: str, body: Any = None, *, user: str = "",
                groups: tuple[str, ...] = (), token: str = "", proxy: Pair | None = None,
                cert: Pair | None = None) -> tuple[int, bytes, dict]:
        """Straight to the server: as a front proxy naming ``user`` (the gateway's front-proxy
        client certificate, or ``proxy``, and X-Remote-User), with a client ``cert``, with a
        bearer ``token``, or anonymous."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if user:
            certs = self.gateway.cert_dir
            cert = proxy or Pair(certs / "front-proxy-client.crt",
                                 certs / "front-proxy-client.key")
            headers["X-Remote-User"] = user
            for group in groups:
                headers.setdefault("X-Remote-Group", group)  # one is enough here
        if cert is not None:
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=data,
                                     method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read(), dict(err.headers)
