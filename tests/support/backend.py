"""A real extension apiserver for aggregation tests, as a platform team would run one behind
an APIService: HTTPS with its own CA, front-proxy (request-header) authentication, one API
group served from memory, discovery (legacy and aggregated v2) and OpenAPI v2/v3.

It runs as a subprocess (``python -m tests.support.backend ...``) so that a test can SIGKILL it
and start it again on the same port with the same certificates. ``BackendProcess`` is the test
API; the module's ``main`` is the server.

What it serves (group ``wardle.example.com``, version ``v1alpha1``):

- ``flunders`` (kind Flunder, namespaced, short name ``fl``, category ``wardle``): list (label
  and field selectors, limit/continue, Table and PartialObjectMetadata output), watch
  (``?watch=1``; JSON lines, one event per chunk), get, create, update (PUT), patch (merge,
  strategic treated as merge, JSON patch), delete, deletecollection. An object with
  ``metadata.finalizers`` is not removed by a delete: it gets a ``deletionTimestamp`` and goes
  when an update leaves it without finalizers, as kube's stores do. Kept in memory: a restart
  forgets them.
- helpers, each a "subresource" of any flunder name (the flunder need not exist):
  ``.../flunders/<name>/echo`` (WebSocket echo, any offered subprotocol chosen),
  ``.../flunders/<name>/exec`` (a POST upgraded to ``SPDY/3.1`` as ``kubectl exec`` asks,
  the first offered ``X-Stream-Protocol-Version`` chosen, then raw bytes echoed),
  ``/slow?seconds=2`` (answers after a sleep), ``/redirect?to=URL&code=302``,
  ``/whoami`` (the identity and headers that arrived, with CORS headers set),
  ``/fail?code=500`` (a Status with that code); and on a list ``?bulk=50Mi`` streams a
  FlunderList of about that size, generated as it is written.
- ``/apis``, ``/apis/wardle.example.com``, ``/apis/wardle.example.com/v1alpha1``; ``/apis``
  with an Accept for ``apidiscovery.k8s.io`` v2 (or v2beta1) ``APIGroupDiscoveryList`` gives
  the aggregated document with an ETag (304 on If-None-Match).
- ``/openapi/v2`` (ETag, 304), ``/openapi/v3``, ``/openapi/v3/apis/wardle.example.com/v1alpha1``.
- ``/healthz``, ``/readyz``, ``/livez`` (``ok``), ``/version``.
- ``/debug/behaviour`` (the test's own knob, see ``BackendProcess.behave``): delay or fail
  chosen paths while running, e.g. to make the discovery check fail without a kill.

Authentication is kube's request-header scheme: the TLS handshake asks for a client
certificate and trusts only the request-header CA (a certificate from another CA fails the
handshake); a certificate whose CN is in the allowed names makes X-Remote-User/-Group/
-Extra-* count. Anything else is ``system:anonymous``, which may read discovery, OpenAPI,
health and version only (401 Status elsewhere; kube would answer 401 to a bad CN even on
discovery, this backend only ignores the headers). Every request is appended to a JSON-lines file
(method, path, query, headers, the identity derived) when it arrives, before it is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime
import hashlib
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

GROUP = "wardle.example.com"
VERSION = "v1alpha1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "flunders"
SINGULAR = "flunder"
KIND = "Flunder"
LIST_KIND = "FlunderList"
SHORT_NAMES = ["fl"]
CATEGORIES = ["wardle"]
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
GV_PATH = f"/apis/{GROUP}/{VERSION}"
APISERVICE_NAME = f"{VERSION}.{GROUP}"
DEFINITION = "com.example.wardle.v1alpha1.Flunder"
LIST_DEFINITION = "com.example.wardle.v1alpha1.FlunderList"
DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
DISCOVERY_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
ANONYMOUS = "system:anonymous"
#: Requests carrying this header are not recorded (BackendProcess's own readiness polls).
PROBE_HEADER = "X-Backend-Probe"
UNAUTHENTICATED = "system:unauthenticated"


# ---------------------------------------------------------------------------------------------
# The test API
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Received:
    """One request as it reached the backend, and who the backend decided it came from."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    user: str
    groups: list[str]
    extra: dict[str, list[str]]
    uid: str
    authenticated: bool  # by the front proxy's headers (False: anonymous)
    client_cn: str | None  # CN of the (verified) client certificate, None without one
    reason: str  # why anonymous, "" when authenticated
    time: float

    def header(self, name: str) -> str | None:
        """The first value of a header (case-insensitive), None when absent."""
        values = self.header_all(name)
        return values[0] if values else None

    def header_all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Received:
        return cls(method=data["method"], path=data["path"], query=data["query"],
                   headers=[(k, v) for k, v in data["headers"]], user=data["user"],
                   groups=list(data["groups"]), extra=dict(data["extra"]), uid=data["uid"],
                   authenticated=data["authenticated"], client_cn=data["client_cn"],
                   reason=data["reason"], time=data["time"])


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BackendProcess:
    """One extension apiserver subprocess with a fixed port and certificates that survive
    ``kill()``/``restart()``.

    Trust for front-proxy requests comes from ``requestheader_ca`` (a PEM file, e.g. a
    GatewayProcess's ``cert_dir / "front-proxy-ca.crt"``) or, as a real extension apiserver
    does it, from ``kube-system/extension-apiserver-authentication`` read at start with
    ``kubeconfig`` (then the ConfigMap's allowed names and header names are used too).
    """

    def __init__(self, workdir: Path, *, name: str = "api", namespace: str = "wardle",
                 requestheader_ca: Path | None = None, kubeconfig: Path | None = None,
                 allowed_names: tuple[str, ...] = ("front-proxy-client",),
                 port: int | None = None) -> None:
        from tests.support.certs import SERVER_AUTH, Issuer, issue_pair, pem

        if (requestheader_ca is None) == (kubeconfig is None):
            raise ValueError("give exactly one of requestheader_ca and kubeconfig")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.namespace = namespace
        self.requestheader_ca = requestheader_ca
        self.kubeconfig = kubeconfig
        self.allowed_names = tuple(allowed_names)
        self.port = port or _free_port()
        ca = Issuer.new(f"{name}.{namespace}-ca")
        self.ca_file = self.workdir / "backend-ca.crt"
        self.ca_file.write_bytes(pem(ca.cert))
        self.serving = issue_pair(self.workdir, "backend-serving", self.service_host, ca,
                                  usages=(SERVER_AUTH,),
                                  sans=(self.service_host, f"{self.service_host}.cluster.local",
                                        f"{name}.{namespace}", "localhost", "127.0.0.1"))
        self.requests_path = self.workdir / "backend-requests.jsonl"
        self.log_path = self.workdir / "backend.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def for_gateway(cls, workdir: Path, gateway: Any, **kwargs: Any) -> BackendProcess:
        """Trusting a GatewayProcess's front-proxy CA (its ``cert_dir/front-proxy-ca.crt``)."""
        return cls(workdir, requestheader_ca=Path(gateway.cert_dir) / "front-proxy-ca.crt",
                   **kwargs)

    # -- certificates -----------------------------------------------------------------------

    @property
    def service_host(self) -> str:
        """The name the aggregator verifies: ``<name>.<namespace>.svc``."""
        return f"{self.name}.{self.namespace}.svc"

    @property
    def ca_bundle_pem(self) -> bytes:
        return self.ca_file.read_bytes()

    @property
    def ca_bundle_b64(self) -> str:
        """For the APIService's ``spec.caBundle``."""
        return base64.b64encode(self.ca_bundle_pem).decode()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- process ----------------------------------------------------------------------------

    @property
    def args(self) -> list[str]:
        args = [sys.executable, "-m", "tests.support.backend",
                "--port", str(self.port), "--bind-address", "127.0.0.1",
                "--tls-cert-file", str(self.serving.cert),
                "--tls-private-key-file", str(self.serving.key),
                "--requests-log", str(self.requests_path)]
        if self.requestheader_ca is not None:
            args += ["--requestheader-client-ca-file", str(self.requestheader_ca)]
            for allowed in self.allowed_names:
                args += ["--requestheader-allowed-names", allowed]
        else:
            args += ["--authentication-kubeconfig", str(self.kubeconfig)]
        return args

    def start(self, *, wait: bool = True, timeout: float = 30) -> BackendProcess:
        if self.alive():
            raise RuntimeError("backend already running")
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.workdir, env=env)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30) -> None:
        """Until /readyz answers 200 over TLS; RuntimeError with the log if the process dies."""
        from tests.support.wait import eventually

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"backend exited with {self.proc.returncode}:\n{self.log()}")
            try:
                code, _, _ = self.request("GET", "/readyz", headers={PROBE_HEADER: "1"},
                                          timeout=5)
            except (OSError, ssl.SSLError) as err:
                raise AssertionError(str(err)) from None
            return code == 200

        try:
            eventually(ready, timeout=timeout, interval=0.05, what="backend /readyz")
        except AssertionError as err:
            raise TimeoutError(f"{err}\n{self.log()}") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int | None:
        """Signal the process and wait for it; returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the port stops answering at once (connections are reset)."""
        self.stop(signal.SIGKILL)

    def restart(self, *, wait: bool = True) -> BackendProcess:
        """Stop (if running) and start again on the same port with the same certificates;
        the stored flunders are gone, the request log is kept."""
        self.stop()
        return self.start(wait=wait)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def __enter__(self) -> BackendProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what arrived -----------------------------------------------------------------------

    def requests(self, path: str | None = None, *, prefix: str | None = None,
                 method: str | None = None) -> list[Received]:
        """Every request received since the last ``clear_requests()`` (across restarts), in
        order; optionally only an exact ``path``, a path ``prefix``, a ``method``."""
        try:
            lines = self.requests_path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                received = Received.from_json(json.loads(line))
            except ValueError:
                continue  # a line being written
            if path is not None and received.path != path:
                continue
            if prefix is not None and not received.path.startswith(prefix):
                continue
            if method is not None and received.method != method.upper():
                continue
            out.append(received)
        return out

    def clear_requests(self) -> None:
        self.requests_path.write_text("")

    def behave(self, *, delays: dict[str, float] | None = None,
               statuses: dict[str, int] | None = None) -> None:
        """Change how the running backend answers, until the next call or restart: ``delays``
        maps a path (exact, or a prefix ending in ``*``) to seconds to wait before answering,
        ``statuses`` to a status code to answer with (a Status body) instead. A key may start
        with a method and a space (``"DELETE /apis/...*"``) to apply to that method only; it
        wins over a key without one. Applies to every caller (the gateway's discovery and
        availability checks too); ``behave()`` resets."""
        code, body, _ = self.request("PUT", "/debug/behaviour",
                                     {"delays": delays or {}, "statuses": statuses or {}},
                                     headers={PROBE_HEADER: "1"})
        assert code == 200, body

    # -- talking to it directly -------------------------------------------------------------

    def ssl_context(self, cert: Any = None) -> ssl.SSLContext:
        """Trusting the backend's CA; presenting ``cert`` (anything with ``.cert`` and ``.key``
        paths, e.g. certs.Pair) when given."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if cert is not None:
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
        return ctx

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None, *, cert: Any = None,
                timeout: float = 30) -> tuple[int, bytes, dict[str, str]]:
        """One HTTPS request straight to the backend: (status, body, headers). A dict body
        goes as JSON; ``headers`` may carry X-Remote-* (they count only with the front-proxy
        client ``cert``)."""
        data = None if body is None else (
            body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(cert),
                                        timeout=timeout) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read(), dict(err.headers)

    # -- registering it behind a gateway ----------------------------------------------------

    def apiservice(self, *, service_port: int = 443, group_priority_minimum: int = 1000,
                   version_priority: int = 15, ca_bundle: bool = True) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "group": GROUP, "version": VERSION,
            "service": {"namespace": self.namespace, "name": self.name, "port": service_port},
            "groupPriorityMinimum": group_priority_minimum,
            "versionPriority": version_priority,
        }
        if ca_bundle:
            spec["caBundle"] = self.ca_bundle_b64
        return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": APISERVICE_NAME}, "spec": spec}

    def manifests(self, service_ip: str = "127.0.0.1", *, cluster_ip: str | None = None,
                  service_port: int = 443, endpoints: bool = True,
                  endpoint_slice: bool = False, namespace_object: bool = True,
                  apiservice: bool = True) -> list[dict[str, Any]]:
        """What a user would ``kubectl apply`` to put this backend behind a gateway running
        with --enable-aggregator-routing: Namespace, Service (port ``service_port`` named
        ``https`` → the backend's port), Endpoints (and/or an EndpointSlice) with address
        ``service_ip`` and port ``https`` = the backend's port, and the APIService."""
        docs: list[dict[str, Any]] = []
        if namespace_object:
            docs.append({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": self.namespace}})
        service_spec: dict[str, Any] = {
            "type": "ClusterIP",
            "ports": [{"name": "https", "port": service_port, "protocol": "TCP",
                       "targetPort": self.port}],
        }
        if cluster_ip is not None:
            service_spec["clusterIP"] = cluster_ip
        docs.append({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": self.name, "namespace": self.namespace},
                     "spec": service_spec})
        if endpoints:
            docs.append({"apiVersion": "v1", "kind": "Endpoints",
                         "metadata": {"name": self.name, "namespace": self.namespace},
                         "subsets": [{"addresses": [{"ip": service_ip}],
                                      "ports": [{"name": "https", "port": self.port,
                                                 "protocol": "TCP"}]}]})
        if endpoint_slice:
            docs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                         "metadata": {"name": f"{self.name}-1", "namespace": self.namespace,
                                      "labels": {"kubernetes.io/service-name": self.name}},
                         "addressType": "IPv6" if ":" in service_ip else "IPv4",
                         "endpoints": [{"addresses": [service_ip],
                                        "conditions": {"ready": True}}],
                         "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}]})
        if apiservice:
            docs.append(self.apiservice(service_port=service_port))
        return docs

    def manifests_yaml(self, service_ip: str = "127.0.0.1", **kwargs: Any) -> str:
        """``manifests`` as one multi-document YAML stream (for ``kubectl apply -f -``)."""
        return yaml.safe_dump_all(self.manifests(service_ip, **kwargs), sort_keys=False)


def parse_quantity(text: str) -> int:
    """Bytes in ``50Mi``, ``2M``, ``1024``..."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|k|K|M|G)?", text.strip())
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    factor = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1000, "K": 1000,
              "M": 10**6, "G": 10**9}[match.group(2)]
    return int(match.group(1)) * factor


# ---------------------------------------------------------------------------------------------
# The server (runs in the subprocess; aiohttp is imported there only)
# ---------------------------------------------------------------------------------------------

def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str,
                details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason,
                            "code": code}
    if details:
        body["details"] = details
    return body


class APIError(Exception):
    def __init__(self, code: int, reason: str, message: str,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = status_body(code, reason, message, details)
        self.code = code


def not_found(name: str) -> APIError:
    return APIError(404, "NotFound", f'{RESOURCE}.{GROUP} "{name}" not found',
                    {"name": name, "group": GROUP, "kind": RESOURCE})


# -- selectors --------------------------------------------------------------------------------

def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def label_matcher(selector: str) -> Callable[[dict[str, str]], bool]:
    """kube's label selector syntax: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``,
    ``a in (x,y)``, ``a notin (x,y)``, comma-separated (all must hold)."""
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_top(selector):
        if match := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op = match.group(1), match.group(2)
            values = {v.strip() for v in match.group(3).split(",") if v.strip()}
            if op == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif match := re.fullmatch(r"([^!=\s]+)\s*(==|=|!=)\s*(\S*)", term):
            key, op, value = match.groups()
            if op == "!=":
                tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif match := re.fullmatch(r"!\s*(\S+)", term):
            absent = match.group(1)
            tests.append(lambda labels, k=absent: k not in labels)
        elif re.fullmatch(r"[^\s!=(),]+", term):
            tests.append(lambda labels, k=term: k in labels)
        else:
            raise APIError(400, "BadRequest",
                           f'unable to parse requirement: invalid label selector "{selector}"')
    return lambda labels: all(test(labels) for test in tests)


def field_matcher(selector: str) -> Callable[[dict[str, Any]], bool]:
    tests: list[Callable[[dict[str, Any]], bool]] = []
    for term in _split_top(selector):
        match = re.fullmatch(r"([^!=\s]+)\s*(==|=|!=)\s*(\S*)", term)
        if not match or match.group(1) not in ("metadata.name", "metadata.namespace"):
            raise APIError(400, "BadRequest",
                           f'"{term}" is not a known field selector: only "metadata.name", '
                           f'"metadata.namespace"')
        key, op, value = match.groups()
        attr = key.split(".")[1]

        def test(obj: dict[str, Any], a: str = attr, v: str = value, neg: bool = op == "!="
                 ) -> bool:
            return (obj["metadata"].get(a) == v) != neg

        tests.append(test)
    return lambda obj: all(test(obj) for test in tests)


#: kube's Status reasons of the codes a test may tell the backend to answer with.
_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
            409: "Conflict", 429: "TooManyRequests", 503: "ServiceUnavailable",
            504: "Timeout"}
#: Set by a delete of an object with finalizers; an update cannot change them.
_DELETION = ("deletionTimestamp", "deletionGracePeriodSeconds")


def _typed(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with apiVersion and kind set, first."""
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": GROUP_VERSION, "kind": KIND, **rest}


# -- the store --------------------------------------------------------------------------------

@dataclass(eq=False)
class Watcher:
    namespace: str | None
    labels: Callable[[dict[str, str]], bool]
    fields: Callable[[dict[str, Any]], bool]
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = field(default_factory=asyncio.Queue)

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        return ((self.namespace is None or meta.get("namespace") == self.namespace)
                and self.labels(meta.get("labels") or {}) and self.fields(obj))


class Store:
    """Flunders in memory with a resourceVersion counter, an event history for watches from
    a resourceVersion, and live watchers."""

    def __init__(self) -> None:
        self.rv = 1000
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.history: deque[tuple[int, str, dict[str, Any]]] = deque(maxlen=10000)
        self.watchers: set[Watcher] = set()

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _emit(self, kind: str, obj: dict[str, Any]) -> None:
        self.history.append((self.rv, kind, copy.deepcopy(obj)))
        for watcher in list(self.watchers):
            if watcher.matches(obj):
                watcher.queue.put_nowait((kind, copy.deepcopy(obj)))

    def list(self, namespace: str | None, labels: Callable[[dict[str, str]], bool],
             fields: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [copy.deepcopy(obj) for (ns, _), obj in sorted(self.objects.items())
                if (namespace is None or ns == namespace)
                and labels(obj["metadata"].get("labels") or {}) and fields(obj)]

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((namespace, name))
        if obj is None:
            raise not_found(name)
        return copy.deepcopy(obj)

    def create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise APIError(422, "Invalid",
                           f'{KIND}.{GROUP} "" is invalid: metadata.name: Required value: '
                           f'name or generateName is required',
                           {"group": GROUP, "kind": KIND, "causes": [
                               {"reason": "FieldValueRequired",
                                "message": "Required value: name or generateName is required",
                                "field": "metadata.name"}]})
        if (namespace, name) in self.objects:
            raise APIError(409, "AlreadyExists", f'{RESOURCE}.{GROUP} "{name}" already exists',
                           {"name": name, "group": GROUP, "kind": RESOURCE})
        meta.update(namespace=namespace, uid=str(uuid.uuid4()),
                    resourceVersion=self._next_rv(), creationTimestamp=_now(), generation=1)
        obj = _typed(obj)
        self.objects[(namespace, name)] = obj
        self._emit("ADDED", obj)
        return copy.deepcopy(obj)

    def update(self, namespace: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        old = self.objects.get((namespace, name))
        if old is None:
            raise not_found(name)
        meta = obj.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise APIError(400, "BadRequest",
                           "the name of the object does not match the name on the URL")
        given_rv = meta.get("resourceVersion")
        if given_rv and given_rv != old["metadata"]["resourceVersion"]:
            raise APIError(409, "Conflict",
                           f'Operation cannot be fulfilled on {RESOURCE}.{GROUP} "{name}": the '
                           f'object has been modified; please apply your changes to the latest '
                           f'version and try again', {"name": name, "group": GROUP,
                                                      "kind": RESOURCE})
        keep = {k: old["metadata"][k] for k in ("uid", "creationTimestamp", "generation",
                                                 *_DELETION) if k in old["metadata"]}
        if obj.get("spec") != old.get("spec"):
            keep["generation"] += 1
        meta.update(name=name, namespace=namespace, resourceVersion=self._next_rv(), **keep)
        obj = _typed(obj)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(namespace, name)  # its last finalizer went
        self.objects[(namespace, name)] = obj
        self._emit("MODIFIED", obj)
        return copy.deepcopy(obj)

    def delete(self, namespace: str, name: str) -> dict[str, Any]:
        """Remove the object, or only mark it deleted while it has finalizers."""
        obj = self.objects.get((namespace, name))
        if obj is None:
            raise not_found(name)
        meta = obj["metadata"]
        if not meta.get("finalizers"):
            return self._remove(namespace, name)
        if not meta.get("deletionTimestamp"):
            meta.update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0,
                        resourceVersion=self._next_rv())
            self._emit("MODIFIED", obj)
        return copy.deepcopy(obj)

    def _remove(self, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects.pop((namespace, name))
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit("DELETED", obj)
        return copy.deepcopy(obj)


# -- documents --------------------------------------------------------------------------------

def api_group() -> dict[str, Any]:
    gv = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"name": GROUP, "versions": [gv], "preferredVersion": gv}


def api_resource_list() -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
            "resources": [{"name": RESOURCE, "singularName": SINGULAR, "namespaced": True,
                           "kind": KIND, "verbs": VERBS, "shortNames": SHORT_NAMES,
                           "categories": CATEGORIES,
                           "storageVersionHash": base64.b64encode(hashlib.sha256(
                               f"{GROUP_VERSION}/{KIND}".encode()).digest()[:8]).decode()}]}


def aggregated_discovery(api_version: str) -> dict[str, Any]:
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {},
            "items": [{"metadata": {"name": GROUP, "creationTimestamp": None},
                       "versions": [{"version": VERSION, "freshness": "Current", "resources": [{
                           "resource": RESOURCE,
                           "responseKind": {"group": GROUP, "version": VERSION, "kind": KIND},
                           "scope": "Namespaced", "singularResource": SINGULAR,
                           "verbs": VERBS, "shortNames": SHORT_NAMES,
                           "categories": CATEGORIES}]}]}]}


_GVK = [{"group": GROUP, "version": VERSION, "kind": KIND}]
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."


def _schemas(ref_prefix: str) -> dict[str, Any]:
    def ref(name: str) -> dict[str, Any]:
        return {"$ref": ref_prefix + name}

    return {
        DEFINITION: {
            "description": "A Flunder is an example type with a spec.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": ref(_META + "ObjectMeta"),
                "spec": {"type": "object", "properties": {
                    "reference": {"type": "string"}, "data": {"type": "string"}}},
            },
            "x-kubernetes-group-version-kind": _GVK,
        },
        LIST_DEFINITION: {
            "type": "object", "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "items": {"type": "array", "items": ref(DEFINITION)},
                "metadata": ref(_META + "ListMeta"),
            },
            "x-kubernetes-group-version-kind": [{**_GVK[0], "kind": LIST_KIND}],
        },
        _META + "ObjectMeta": {"type": "object", "properties": {
            "name": {"type": "string"}, "namespace": {"type": "string"},
            "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}},
        _META + "ListMeta": {"type": "object", "properties": {
            "resourceVersion": {"type": "string"}, "continue": {"type": "string"},
            "remainingItemCount": {"type": "integer", "format": "int64"}}},
    }


def _operations(v3: bool) -> dict[str, Any]:
    def response(definition: str) -> dict[str, Any]:
        if v3:
            return {"description": "OK", "content": {"application/json": {"schema": {
                "$ref": f"#/components/schemas/{definition}"}}}}
        return {"description": "OK", "schema": {"$ref": f"#/definitions/{definition}"}}

    def op(action: str, verb: str, definition: str, suffix: str = "") -> dict[str, Any]:
        return {"operationId": f"{verb}WardleExampleComV1alpha1Namespaced{KIND}{suffix}",
                "tags": ["wardleExampleCom_v1alpha1"],
                "responses": {"200": response(definition)},
                "x-kubernetes-action": action, "x-kubernetes-group-version-kind": _GVK[0]}

    namespace = {"name": "namespace", "in": "path", "required": True, "description":
                 "object name and auth scope", **({"schema": {"type": "string"}} if v3
                                                  else {"type": "string"})}
    name = {**namespace, "name": "name", "description": f"name of the {KIND}"}
    return {
        f"{GV_PATH}/namespaces/{{namespace}}/{RESOURCE}": {
            "get": op("list", "list", LIST_DEFINITION),
            "post": op("post", "create", DEFINITION),
            "delete": op("deletecollection", "deleteCollection", DEFINITION),
            "parameters": [namespace]},
        f"{GV_PATH}/namespaces/{{namespace}}/{RESOURCE}/{{name}}": {
            "get": op("get", "read", DEFINITION), "put": op("put", "replace", DEFINITION),
            "patch": op("patch", "patch", DEFINITION),
            "delete": op("delete", "delete", DEFINITION),
            "parameters": [name, namespace]},
        f"{GV_PATH}/{RESOURCE}": {
            "get": {**op("list", "list", LIST_DEFINITION, "ForAllNamespaces"),
                    "operationId": f"listWardleExampleComV1alpha1{KIND}ForAllNamespaces"}},
        f"{GV_PATH}/": {"get": {"operationId": "getWardleExampleComV1alpha1APIResources",
                                "tags": ["wardleExampleCom_v1alpha1"],
                                "responses": {"200": {"description": "OK"}}}},
    }


def openapi_v2() -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "Wardle", "version": "v0"},
            "paths": _operations(False), "definitions": _schemas("#/definitions/")}


def openapi_v3_group_version() -> dict[str, Any]:
    return {"openapi": "3.0.0", "info": {"title": "Wardle", "version": "v0"},
            "paths": _operations(True),
            "components": {"schemas": _schemas("#/components/schemas/")}}


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _etag(data: bytes) -> str:
    return '"' + hashlib.sha512(data).hexdigest().upper() + '"'


# -- media types ------------------------------------------------------------------------------

def _accepts(request: Any) -> list[dict[str, str]]:
    out = []
    for part in request.headers.get("Accept", "").split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params = {"type": pieces[0].lower()}
        for piece in pieces[1:]:
            if "=" in piece:
                key, value = piece.split("=", 1)
                params[key.strip().lower()] = value.strip()
        out.append(params)
    return out


def _wants(request: Any, as_kind: str, group: str) -> str | None:
    """The version of ``as=<as_kind>;g=<group>`` the Accept header asks for first, if any."""
    for params in _accepts(request):
        if params["type"] in ("application/json", "*/*") and params.get("as") == as_kind \
                and params.get("g") == group:
            return params.get("v")
    return None


# -- the app ----------------------------------------------------------------------------------

@dataclass
class AuthConfig:
    ca_file: Path | None
    allowed_names: list[str]
    username_headers: list[str]
    group_headers: list[str]
    extra_prefixes: list[str]
    uid_headers: list[str]


def _load_kubeconfig(path: Path) -> tuple[str, ssl.SSLContext, dict[str, str]]:
    """Server URL, TLS context and headers for the kubeconfig's current context (embedded or
    file certificates, or a bearer token)."""
    config = yaml.safe_load(path.read_text())
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    context = contexts[config["current-context"]]
    cluster = {c["name"]: c["cluster"] for c in config["clusters"]}[context["cluster"]]
    user = {u["name"]: u["user"] for u in config.get("users", [])}.get(context.get("user"), {})
    workdir = Path(os.getcwd())

    def material(key: str, stem: str) -> str | None:
        if f"{key}-data" in (cluster if stem == "kc-ca" else user):
            source = cluster if stem == "kc-ca" else user
            out = workdir / f"{stem}.pem"
            out.write_bytes(base64.b64decode(source[f"{key}-data"]))
            out.chmod(0o600)
            return str(out)
        source = cluster if stem == "kc-ca" else user
        return source.get(key)

    ca = material("certificate-authority", "kc-ca")
    ctx = ssl.create_default_context(cafile=ca)
    if cluster.get("insecure-skip-tls-verify"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert = material("client-certificate", "kc-client-cert")
    key = material("client-key", "kc-client-key")
    if cert and key:
        ctx.load_cert_chain(cert, key)
    headers = {"Accept": "application/json"}
    if user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    return cluster["server"].rstrip("/"), ctx, headers


def fetch_auth_config(kubeconfig: Path, out: Path) -> AuthConfig:
    """Read kube-system/extension-apiserver-authentication as an extension apiserver does at
    start; a missing ConfigMap leaves request-header authentication off (all anonymous)."""
    server, ctx, headers = _load_kubeconfig(kubeconfig)
    url = f"{server}/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=ctx,
                                    timeout=30) as resp:
            data = json.loads(resp.read()).get("data") or {}
    except urllib.error.HTTPError as err:
        if err.code != 404:
            raise SystemExit(f"unable to load configmap based request-header-client-ca-file: "
                             f"{err.code} {err.read()[:300]!r}") from None
        print("extension-apiserver-authentication not found: all requests are anonymous",
              flush=True)
        data = {}

    def strings(key: str, default: list[str]) -> list[str]:
        return json.loads(data[key]) if data.get(key) else default

    ca_file = None
    if data.get("requestheader-client-ca-file"):
        ca_file = out / "requestheader-client-ca.crt"
        ca_file.write_text(data["requestheader-client-ca-file"])
    return AuthConfig(ca_file, strings("requestheader-allowed-names", []),
                      strings("requestheader-username-headers", ["X-Remote-User"]),
                      strings("requestheader-group-headers", ["X-Remote-Group"]),
                      strings("requestheader-extra-headers-prefix", ["X-Remote-Extra-"]),
                      strings("requestheader-uid-headers", []))


ANONYMOUS_PATHS = re.compile(
    r"^/(apis/?|apis/" + re.escape(GROUP) + r"/?|apis/" + re.escape(GROUP) + "/" + VERSION
    + r"/?|openapi/v2|openapi/v3(/.*)?|healthz(/.*)?|readyz(/.*)?|livez(/.*)?|version/?)$")


def build_app(auth: AuthConfig, requests_log: Path | None) -> Any:
    from aiohttp import WSMsgType, web
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    store = Store()
    started = time.time()

    def respond(obj: Any, status: int = 200, headers: dict[str, str] | None = None
                ) -> web.Response:
        return web.Response(body=_json(obj), status=status, content_type="application/json",
                            headers=headers)

    def identify(request: web.Request) -> dict[str, Any]:
        ssl_object = request.transport.get_extra_info("ssl_object") \
            if request.transport is not None else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        anonymous = {"user": ANONYMOUS, "groups": [UNAUTHENTICATED], "extra": {}, "uid": "",
                     "authenticated": False, "client_cn": None}
        if not der:
            return {**anonymous, "reason": "no client certificate"}
        cert = x509.load_der_x509_certificate(der)
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        cn = str(names[0].value) if names else ""
        anonymous["client_cn"] = cn
        if auth.allowed_names and cn not in auth.allowed_names:
            return {**anonymous, "reason": f"client certificate CN {cn!r} is not allowed"}
        user = next((v.strip() for h in auth.username_headers
                     for v in request.headers.getall(h, []) if v.strip()), "")
        if not user:
            return {**anonymous, "reason": "no user header"}
        groups = [v.strip() for h in auth.group_headers
                  for v in request.headers.getall(h, []) if v.strip()]
        uid = next((v.strip() for h in auth.uid_headers
                    for v in request.headers.getall(h, []) if v.strip()), "")
        extra: dict[str, list[str]] = {}
        for name, value in request.headers.items():
            for prefix in auth.extra_prefixes:
                if name.lower().startswith(prefix.lower()) and len(name) > len(prefix):
                    extra.setdefault(unquote(name[len(prefix):]).lower(), []).append(value)
        return {"user": user, "groups": groups, "extra": extra, "uid": uid,
                "authenticated": True, "client_cn": cn, "reason": ""}

    behaviour: dict[str, dict[str, float]] = {"delays": {}, "statuses": {}}

    async def set_behaviour(request: web.Request) -> web.Response:
        if request.method in ("PUT", "POST"):
            given = await request.json()
            behaviour["delays"] = dict(given.get("delays") or {})
            behaviour["statuses"] = dict(given.get("statuses") or {})
        return respond(behaviour)

    @web.middleware
    async def front(request: web.Request, handler: Any) -> web.StreamResponse:
        who = identify(request)
        request["identity"] = who
        if requests_log is not None and PROBE_HEADER not in request.headers:
            record = {"time": time.time(), "method": request.method, "path": request.path,
                      "query": request.query_string,
                      "headers": [[k, v] for k, v in request.headers.items()], **who}
            with open(requests_log, "a") as log:
                log.write(json.dumps(record) + "\n")
        if request.path == "/debug/behaviour":
            return await set_behaviour(request)
        delay = _rule(behaviour["delays"], request.method, request.path)
        if delay:
            await asyncio.sleep(float(delay))
        code = _rule(behaviour["statuses"], request.method, request.path)
        if code:
            return respond(status_body(int(code), _REASONS.get(int(code), "InternalError" if
                                                              int(code) >= 500 else
                                                              "BadRequest"),
                                       f"told to answer {code}"), int(code))
        if not who["authenticated"] and not ANONYMOUS_PATHS.match(request.path):
            return respond(status_body(401, "Unauthorized", "Unauthorized"), 401)
        try:
            return await handler(request)
        except APIError as err:
            return respond(err.body, err.code)
        except web.HTTPMethodNotAllowed:
            return respond(status_body(405, "MethodNotAllowed",
                                       "the server does not allow this method on the "
                                       "requested resource"), 405)
        except web.HTTPNotFound:
            if request.path.startswith("/apis"):
                return respond(status_body(404, "NotFound",
                                           "the server could not find the requested resource"),
                               404)
            return web.Response(status=404, text="404 page not found\n")

    routes = web.RouteTableDef()

    # -- health, version ----------------------------------------------------------------

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    for path in ("/healthz", "/readyz", "/livez", "/healthz/{c}", "/readyz/{c}", "/livez/{c}"):
        routes.get(path)(ok)

    @routes.get("/version")
    async def version(_: web.Request) -> web.Response:
        return respond({"major": "1", "minor": "32", "gitVersion": "v1.32.0-wardle",
                        "platform": sys.platform})

    # -- discovery ----------------------------------------------------------------------

    discovery_docs = {v: _json(aggregated_discovery(f"apidiscovery.k8s.io/{v}"))
                      for v in ("v2", "v2beta1")}

    async def apis(request: web.Request) -> web.Response:
        wanted = _wants(request, "APIGroupDiscoveryList", "apidiscovery.k8s.io")
        if request.path == "/apis" and wanted in discovery_docs:
            body = discovery_docs[wanted]
            headers = {"ETag": _etag(body), "Vary": "Accept", "Cache-Control": "public"}
            content_type = DISCOVERY_V2 if wanted == "v2" else DISCOVERY_V2BETA1
            if request.headers.get("If-None-Match") == headers["ETag"]:
                return web.Response(status=304, headers=headers)
            return web.Response(body=body, headers={**headers, "Content-Type": content_type})
        return respond({"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group()]},
                       headers={"Vary": "Accept"})

    routes.get("/apis")(apis)
    routes.get("/apis/")(apis)

    async def group(_: web.Request) -> web.Response:
        return respond({"kind": "APIGroup", "apiVersion": "v1", **api_group()})

    routes.get(f"/apis/{GROUP}")(group)
    routes.get(f"/apis/{GROUP}/")(group)

    async def resources(_: web.Request) -> web.Response:
        return respond(api_resource_list())

    routes.get(GV_PATH)(resources)
    routes.get(GV_PATH + "/")(resources)

    # -- OpenAPI ------------------------------------------------------------------------

    v2_body = _json(openapi_v2())
    v3_body = _json(openapi_v3_group_version())
    v3_hash = hashlib.sha512(v3_body).hexdigest().upper()
    v3_key = f"apis/{GROUP}/{VERSION}"

    def cached(request: web.Request, body: bytes, extra: dict[str, str] | None = None
               ) -> web.Response:
        headers = {"ETag": _etag(body), **(extra or {})}
        if request.headers.get("If-None-Match") == headers["ETag"]:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)

    @routes.get("/openapi/v2")
    async def openapi2(request: web.Request) -> web.Response:
        return cached(request, v2_body)

    @routes.get("/openapi/v3")
    async def openapi3(_: web.Request) -> web.Response:
        return respond({"paths": {v3_key: {
            "serverRelativeURL": f"/openapi/v3/{v3_key}?hash={v3_hash}"}}})

    @routes.get(f"/openapi/v3/{v3_key}")
    async def openapi3_gv(request: web.Request) -> web.Response:
        given = request.query.get("hash")
        if given and given != v3_hash:
            raise web.HTTPMovedPermanently(f"/openapi/v3/{v3_key}?hash={v3_hash}")
        extra = {"Cache-Control": "public, immutable", "Expires": "Thu, 01 Jan 2099 00:00:00 "
                 "GMT"} if given else {"Cache-Control": "no-cache, private"}
        return cached(request, v3_body, extra)

    # -- flunders -----------------------------------------------------------------------

    def render(request: web.Request, obj: dict[str, Any]) -> Any:
        if _wants(request, "Table", "meta.k8s.io"):
            return table(request, [obj], {"resourceVersion": obj["metadata"]
                                          .get("resourceVersion", "")})
        if (v := _wants(request, "PartialObjectMetadata", "meta.k8s.io")):
            return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{v}",
                    "metadata": obj["metadata"]}
        return obj

    def table(request: web.Request, items: list[dict[str, Any]], meta: dict[str, Any]) -> Any:
        version = _wants(request, "Table", "meta.k8s.io")
        return {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta,
                "columnDefinitions": [
                    {"name": "Name", "type": "string", "format": "name", "priority": 0,
                     "description": "Name must be unique within a namespace."},
                    {"name": "Created At", "type": "date", "format": "", "priority": 0,
                     "description": "CreationTimestamp is a timestamp representing the "
                                    "server time when this object was created."}],
                "rows": [{"cells": [o["metadata"]["name"], o["metadata"].get(
                    "creationTimestamp")], "object": {
                    "kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}",
                    "metadata": o["metadata"]}} for o in items]}

    def render_list(request: web.Request, items: list[dict[str, Any]], meta: dict[str, Any]
                    ) -> Any:
        if _wants(request, "Table", "meta.k8s.io"):
            return table(request, items, meta)
        if (v := _wants(request, "PartialObjectMetadataList", "meta.k8s.io")):
            return {"kind": "PartialObjectMetadataList", "apiVersion": f"meta.k8s.io/{v}",
                    "metadata": meta, "items": [
                        {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{v}",
                         "metadata": o["metadata"]} for o in items]}
        return {"kind": LIST_KIND, "apiVersion": GROUP_VERSION, "metadata": meta,
                "items": items}

    def selectors(request: web.Request) -> tuple[Any, Any]:
        return (label_matcher(request.query.get("labelSelector", "")),
                field_matcher(request.query.get("fieldSelector", "")))

    async def body_of(request: web.Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.read() or b"null")
        except ValueError as err:
            raise APIError(400, "BadRequest", f"the body of the request was in an unknown "
                           f"format: {err}") from None
        if not isinstance(body, dict):
            raise APIError(400, "BadRequest", "the body must be a JSON object")
        if body.get("kind") not in (None, KIND) or \
                body.get("apiVersion") not in (None, GROUP_VERSION):
            raise APIError(400, "BadRequest", f"the API version in the data "
                           f"({body.get('apiVersion')}) does not match the expected API "
                           f"version ({GROUP_VERSION})")
        return body

    async def list_or_watch(request: web.Request) -> web.StreamResponse:
        namespace = request.match_info.get("namespace")
        query = request.query
        if query.get("watch") in ("1", "true", "True"):
            return await watch(request, namespace)
        if "bulk" in query:
            return await bulk(request, namespace or "default", parse_quantity(query["bulk"]))
        labels, fields = selectors(request)
        items = store.list(namespace, labels, fields)
        meta: dict[str, Any] = {"resourceVersion": str(store.rv)}
        start = 0
        if query.get("continue"):
            try:
                start = int(base64.b64decode(query["continue"]).decode())
            except ValueError:
                raise APIError(400, "BadRequest", "invalid continue token") from None
        limit = int(query.get("limit") or 0)
        if limit > 0 and start + limit < len(items):
            meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
            items = items[start:start + limit]
        else:
            items = items[start:]
        return respond(render_list(request, items, meta))

    async def watch(request: web.Request, namespace: str | None) -> web.StreamResponse:
        labels, fields = selectors(request)
        watcher = Watcher(namespace, labels, fields)
        rv = request.query.get("resourceVersion", "")
        initial: list[tuple[str, dict[str, Any]]] = []
        if rv in ("", "0"):
            initial = [("ADDED", o) for o in store.list(namespace, labels, fields)]
        else:
            try:
                since = int(rv)
            except ValueError:
                raise APIError(400, "BadRequest", f"invalid resource version: {rv}") from None
            oldest = store.history[0][0] if store.history else store.rv
            if since < oldest - 1 and len(store.history) == store.history.maxlen:
                initial = [("ERROR", status_body(410, "Expired", f"too old resource version: "
                                                 f"{since} ({oldest - 1})"))]
            else:
                initial = [(kind, obj) for at, kind, obj in store.history
                           if at > since and watcher.matches(obj)]
        store.watchers.add(watcher)
        response = web.StreamResponse(headers={"Content-Type": "application/json",
                                               "Transfer-Encoding": "chunked"})
        response.enable_chunked_encoding()
        timeout = float(request.query.get("timeoutSeconds") or 0)
        deadline = time.monotonic() + timeout if timeout else None
        try:
            await response.prepare(request)
            for kind, obj in initial:
                shown = obj if kind == "ERROR" else render(request, obj)
                await response.write(_json({"type": kind, "object": shown}) + b"\n")
                if kind == "ERROR":
                    return response
            while True:
                wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if wait <= 0:
                    break
                try:
                    kind, obj = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    continue
                await response.write(_json({"type": kind, "object": render(request, obj)})
                                     + b"\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            store.watchers.discard(watcher)
        return response

    async def bulk(request: web.Request, namespace: str, size: int) -> web.StreamResponse:
        """A FlunderList of about ``size`` bytes, made as it is written (never all in memory)."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        head = _json({"kind": LIST_KIND, "apiVersion": GROUP_VERSION,
                      "metadata": {"resourceVersion": str(store.rv)}})[:-1] + b',"items":['
        await response.write(head)
        padding = "x" * 16000
        written, index, chunk = len(head), 0, bytearray()
        while written < size:
            item = _json({"apiVersion": GROUP_VERSION, "kind": KIND, "metadata": {
                "name": f"bulk-{index:07d}", "namespace": namespace,
                "uid": f"00000000-0000-0000-0000-{index:012d}", "resourceVersion": "1",
                "creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"data": padding}})
            if index:
                chunk += b","
            chunk += item
            written += len(item) + (1 if index else 0)
            index += 1
            if len(chunk) >= 256 * 1024:
                await response.write(bytes(chunk))
                chunk.clear()
        chunk += b"]}"
        await response.write(bytes(chunk))
        await response.write_eof()
        return response

    async def create(request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        body = await body_of(request)
        meta = body.setdefault("metadata", {})
        if meta.get("namespace") not in (None, "", namespace):
            raise APIError(400, "BadRequest", "the namespace of the provided object does not "
                           "match the namespace sent on the request")
        if request.query.get("dryRun") == "All":
            body["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()),
                                    creationTimestamp=_now())
            return respond(render(request, body), 201)
        return respond(render(request, store.create(namespace, body)), 201)

    async def delete_collection(request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        labels, fields = selectors(request)
        deleted = [store.delete(namespace, o["metadata"]["name"])
                   for o in store.list(namespace, labels, fields)]
        return respond(render_list(request, deleted, {"resourceVersion": str(store.rv)}))

    routes.get(f"{GV_PATH}/{RESOURCE}")(list_or_watch)
    routes.get(f"{GV_PATH}/namespaces/{{namespace}}/{RESOURCE}")(list_or_watch)
    routes.post(f"{GV_PATH}/namespaces/{{namespace}}/{RESOURCE}")(create)
    routes.delete(f"{GV_PATH}/namespaces/{{namespace}}/{RESOURCE}")(delete_collection)

    item = f"{GV_PATH}/namespaces/{{namespace}}/{RESOURCE}/{{name}}"

    @routes.get(item)
    async def get(request: web.Request) -> web.Response:
        info = request.match_info
        return respond(render(request, store.get(info["namespace"], info["name"])))

    @routes.put(item)
    async def update(request: web.Request) -> web.Response:
        info = request.match_info
        body = await body_of(request)
        return respond(render(request, store.update(info["namespace"], info["name"], body)))

    @routes.patch(item)
    async def patch(request: web.Request) -> web.Response:
        import jsonpatch

        info = request.match_info
        current = store.get(info["namespace"], info["name"])
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        try:
            raw = json.loads(await request.read())
        except ValueError as err:
            raise APIError(400, "BadRequest", str(err)) from None
        if content_type == "application/json-patch+json":
            try:
                patched = jsonpatch.apply_patch(current, raw)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
                raise APIError(422, "Invalid", str(err)) from None
        elif content_type in ("application/merge-patch+json",
                              "application/strategic-merge-patch+json"):
            patched = _merge_patch(current, raw)
        else:
            raise APIError(415, "UnsupportedMediaType",
                           f'the body of the request was in an unknown format - accepted '
                           f'media types include: application/json-patch+json, '
                           f'application/merge-patch+json, '
                           f'application/strategic-merge-patch+json; got "{content_type}"')
        if not isinstance(patched, dict):
            raise APIError(422, "Invalid", "the patch must leave an object")
        return respond(render(request, store.update(info["namespace"], info["name"], patched)))

    @routes.delete(item)
    async def delete(request: web.Request) -> web.Response:
        info = request.match_info
        return respond(render(request, store.delete(info["namespace"], info["name"])))

    # -- helpers for gateway tests --------------------------------------------------------

    @routes.get(item + "/echo")
    async def echo(request: web.Request) -> web.StreamResponse:
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "")
                   .split(",") if p.strip()]
        ws = web.WebSocketResponse(protocols=offered)
        if not ws.can_prepare(request).ok:
            raise APIError(400, "BadRequest", "echo needs a WebSocket upgrade")
        await ws.prepare(request)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await ws.send_str(message.data)
            elif message.type == WSMsgType.BINARY:
                await ws.send_bytes(message.data)
        return ws

    @routes.route("*", item + "/slow")
    async def slow(request: web.Request) -> web.Response:
        seconds = float(request.query.get("seconds", "2"))
        await asyncio.sleep(seconds)
        return respond({"slept": seconds})

    @routes.post(item + "/exec")
    async def exec_upgrade(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() != "spdy/3.1":
            raise APIError(400, "BadRequest", "exec needs an upgrade to SPDY/3.1")
        offered = request.headers.getall("X-Stream-Protocol-Version", [])
        response = web.StreamResponse(status=101, headers={
            "Connection": "Upgrade", "Upgrade": "SPDY/3.1",
            **({"X-Stream-Protocol-Version": offered[0]} if offered else {})})
        await response.prepare(request)
        transport = request.transport
        assert transport is not None
        done = asyncio.Event()
        request.protocol.set_parser(_Echo(transport, done))  # type: ignore[arg-type]
        await done.wait()
        return response

    @routes.route("*", item + "/redirect")
    async def redirect(request: web.Request) -> web.Response:
        code = int(request.query.get("code", "302"))
        location = request.query.get("to", "https://example.com/elsewhere")
        return web.Response(status=code, headers={"Location": location},
                            content_type="text/plain", text=f"redirecting to {location}\n")

    @routes.route("*", item + "/whoami")
    async def whoami(request: web.Request) -> web.Response:
        who = request["identity"]
        return respond({**who, "method": request.method, "path": request.path,
                        "query": request.query_string,
                        "headers": [[k, v] for k, v in request.headers.items()]},
                       headers={"Access-Control-Allow-Origin": "*",
                                "Access-Control-Allow-Credentials": "true",
                                "Access-Control-Allow-Methods": "GET",
                                "Access-Control-Allow-Headers": "Authorization",
                                "X-Backend": "wardle"})

    @routes.route("*", item + "/fail")
    async def fail(request: web.Request) -> web.Response:
        code = int(request.query.get("code", "500"))
        return respond(status_body(code, request.query.get("reason", "InternalError"),
                                   request.query.get("message", f"failing with {code}")), code)

    app = web.Application(middlewares=[front], client_max_size=256 << 20)
    app.add_routes(routes)
    app["started"] = started
    return app


class _Echo:
    """What an upgraded connection sends, written back as it came (in place of aiohttp's
    HTTP parser, as its WebSocket reader is)."""

    def __init__(self, transport: asyncio.Transport, done: asyncio.Event) -> None:
        self.transport, self.done = transport, done

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.transport.write(data)
        return False, b""

    def feed_eof(self) -> None:
        self.done.set()


def _rule(rules: dict[str, Any], method: str, path: str) -> Any:
    """The value for ``method`` and ``path``: a key of this method (``"<METHOD> <path>"``)
    before one of any method; an exact key, else the longest ``prefix*`` key that matches."""
    for candidate, prefix in ((f"{method} {path}", f"{method} "), (path, "")):
        if candidate in rules:
            return rules[candidate]
        matching = [k for k in rules if k.endswith("*") and k.startswith(prefix)
                    and " " not in k[len(prefix):] and candidate.startswith(k[:-1])]
        if matching:
            return rules[max(matching, key=len)]
    return None


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def server_context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    """Serving with ``cert``; client certificates asked for and verified against ``client_ca``
    only (no system CAs)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    if client_ca is not None:
        ctx.load_verify_locations(cafile=str(client_ca))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def main(argv: list[str] | None = None) -> None:
    from aiohttp import web

    parser = argparse.ArgumentParser(prog="python -m tests.support.backend",
                                     description="a test extension apiserver (wardle)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bind-address", default="127.0.0.1")
    parser.add_argument("--tls-cert-file", type=Path, required=True)
    parser.add_argument("--tls-private-key-file", type=Path, required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--requestheader-client-ca-file", type=Path)
    source.add_argument("--authentication-kubeconfig", type=Path,
                        help="read kube-system/extension-apiserver-authentication at start")
    parser.add_argument("--requestheader-allowed-names", action="append")
    parser.add_argument("--requests-log", type=Path)
    args = parser.parse_args(argv)

    if args.authentication_kubeconfig is not None:
        out = (args.requests_log.parent if args.requests_log else Path.cwd())
        auth = fetch_auth_config(args.authentication_kubeconfig, out)
        if args.requestheader_allowed_names:
            auth.allowed_names = args.requestheader_allowed_names
    else:
        auth = AuthConfig(args.requestheader_client_ca_file,
                          args.requestheader_allowed_names or ["front-proxy-client"],
                          ["X-Remote-User"], ["X-Remote-Group"], ["X-Remote-Extra-"], [])
    context = server_context(args.tls_cert_file, args.tls_private_key_file, auth.ca_file)
    print(f"serving on {args.bind_address}:{args.port}; request-header CA {auth.ca_file}, "
          f"allowed names {auth.allowed_names}", flush=True)
    web.run_app(build_app(auth, args.requests_log), host=args.bind_address, port=args.port,
                ssl_context=context, print=None, reuse_address=True, shutdown_timeout=0.25,
                access_log=None,
                max_field_size=65536, max_line_size=65536)


def iter_watch_lines(stream: Any) -> Iterator[dict[str, Any]]:
    """Watch events from a file-like HTTP response, one JSON object a line."""
    for line in stream:
        if line.strip():
            yield json.loads(line)


if __name__ == "__main__":
    main()


def apiservice_available(gw: Any) -> bool:
    """Whether ``gw`` reports the backend's APIService Available=True."""
    code, body = gw.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/"
                                   f"{APISERVICE_NAME}")
    conditions = json.loads(body).get("status", {}).get("conditions", []) if code == 200 else []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)
