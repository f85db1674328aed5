"""A steady mixed load on gateway replicas, measured from the clients' side.

Real clients, each in a thread of its own, as a platform team's controllers and users would
run them against a Service in front of the replicas:

- writers create ConfigMaps with the official kubernetes Python client (its retries off, so
  every answer is the client's first);
- updaters read-modify-write a ConfigMap each over raw HTTPS (PUT with resourceVersion; a
  409 is a lost race, read again);
- listers page through the namespace over raw HTTPS, and ``kubectl get`` now and then;
- watchers list, then watch from that resourceVersion over raw HTTPS, resuming from the
  last resourceVersion they saw whenever a stream ends (on the next replica when theirs is
  gone), as client-go's reflector does;
- proxied callers GET a backend's resources through the gateway (when one is registered).

A client that cannot connect moves on to the next replica, as a Service stops sending to a
pod that fails its readiness probe; one that gets an answer (an error Status too) stays.

What is measured: every operation with its start, end and outcome; the longest time a client
went without a successful answer (its unavailability); every acknowledged write, verified
afterwards on every replica (a missing one is lost); writes that failed but were applied; and
each watcher's events against the acknowledged writes (missed, duplicated, out of order).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import random
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

#: A watch read waits this long for a line: longer than the server's timeoutSeconds, so a
#: stream that neither speaks nor ends is seen hanging (the test's deadlines catch it).
WATCH_READ_TIMEOUT = 150.0
#: Transport failures: the replica did not answer (a client then tries the next one).
TRANSPORT_ERRORS = (OSError, http.client.HTTPException, ssl.SSLError)


@dataclass(frozen=True)
class Replica:
    """How a client reaches one gateway: its URL, the CA it trusts, the admin's pair."""

    name: str
    host: str
    port: int
    ca: Path
    cert: Path
    key: Path
    kubeconfig: Path

    @classmethod
    def of(cls, gateway: Any, name: str | None = None) -> Replica:
        """A tests.support.gateway.GatewayProcess's address and development PKI."""
        certs = Path(gateway.cert_dir)
        return cls(name or f"{gateway.host}:{gateway.port}", gateway.host, gateway.port,
                   certs / "ca.crt", certs / "admin.crt", certs / "admin.key",
                   Path(gateway.kubeconfig))

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(self.cert), str(self.key))
        return ctx


@dataclass(frozen=True)
class Op:
    """One request as its client saw it."""

    client: str
    kind: str
    start: float
    end: float
    ok: bool
    status: int | None  # the HTTP status; None when no answer came
    error: str = ""


class Recorder:
    """Every operation of every client, in the order they ended."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def add(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)


class RawClient:
    """Raw HTTPS with keep-alive, pinned to one replica until it stops answering."""

    def __init__(self, replicas: Sequence[Replica], start: int = 0, timeout: float = 15.0,
                 *, failover: bool = True) -> None:
        self.replicas = list(replicas)
        self.index = start % len(self.replicas)
        self.timeout = timeout
        self.failover = failover
        self._contexts = {r.name: r.ssl_context() for r in self.replicas}
        self._conn: http.client.HTTPSConnection | None = None

    @property
    def replica(self) -> Replica:
        return self.replicas[self.index]

    def connection(self, timeout: float | None = None) -> http.client.HTTPSConnection:
        replica = self.replica
        return http.client.HTTPSConnection(replica.host, replica.port,
                                           context=self._contexts[replica.name],
                                           timeout=timeout or self.timeout)

    def moved_on(self) -> None:
        """The replica did not answer: drop the connection, try the next one next time."""
        self.close()
        if self.failover:
            self.index = (self.index + 1) % len(self.replicas)

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """(status, body); raises a TRANSPORT_ERROR (and moves on) when nothing came back."""
        data = None if body is None else json.dumps(body).encode()
        sent = {"Accept": "application/json", **(headers or {})}
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        try:
            if self._conn is None:
                self._conn = self.connection()
            self._conn.request(method, path, body=data, headers=sent)
            resp = self._conn.getresponse()
            raw = resp.read()
            if resp.will_close:
                self.close()
            return resp.status, raw
        except TRANSPORT_ERRORS:
            self.moved_on()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def kube_client(replica: Replica) -> kubernetes.client.CoreV1Api:
    """The official client for one replica, from its kubeconfig, with no retries of its own
    (every answer the test sees is the first one)."""
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(replica.kubeconfig),
                                       client_configuration=config)
    config.retries = False
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def _short(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    return text.splitlines()[0][:200] if text else type(err).__name__


@dataclass
class Mix:
    """How many clients of each kind, and how often each acts (operations per second)."""

    writers: int = 4
    writer_rate: float = 10.0
    updaters: int = 2
    updater_rate: float = 5.0
    listers: int = 1
    lister_rate: float = 2.0
    kubectl_every: float = 3.0  # seconds between kubectl reads; 0: none
    watchers: int = 4
    proxied: int = 0
    proxied_rate: float = 5.0
    proxied_path: str = ""  # e.g. /apis/wardle.example.com/v1alpha1/namespaces/x/flunders

    def scaled(self, factor: float) -> Mix:
        """The same mix at ``factor`` times the rates."""
        return Mix(**{**self.__dict__, "writer_rate": self.writer_rate * factor,
                      "updater_rate": self.updater_rate * factor,
                      "lister_rate": self.lister_rate * factor,
                      "proxied_rate": self.proxied_rate * factor})


@dataclass
class WatchLog:
    """What one watcher saw: events (type, name, resourceVersion) and how its streams ended."""

    name: str
    events: list[tuple[str, str, int]] = field(default_factory=list)
    streams: int = 0
    ends_clean: list[float] = field(default_factory=list)  # times of clean ends
    ends_broken: list[tuple[float, str]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)  # ERROR events, failed opens
    too_old: int = 0  # 410s: the watcher had to re-list (events may then be missed)
    last_rv: int = 0
    listed_rv: int = 0  # its first list's: what came before is in the list, not the watch


class Load:
    """Run a ``Mix`` of clients against ``replicas`` in namespace ``namespace`` (which must
    exist); ``start()``, then ``stop()``; ``report()`` after ``verify()``."""

    def __init__(self, replicas: Sequence[Replica], namespace: str, mix: Mix | None = None,
                 *, name: str = "load", request_timeout: float = 15.0) -> None:
        self.replicas = list(replicas)
        self.namespace = namespace
        self.mix = mix or Mix()
        self.name = name
        self.timeout = request_timeout
        self.recorder = Recorder()
        self.stopping = threading.Event()  # every client but the watchers stops
        self.watch_stop = threading.Event()  # then the watchers, once they caught up
        self.threads: list[threading.Thread] = []
        self.watch_threads: list[threading.Thread] = []
        self._open_watches: set[http.client.HTTPSConnection] = set()
        self._lock = threading.Lock()
        #: name -> resourceVersion of each acknowledged create
        self.created: dict[str, int] = {}
        #: names whose create failed but which exist (the write was applied all the same)
        self.applied_despite_error: set[str] = set()
        #: name -> [(n, resourceVersion)] of each acknowledged update
        self.updated: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.watches: list[WatchLog] = []
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.failures: list[str] = []  # a client thread that died: a bug of the test

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def cm_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/configmaps"

    def start(self) -> Load:
        self.started_at = time.monotonic()
        mix, n = self.mix, len(self.replicas)
        spawn = self._spawn
        for i in range(mix.watchers):
            log = WatchLog(f"watcher-{i}")
            self.watches.append(log)
            spawn(log.name, self._watcher, log, i % n)
        for i in range(mix.updaters):
            spawn(f"updater-{i}", self._updater, i, i % n)
        for i in range(mix.writers):
            spawn(f"writer-{i}", self._writer, i, i % n)
        for i in range(mix.listers):
            spawn(f"lister-{i}", self._lister, i, i % n)
        if mix.kubectl_every:
            spawn("kubectl", self._kubectl, 0)
        for i in range(mix.proxied):
            spawn(f"proxied-{i}", self._proxied, i, i % n)
        return self

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            try:
                target(name, *args)
            except Exception as err:  # a client that dies would hide a failure: say so
                self.failures.append(f"{name}: {_short(err)}")
                raise

        thread = threading.Thread(target=run, name=f"{self.name}-{name}", daemon=True)
        thread.start()
        (self.watch_threads if name.startswith("watcher") else self.threads).append(thread)

    def stop(self, timeout: float = 30, settle: float = 30) -> None:
        """Stop the clients; then give the watchers up to ``settle`` seconds to see the last
        acknowledged write (so that an event they miss is missed, not late), and stop them."""
        self.stopping.set()
        self.stopped_at = time.monotonic()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        with self._lock:
            last = max([*self.created.values(),
                        *(rv for acks in self.updated.values() for _, rv in acks)], default=0)
        caught_up = time.monotonic() + settle
        while time.monotonic() < caught_up and any(w.last_rv < last for w in self.watches):
            time.sleep(0.1)
        self.watch_stop.set()
        with self._lock:
            for conn in self._open_watches:
                with contextlib.suppress(OSError, AttributeError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
        for thread in self.watch_threads:
            thread.join(max(0.1, deadline + settle - time.monotonic()))
        alive = [t.name for t in self.threads + self.watch_threads if t.is_alive()]
        assert not alive, f"load clients did not stop: {alive}"

    def __enter__(self) -> Load:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self.watch_stop.is_set():
            self.stop()

    def _pace(self, rate: float, began: float, ok: bool) -> None:
        """Sleep until the next operation is due (a failure waits at least 0.1 s, as a
        client's back-off, so a fast error does not become a busy loop)."""
        wait = 1.0 / rate - (time.monotonic() - began)
        self.stopping.wait(max(wait, 0.0 if ok else 0.1))

    def _record(self, client: str, kind: str, start: float, ok: bool, status: int | None,
                error: str = "") -> None:
        self.recorder.add(Op(client, kind, start, time.monotonic(), ok, status, error))

    # -- clients --------------------------------------------------------------------------

    def _writer(self, name: str, index: int, replica: int) -> None:
        clients = [kube_client(r) for r in self.replicas]
        at, seq, retrying = replica, 0, False
        while not self.stopping.is_set():
            began = time.monotonic()
            obj = f"{self.name}-w{index}-{seq:06d}"
            body = {"metadata": {"name": obj, "labels": {"load": self.name}},
                    "data": {"writer": str(index), "seq": str(seq)}}
            status, ok, error = None, False, ""
            try:
                made = clients[at].create_namespaced_config_map(
                    self.namespace, body, _request_timeout=(3, self.timeout))
                status, ok = 201, True
                with self._lock:
                    self.created[obj] = int(made.metadata.resource_version)
            except kubernetes.client.ApiException as err:
                status, error = err.status, (err.reason or "")
                if err.status == 409 and retrying:  # our failed attempt had been applied
                    with self._lock:
                        self.applied_despite_error.add(obj)
                    ok, error = True, "AlreadyExists after a failed attempt"
                elif err.status == 0:  # no answer (urllib3 error wrapped by the client)
                    at = (at + 1) % len(clients)
            except Exception as err:  # urllib3's connection errors: no answer
                error = _short(err)
                at = (at + 1) % len(clients)
            self._record(name, "create", began, ok, status, error)
            if ok:
                seq, retrying = seq + 1, False
            else:
                retrying = True  # the same name again: an applied write is then a 409
            self._pace(self.mix.writer_rate, began, ok)

    def _updater(self, name: str, index: int, replica: int) -> None:
        client = RawClient(self.replicas, replica, self.timeout)
        obj = f"{self.name}-u{index}"
        path = f"{self.cm_path}/{obj}"
        current: dict[str, Any] | None = None
        n = 0
        while not self.stopping.is_set():
            began = time.monotonic()
            status, ok, error, kind = None, False, "", "update"
            try:
                if current is None:
                    kind = "get"
                    status, raw = client.request("GET", path)
                    if status == 404:
                        kind = "create"
                        status, raw = client.request("POST", self.cm_path, {
                            "metadata": {"name": obj, "labels": {"load": self.name}},
                            "data": {"n": "0"}})
                    if status in (200, 201):
                        current = json.loads(raw)
                        n = int(current["data"]["n"])
                        ok = True
                    elif status != 409:
                        error = raw[:200].decode(errors="replace")
                    else:
                        ok = True  # made by our own earlier attempt: read it next time
                else:
                    body = {**current, "data": {"n": str(n + 1)}}
                    status, raw = client.request("PUT", path, body)
                    if status == 200:
                        current = json.loads(raw)
                        n += 1
                        with self._lock:
                            self.updated[obj].append(
                                (n, int(current["metadata"]["resourceVersion"])))
                        ok = True
                    else:
                        current = None  # a conflict or an error: read it again
                        ok = status == 409  # a lost race is an answer, not unavailability
                        error = raw[:200].decode(errors="replace")
            except TRANSPORT_ERRORS as err:
                error, current = _short(err), None
            self._record(name, kind, began, ok, status, error)
            self._pace(self.mix.updater_rate, began, ok)

    def _lister(self, name: str, index: int, replica: int) -> None:
        client = RawClient(self.replicas, replica, self.timeout)
        turn = 0
        while not self.stopping.is_set():
            began = time.monotonic()
            # every third list is served from the watch cache (resourceVersion=0)
            query = "limit=100" if turn % 3 else "resourceVersion=0"
            turn += 1
            status, ok, error = None, False, ""
            try:
                status, raw = client.request("GET", f"{self.cm_path}?{query}")
                ok = status == 200
                if not ok:
                    error = raw[:200].decode(errors="replace")
            except TRANSPORT_ERRORS as err:
                error = _short(err)
            self._record(name, "list", began, ok, status, error)
            self._pace(self.mix.lister_rate, began, ok)

    def _kubectl(self, name: str, replica: int) -> None:
        at = replica
        while not self.stopping.is_set():
            began = time.monotonic()
            target = self.replicas[at]
            result = subprocess.run(
                ["kubectl", f"--kubeconfig={target.kubeconfig}", "--request-timeout=10s",
                 "get", "configmaps", "-n", self.namespace, "-l", f"load={self.name}",
                 "-o", "name"],
                capture_output=True, text=True, timeout=60,
                env={**os.environ, "KUBECACHEDIR": str(target.kubeconfig.parent / "kubecache")})
            ok = result.returncode == 0
            if not ok and ("refused" in result.stderr or "EOF" in result.stderr):
                at = (at + 1) % len(self.replicas)
            self._record(name, "kubectl get", began, ok, None if not ok else 200,
                         result.stderr.strip()[:200])
            self.stopping.wait(max(0.0, self.mix.kubectl_every - (time.monotonic() - began)))

    def _proxied(self, name: str, index: int, replica: int) -> None:
        client = RawClient(self.replicas, replica, self.timeout)
        while not self.stopping.is_set():
            began = time.monotonic()
            status, ok, error = None, False, ""
            try:
                status, raw = client.request("GET", self.mix.proxied_path)
                ok = status == 200
                if not ok:
                    error = raw[:200].decode(errors="replace")
            except TRANSPORT_ERRORS as err:
                error = _short(err)
            self._record(name, "proxied get", began, ok, status, error)
            self._pace(self.mix.proxied_rate, began, ok)

    def _watcher(self, name: str, log: WatchLog, replica: int) -> None:
        """List, then watch from the list's resourceVersion; on any end, watch again from
        the last resourceVersion seen (a 410 means re-list: counted, never expected)."""
        client = RawClient(self.replicas, replica, self.timeout)
        while not self.watch_stop.is_set() and not log.last_rv:
            began = time.monotonic()
            try:
                status, raw = client.request("GET", f"{self.cm_path}?labelSelector=load%3D"
                                             f"{self.name}")
            except TRANSPORT_ERRORS as err:
                self._record(name, "watch list", began, False, None, _short(err))
                self.watch_stop.wait(0.1)
                continue
            self._record(name, "watch list", began, status == 200, status)
            if status == 200:
                log.last_rv = log.listed_rv = int(
                    json.loads(raw)["metadata"]["resourceVersion"])
            else:
                self.watch_stop.wait(0.1)
        while not self.watch_stop.is_set():
            self._watch_once(name, log, client)
        client.close()

    def _watch_once(self, name: str, log: WatchLog, client: RawClient) -> None:
        began = time.monotonic()
        # no read times out before the server's own timeoutSeconds: a stream that hangs
        # (says nothing and does not end) shows as one; stop() shuts the socket to end it
        conn = client.connection(timeout=WATCH_READ_TIMEOUT)
        with self._lock:
            self._open_watches.add(conn)
        try:
            self._stream(name, log, client, conn, began)
        finally:
            with self._lock:
                self._open_watches.discard(conn)
            conn.close()
        if log.last_rv == 0:  # after a 410: list again
            self._watcher_relist(name, log, client)

    def _stream(self, name: str, log: WatchLog, client: RawClient,
                conn: http.client.HTTPSConnection, began: float) -> None:
        path = f"{self.cm_path}?{urllib.parse.urlencode(self._watch_query(log))}"
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
        except TRANSPORT_ERRORS as err:
            if self.watch_stop.is_set():
                return
            client.moved_on()
            self._record(name, "watch", began, False, None, _short(err))
            log.errors.append((time.monotonic(), _short(err)))
            self.watch_stop.wait(0.1)
            return
        if resp.status != 200:
            raw = resp.read()
            self._record(name, "watch", began, False, resp.status, raw[:200].decode())
            log.errors.append((time.monotonic(), raw[:200].decode(errors="replace")))
            if resp.status == 410:
                log.too_old += 1
                log.last_rv = 0  # re-list, as a reflector does
            self.watch_stop.wait(0.1)
            return
        self._record(name, "watch", began, True, 200)
        log.streams += 1
        try:
            for event in _events(resp):
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    log.errors.append((time.monotonic(), obj.get("message", "")))
                    if obj.get("code") == 410:
                        log.too_old += 1
                        log.last_rv = 0
                    continue
                rv = int(obj["metadata"]["resourceVersion"])
                if kind != "BOOKMARK":
                    log.events.append((kind, obj["metadata"]["name"], rv))
                log.last_rv = max(log.last_rv, rv)
            log.ends_clean.append(time.monotonic())
        except TRANSPORT_ERRORS as err:
            if not self.watch_stop.is_set():
                log.ends_broken.append((time.monotonic(), _short(err)))
                client.moved_on()

    def _watch_query(self, log: WatchLog) -> dict[str, str]:
        return {"watch": "true", "resourceVersion": str(log.last_rv),
                "allowWatchBookmarks": "true", "labelSelector": f"load={self.name}",
                "timeoutSeconds": str(random.randint(60, 120))}

    def _watcher_relist(self, name: str, log: WatchLog, client: RawClient) -> None:
        while not self.watch_stop.is_set() and not log.last_rv:
            try:
                status, raw = client.request("GET", f"{self.cm_path}?labelSelector=load%3D"
                                             f"{self.name}")
            except TRANSPORT_ERRORS:
                self.watch_stop.wait(0.1)
                continue
            if status == 200:
                log.last_rv = int(json.loads(raw)["metadata"]["resourceVersion"])

    # -- verification ---------------------------------------------------------------------

    def stored(self, replica: Replica) -> dict[str, dict[str, Any]]:
        """Every object of this load in the namespace, read from ``replica`` (a consistent
        list, from the store, page by page)."""
        client = RawClient([replica], timeout=30, failover=False)
        found: dict[str, dict[str, Any]] = {}
        token = ""
        while True:
            query = {"labelSelector": f"load={self.name}", "limit": "500"}
            if token:
                query["continue"] = token
            status, raw = client.request("GET", f"{self.cm_path}?{urllib.parse.urlencode(query)}")
            assert status == 200, (replica.name, status, raw[:300])
            page = json.loads(raw)
            for item in page["items"]:
                found[item["metadata"]["name"]] = item
            token = page["metadata"].get("continue", "")
            if not token:
                client.close()
                return found

    def verify(self, replicas: Sequence[Replica] | None = None) -> Report:
        """Check every acknowledged write on every replica, then the watchers' events (the
        load must be stopped). The report says what was lost, duplicated or missed."""
        assert self.watch_stop.is_set(), "stop() the load first"
        replicas = list(replicas or self.replicas)
        lost: dict[str, list[str]] = {}
        found_by: dict[str, dict[str, dict[str, Any]]] = {}
        for replica in replicas:
            found = found_by[replica.name] = self.stored(replica)
            missing = [n for n in self.created if n not in found]
            for obj, acked in self.updated.items():
                value = int(found.get(obj, {}).get("data", {}).get("n", -1))
                if value < acked[-1][0]:
                    missing.append(f"{obj} n={acked[-1][0]} (stored: {value})")
            lost[replica.name] = missing
        # objects the writers' data says were made twice (impossible with names, checked)
        seqs = Counter((o["data"].get("writer"), o["data"].get("seq"))
                       for o in next(iter(found_by.values())).values() if "writer" in o["data"])
        duplicated_objects = sum(c - 1 for c in seqs.values() if c > 1)
        report = Report(self, lost, duplicated_objects)
        report.check_watches()
        return report


def _events(resp: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    """The events of a watch response until its clean end (the terminating chunk); a broken
    stream raises (http.client's readline would end quietly on a chunked body cut short, so
    a cut stream would pass for a clean end: read1 raises IncompleteRead instead)."""
    pending = b""
    while data := resp.read1(65536):
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield json.loads(line)
    if pending.strip():  # the last event without its newline: the stream was cut
        raise http.client.IncompleteRead(pending)


@dataclass
class WatchCheck:
    missed: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    events: int = 0
    resumes: int = 0
    too_old: int = 0


class Report:
    """The numbers of one load run: per kind, unavailability, lost, duplicated, watches."""

    def __init__(self, load: Load, lost: dict[str, list[str]], duplicated_objects: int) -> None:
        self.load = load
        self.lost = lost
        self.duplicated_objects = duplicated_objects
        self.watch = WatchCheck()
        self.ops = load.recorder.snapshot()

    # -- watches --------------------------------------------------------------------------

    def check_watches(self) -> None:
        """Every acknowledged write after a watcher's first list, seen by it exactly once, in
        order (Load.stop() let them catch up first)."""
        acked = {(name, rv) for name, rv in self.load.created.items()}
        acked |= {(name, rv) for name, acks in self.load.updated.items() for _, rv in acks}
        check = self.watch
        for log in self.load.watches:
            expected = {(name, rv) for name, rv in acked if rv > log.listed_rv}
            seen = [(name, rv) for kind, name, rv in log.events if kind in ("ADDED", "MODIFIED")]
            counts = Counter(seen)
            check.duplicated += sum(c - 1 for c in counts.values() if c > 1)
            check.missed += len(expected - set(counts))
            rvs = [rv for _, _, rv in log.events]
            check.out_of_order += sum(1 for a, b in itertools.pairwise(rvs) if b <= a)
            check.events += len(log.events)
            check.resumes += max(0, log.streams - 1)
            check.too_old += log.too_old

    # -- numbers --------------------------------------------------------------------------

    @property
    def acked_writes(self) -> int:
        return len(self.load.created) + sum(len(a) for a in self.load.updated.values())

    @property
    def lost_writes(self) -> int:
        return max((len(m) for m in self.lost.values()), default=0)

    @property
    def duplicates(self) -> int:
        return self.duplicated_objects + self.watch.duplicated

    def unavailability(self, kinds: Sequence[str] | None = None,
                       since: float = 0.0) -> tuple[float, str]:
        """The longest time one client waited for a successful answer: from the start of
        the first operation after its previous success (a failed one, or a slow one) to the
        end of the next success, or to the end of the run when none came; (seconds, client).
        With no fault it is the slowest request."""
        longest, who = 0.0, ""
        by_client: dict[str, list[Op]] = defaultdict(list)
        for op in self.ops:
            if (kinds is None or op.kind in kinds) and op.start >= since:
                by_client[op.client].append(op)
        end_of_run = self.load.stopped_at
        for client, ops in by_client.items():
            waiting_since: float | None = None
            for op in sorted(ops, key=lambda o: o.start):
                if waiting_since is None:
                    waiting_since = op.start
                if op.ok:
                    if op.end - waiting_since > longest:
                        longest, who = op.end - waiting_since, client
                    waiting_since = None
            if waiting_since is not None and end_of_run - waiting_since > longest:
                longest, who = end_of_run - waiting_since, f"{client} (never recovered)"
        return longest, who

    def errors(self, since: float = 0.0, until: float = float("inf")) -> list[Op]:
        return [op for op in self.ops if not op.ok and since <= op.start <= until]

    def by_kind(self) -> dict[str, dict[str, float]]:
        """Per kind of operation: count, errors, p50 and p99 latency (seconds)."""
        out: dict[str, dict[str, float]] = {}
        groups: dict[str, list[Op]] = defaultdict(list)
        for op in self.ops:
            groups[op.kind].append(op)
        for kind, ops in sorted(groups.items()):
            latencies = sorted(op.end - op.start for op in ops if op.ok)
            out[kind] = {"count": len(ops), "errors": sum(1 for op in ops if not op.ok),
                         "p50": _quantile(latencies, 0.5), "p99": _quantile(latencies, 0.99),
                         "max": latencies[-1] if latencies else 0.0}
        return out

    def summary(self) -> dict[str, Any]:
        """The numbers a results table shows."""
        longest, who = self.unavailability()
        ops = self.by_kind()
        return {
            "duration_s": round(self.load.stopped_at - self.load.started_at, 1),
            "operations": sum(int(v["count"]) for v in ops.values()),
            "errors": sum(int(v["errors"]) for v in ops.values()),
            "longest_unavailability_s": round(longest, 2),
            "longest_unavailability_client": who,
            "acked_writes": self.acked_writes,
            "lost_writes": self.lost_writes,
            "applied_despite_error": len(self.load.applied_despite_error),
            "duplicates": self.duplicates,
            "watch_events": self.watch.events,
            "watch_missed": self.watch.missed,
            "watch_out_of_order": self.watch.out_of_order,
            "watch_resumes": self.watch.resumes,
            "watch_too_old": self.watch.too_old,
            "by_kind": {k: {"count": int(v["count"]), "errors": int(v["errors"]),
                            "p99_ms": round(v["p99"] * 1000, 1),
                            "max_ms": round(v["max"] * 1000, 1)} for k, v in ops.items()},
        }

    def assert_intact(self) -> None:
        """No acknowledged write lost on any replica, none duplicated, every watcher saw
        every acknowledged write once and in order, without having to re-list."""
        detail = self.describe()
        assert self.lost_writes == 0, detail
        assert self.duplicates == 0, detail
        assert self.watch.missed == 0, detail
        assert self.watch.out_of_order == 0, detail
        assert self.watch.too_old == 0, detail

    def describe(self) -> str:
        """For assertion messages: the summary and the first errors."""
        errors = [f"{op.client} {op.kind} {op.status} {op.error}" for op in
                  self.errors()[:15]]
        return json.dumps(self.summary(), indent=1) + "\nfirst errors:\n" + "\n".join(errors) + \
            "\nlost:\n" + json.dumps({k: v[:10] for k, v in self.lost.items()})


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


@contextlib.contextmanager
def running(load: Load) -> Iterator[Load]:
    """``with running(Load(...)) as load:`` starts the clients and always stops them."""
    load.start()
    try:
        yield load
    finally:
        if not load.watch_stop.is_set():
            load.stop()
