"""Faults of an extension apiserver behind the gateway, under a steady mixed load (issue 19,
item 3): one gateway on the embedded store with the test backend (tests/support/backend.py)
registered by an APIService, the mixed load of tests/support/load.py on the gateway's own
resources, and callers of the backend through both of the proxy's paths.

The proxy has two paths (gateway/aggregator/fastlane.py): the fast lane takes a bodiless GET
that is a connection's first request; aiohttp's server takes the rest (here: a connection
that asked for /version first, and every POST). A GET goes to the backend by the lean relay
(gateway/transport/relay.py) on either; a POST and a watch by aiohttp's client.

- A backend that accepts connections and never answers (its process SIGSTOPped: the kernel
  still accepts TCP connections, nothing answers, not even TLS). What kube-apiserver 1.32
  does: the aggregator's proxy has no deadline of its own but discovery's; a request ends at
  its own deadline (--request-timeout, 60 s, or less by ``?timeout=``) with the timeout
  filter's 504 Status (reason Timeout), and its backend connection is dropped with it; once
  the availability controller's discovery check fails (every 30 s, 5 s each), the APIService
  is unavailable and the proxy answers at once: a plain-text 503 ``service unavailable``. A
  request that needs a new connection gets ``503 error trying to reach service`` when the
  TLS handshake times out first (kube: 10 s; the gateway: 30 s with the TCP connect, see
  docs/api.md), which only a deadline past that meets (the long form's 60 s).
  Checked: every proxied answer is one of those, none later than its deadline (plus a
  margin for a busy machine), on every path; the gateway's connections to the backend do not
  pile up with the requests (counted from /proc); the gateway's own API is not affected;
  once the backend answers again, so does the proxy.
- A backend killed mid-watch: the client's watch, streamed through the gateway, ends cleanly
  (the terminating chunk of its chunked body: a clean end, not a hang, not a cut
  connection) with every event it got whole; once the backend is back, watches work again.
  kube's proxy (Go's ReverseProxy) would abort the client's stream there; the gateway ends a
  watch cut between two events as a watch ends (gateway/aggregator/watchframes.py). Watches
  take aiohttp's path only (the lane declines them).

``CI``: --request-timeout=5s, a 15 s hang; ``GATEWAY_RELIABILITY_LONG=1``: kube's 60 s and a
100 s hang, long enough for the APIService to turn unavailable and back.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.backend import GROUP_VERSION, GV_PATH, BackendProcess
from tests.support.gateway import GatewayProcess
from tests.support.load import Load, Mix, Replica, Report
from tests.support.reliability import long_form, record
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

#: Load before the fault, the hang's length, load after the backend is back.
BEFORE, HANG, AFTER = (30.0, 100.0, 30.0) if long_form() else (4.0, 15.0, 4.0)
#: --request-timeout: kube's default in the long form; short in CI, so a hang shows in time.
REQUEST_TIMEOUT = 60.0 if long_form() else 5.0
#: What most callers ask for with ?timeout= (kubectl --request-timeout sends it), so that
#: many requests meet the hung backend within the hang.
CLIENT_TIMEOUT = 0.5
#: How late past its deadline an answer may come: generous, the machine is shared.
MARGIN = 3.0
#: Until the backend answers through the gateway again after the fault (the availability
#: controller's back-off is at most 30 s, its check 5 s).
RECOVERY = 90.0
LANE_COUNTER = re.compile(r"^aggregator_proxy_fast_lane_requests_total (\S+)$", re.M)
TIMEOUT_MESSAGE = ("Timeout: request did not complete within requested timeout - context "
                   "deadline exceeded")


@dataclass
class Aggregated:
    gateway: GatewayProcess
    backend: BackendProcess


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aggregated]:
    gateway = GatewayProcess(tmp_path_factory.mktemp("gateway"), "--enable-aggregator-routing",
                             f"--request-timeout={REQUEST_TIMEOUT:g}s").start()
    backend = BackendProcess.for_gateway(tmp_path_factory.mktemp("backend"), gateway)
    try:
        backend.start()
        gateway.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
        yield Aggregated(gateway, backend)
    finally:
        resume(backend)
        backend.stop()
        gateway.stop()


@pytest.fixture
def served(aggregated: Aggregated) -> Aggregated:
    """The backend running and answering through both of the proxy's paths."""
    backend = aggregated.backend
    resume(backend)
    if not backend.alive():
        backend.start()
    for lane in (True, False):
        eventually(lambda lane=lane: call(aggregated.gateway, lane, "GET", GV_PATH).status == 200,
                   timeout=RECOVERY, interval=0.5, what=f"{GV_PATH} (lane={lane})")
    return aggregated


@pytest.fixture
def namespace(served: Aggregated) -> str:
    name = f"b-{uuid.uuid4().hex[:8]}"
    code, body = served.gateway.request("POST", "/api/v1/namespaces",
                                        {"metadata": {"name": name}})
    assert code == 201, body
    return name


def resume(backend: BackendProcess) -> None:
    if backend.alive():
        assert backend.proc is not None
        os.kill(backend.proc.pid, signal.SIGCONT)


def mix() -> Mix:
    """The gateway's own load, beside the proxied callers."""
    return Mix(writers=2, writer_rate=10, updaters=1, updater_rate=5, listers=1,
               lister_rate=2, kubectl_every=3, watchers=2)


def describe_load(m: Mix, callers: str) -> str:
    return (f"{m.writers} writers ({m.writer_rate:g}/s each, python client), {m.updaters} "
            f"updater and {m.listers} lister (raw HTTPS), {m.watchers} watchers, kubectl "
            f"every {m.kubectl_every:g} s on the gateway's own ConfigMaps; {callers}")


# -- calls through the proxy ----------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    caller: str
    start: float
    end: float
    status: int | None  # None: no answer (the connection failed or timed out)
    body: bytes

    @property
    def took(self) -> float:
        return self.end - self.start

    def kind(self) -> str:
        """What the answer is, in a word: ok, timeout (504 Status), unavailable (503 text: the
        APIService is), unreachable (503 text: no connection could be made in time)."""
        if self.status is not None and 200 <= self.status < 300:
            return "ok"
        if self.status == 504:
            body = json.loads(self.body)
            if (body.get("kind"), body.get("reason"), body.get("message")) == (
                    "Status", "Timeout", TIMEOUT_MESSAGE):
                return "timeout"
        if self.status == 503 and self.body == b"service unavailable\n":
            return "unavailable"
        if self.status == 503 and self.body.startswith(b"error trying to reach service: "):
            return "unreachable"
        return f"{self.status} {self.body[:120]!r}"


def call(gateway: GatewayProcess, lane: bool, method: str, target: str,
         body: Any = None, caller: str = "") -> Answer:
    """One request on a fresh connection: the lane's when ``lane`` (a bodiless GET as the
    connection's first request), else aiohttp's (the connection asks for /version first)."""
    conn = http.client.HTTPSConnection(gateway.host, gateway.port,
                                       context=gateway.ssl_context(), timeout=180)
    began = time.monotonic()
    try:
        if not lane:
            conn.request("GET", "/version")
            first = conn.getresponse()
            first.read()
        began = time.monotonic()
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, target, body=data, headers={
            "Accept": "application/json", "Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        return Answer(caller, began, time.monotonic(), response.status, raw)
    except (OSError, http.client.HTTPException) as err:
        return Answer(caller, began, time.monotonic(), None, str(err).encode())
    finally:
        conn.close()


@dataclass
class Caller:
    """One client of the backend through the gateway, calling again as soon as answered."""

    name: str
    lane: bool
    method: str
    deadline: float  # what the request's deadline is: ?timeout= or --request-timeout
    timeout_param: bool
    answers: list[Answer] = field(default_factory=list)

    def target(self, namespace: str) -> str:
        path = f"{GV_PATH}/namespaces/{namespace}/flunders"
        return f"{path}?timeout={self.deadline:g}s" if self.timeout_param else path

    def run(self, gateway: GatewayProcess, namespace: str, stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            body = None
            if self.method == "POST":
                body = {"apiVersion": GROUP_VERSION, "kind": "Flunder",
                        "metadata": {"name": f"{self.name}-{n}"}}
                n += 1
            self.answers.append(call(gateway, self.lane, self.method, self.target(namespace),
                                     body, self.name))
            stop.wait(0.05)


def callers() -> list[Caller]:
    """Both paths, both clients of the backend (relay and aiohttp), both deadlines."""
    short = CLIENT_TIMEOUT
    return [Caller("lane-get", True, "GET", short, True),
            Caller("aiohttp-get", False, "GET", short, True),
            Caller("aiohttp-post", False, "POST", short, True),
            Caller("lane-get-default", True, "GET", REQUEST_TIMEOUT, False),
            Caller("aiohttp-post-default", False, "POST", REQUEST_TIMEOUT, False)]


class Calling:
    """The callers, each in a thread of its own."""

    def __init__(self, gateway: GatewayProcess, namespace: str) -> None:
        self.callers = callers()
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=c.run, args=(gateway, namespace,
                                                             self.stop_event), daemon=True)
                        for c in self.callers]

    def start(self) -> Calling:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(REQUEST_TIMEOUT + 60)
        assert not any(t.is_alive() for t in self.threads), "a caller never got an answer"

    def answers(self, since: float = 0.0, until: float = float("inf")) -> list[Answer]:
        return [a for c in self.callers for a in list(c.answers) if since <= a.start < until]


# -- the gateway's connections to the backend -----------------------------------------------


def connections_to(pid: int, port: int) -> int:
    """The TCP connections process ``pid`` holds open, or is opening, to ``port`` on
    loopback: ESTABLISHED or SYN_SENT sockets among its descriptors (/proc)."""
    inodes = set()
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] in ("01", "02") and fields[9] in inodes:
                count += 1
    return count


class Sampler:
    """The gateway's connections to the backend, counted every quarter second."""

    def __init__(self, pid: int, port: int) -> None:
        self.pid, self.port = pid, port
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), connections_to(self.pid, self.port)))
            self._stop.wait(0.25)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def most(self, since: float = 0.0, until: float = float("inf")) -> int:
        return max((n for t, n in self.samples if since <= t < until), default=0)


def lane_served(gateway: GatewayProcess) -> float:
    code, body = gateway.request("GET", "/metrics")
    match = LANE_COUNTER.search(body.decode())
    assert code == 200 and match, body[:300]
    return float(match.group(1))


def finish(load: Load, gateway: GatewayProcess) -> Report:
    load.stop()
    report = load.verify()
    assert not load.failures, load.failures
    return report


# -- the tests --------------------------------------------------------------------------------


def test_a_backend_that_never_answers(served: Aggregated, namespace: str) -> None:
    gateway, backend = served.gateway, served.backend
    assert gateway.proc is not None and backend.proc is not None
    m = mix()
    load = Load([Replica.of(gateway)], namespace, m, name="hang").start()
    lane_before = lane_served(gateway)
    sampler = Sampler(gateway.proc.pid, backend.port).start()
    calling = Calling(gateway, namespace).start()
    try:
        time.sleep(BEFORE)
        stopped_at = time.monotonic()
        os.kill(backend.proc.pid, signal.SIGSTOP)
        time.sleep(HANG)
        resumed_at = time.monotonic()
        os.kill(backend.proc.pid, signal.SIGCONT)
        # the proxy answers again on every path once the backend does
        eventually(lambda: all(any(a.start >= resumed_at and a.kind() == "ok"
                                   for a in list(c.answers)) for c in calling.callers),
                   timeout=RECOVERY, interval=0.2, what="every caller answered again")
        recovered_after = time.monotonic() - resumed_at
        time.sleep(AFTER)
    finally:
        resume(backend)
        calling.stop()
        sampler.stop()
        report = finish(load, gateway)
    lane_taken = lane_served(gateway) - lane_before
    before = sampler.most(until=stopped_at)
    during = sampler.most(since=stopped_at, until=resumed_at)
    # the requests whose deadline fell within the hang (a later one may be answered)
    deadline = {c.name: c.deadline for c in calling.callers}
    hung = [a for a in calling.answers(since=stopped_at)
            if a.start + deadline[a.caller] < resumed_at]
    kinds = Counter((a.caller, a.kind()) for a in hung)
    late = [a for a in hung if a.took > deadline[a.caller] + MARGIN]
    waited = sum(1 for a in hung if a.kind() == "timeout")
    longest = max(a.took for a in hung)
    after = calling.answers(since=resumed_at + recovered_after + 1)
    s = report.summary()
    record(item="3", load=describe_load(m, "5 callers of the backend through the proxy "
                                           "(GET on the fast lane, GET and POST on aiohttp's "
                                           f"path; ?timeout={CLIENT_TIMEOUT:g}s or the "
                                           f"gateway's --request-timeout={REQUEST_TIMEOUT:g}s)"),
           fault=f"the backend SIGSTOPped for {HANG:g} s (accepts connections, never "
                 "answers), then SIGCONT",
           outcome=(f"{len(hung)} proxied requests during the hang: "
                    f"{sum(1 for a in hung if a.kind() == 'timeout')} ended at their deadline "
                    f"with a 504 Timeout Status, "
                    f"{sum(1 for a in hung if a.kind() == 'unavailable')} answered at once "
                    f"with 503 'service unavailable' (the APIService turned unavailable), "
                    f"{sum(1 for a in hung if a.kind() == 'unreachable')} with 503 'error "
                    f"trying to reach service' (no connection within 30 s); "
                    f"the longest took {longest:.1f} s; the gateway's connections to the "
                    f"backend: at most {during} during the hang ({before} before); proxy "
                    f"answering again {recovered_after:.1f} s after the backend; the "
                    f"gateway's own API: {s['errors']} failed requests of {s['operations']}, "
                    f"{s['lost_writes']} of {s['acked_writes']} acknowledged writes lost"),
           proxied_during_hang=len(hung), timeouts=waited, longest_proxied_s=round(longest, 2),
           backend_connections_before=before, backend_connections_during=during,
           recovered_after_s=round(recovered_after, 1), **s)
    # bounded: every answer is a deadline's 504, the unavailable APIService's 503 or (with a
    # deadline past the 30 s connect timeout) the unreachable backend's 503, in time
    assert set(k for _, k in kinds) <= {"timeout", "unavailable", "unreachable"}, kinds
    assert not late, late[:5]
    # each path met the hung backend (the APIService turns unavailable only once its
    # discovery check failed, 5 s at the least: several of the short deadlines before), and
    # the lane carried the lane's callers
    for caller in calling.callers:
        if caller.timeout_param:
            assert kinds[(caller.name, "timeout")] >= 2, (caller.name, kinds)
    # (a request met its deadline only where the APIService was available when it came, so
    # the lane took it; other answers may come from either side as availability flips)
    lane_answers = [a for a in calling.answers() if a.caller.startswith("lane")]
    assert sum(1 for a in lane_answers if a.kind() == "timeout") <= lane_taken <= \
        len(lane_answers), (lane_taken, Counter(a.kind() for a in lane_answers))
    # no pile-up: a request that met its deadline let go of its connection
    assert during <= before + len(calling.callers) + 5, (before, during, waited)
    # the rest of the API did not notice, and the proxy is back
    assert s["errors"] == 0, report.describe()
    report.assert_intact()
    # (a half-second deadline may still be missed now and then on a busy machine, as the
    # backend works through the connections the kernel queued for it while it was stopped)
    settled = Counter((a.caller, a.kind()) for a in after)
    for (caller, kind), _ in settled.items():
        assert kind == "ok" or (kind == "timeout" and deadline[caller] < 1), settled
    assert all(settled[(c.name, "ok")] for c in calling.callers), settled


def test_a_backend_killed_mid_watch(served: Aggregated, namespace: str) -> None:
    """(see the module's docstring)"""
    gateway, backend = served.gateway, served.backend
    m = mix()
    load = Load([Replica.of(gateway)], namespace, m, name="killed").start()
    path = f"{GV_PATH}/namespaces/{namespace}/flunders"
    created: list[tuple[float, str]] = []
    stop = threading.Event()

    def create() -> None:
        n = 0
        while not stop.is_set():
            answer = call(gateway, False, "POST", path, {
                "apiVersion": GROUP_VERSION, "kind": "Flunder",
                "metadata": {"name": f"f-{n}"}})
            if answer.status == 201:
                created.append((answer.end, f"f-{n}"))
                n += 1
            stop.wait(0.1)

    watches = [Watch(gateway, f"{path}?watch=1") for _ in range(3)]
    writer = threading.Thread(target=create, daemon=True)
    try:
        for watch in watches:
            watch.start()
        writer.start()
        time.sleep(BEFORE)
        killed_at = time.monotonic()
        backend.kill()
        for watch in watches:
            watch.thread.join(60)
        stop.set()
        writer.join(60)
        backend.start()
        back_at = time.monotonic()
        # a new watch through the gateway works again once the backend is back
        again = eventually(lambda: Watch(gateway, f"{path}?watch=1&timeoutSeconds=1").once(),
                           timeout=RECOVERY, interval=0.5, what="a watch through the gateway")
        watching_after = time.monotonic() - back_at
        time.sleep(AFTER)
    finally:
        stop.set()
        report = finish(load, gateway)
    ended = [w.ended - killed_at for w in watches if w.ended is not None]
    before_kill = {name for at, name in created if at < killed_at - 1.0}
    s = report.summary()
    record(item="3", load=describe_load(m, "a creator of the backend's objects (10/s, "
                                           "aiohttp's path) and 3 raw HTTPS watches of them "
                                           "through the gateway"),
           fault="the backend SIGKILLed while the watches stream, then started again",
           outcome=(f"{len([w for w in watches if w.end == 'clean'])} of {len(watches)} "
                    f"watches ended cleanly (terminating chunk) within "
                    f"{max(ended, default=float('nan')):.2f} s of the kill, "
                    f"{sum(len(w.events) for w in watches)} events received whole, none "
                    f"missing of the {len(before_kill)} creates acknowledged a second before "
                    f"it; a new watch answered {watching_after:.1f} s after the backend "
                    f"returned; the gateway's own API: {s['errors']} failed requests of "
                    f"{s['operations']}"),
           watches_ended_clean=[w.end for w in watches], ended_within_s=ended,
           rewatch_after_s=round(watching_after, 1), **s)
    for watch in watches:
        assert watch.end == "clean", (watch.end, watch.error)
        assert watch.ended is not None and watch.ended - killed_at < 10, watch.ended
        names = [e["object"]["metadata"]["name"] for e in watch.events]
        assert len(names) == len(set(names)), names
        assert before_kill <= set(names), sorted(before_kill - set(names))
    assert again
    assert s["errors"] == 0, report.describe()
    report.assert_intact()


class Watch:
    """A raw HTTPS watch through the gateway (aiohttp's path), read as events arrive; how it
    ended: "clean" (the chunked body's terminating chunk), "cut" (the connection ended without
    it, or a partial event), "hung" (nothing for 30 s after the kill)."""

    def __init__(self, gateway: GatewayProcess, target: str) -> None:
        self.gateway, self.target = gateway, target
        self.events: list[dict[str, Any]] = []
        self.end = ""
        self.error = ""
        self.ended: float | None = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def once(self) -> bool:
        """Whether a watch opens with 200 and ends cleanly."""
        self.run()
        return self.end == "clean"

    def run(self) -> None:
        conn = http.client.HTTPSConnection(self.gateway.host, self.gateway.port,
                                           context=self.gateway.ssl_context(), timeout=30)
        try:
            conn.request("GET", self.target, headers={"Accept": "application/json"})
            response = conn.getresponse()
            if response.status != 200:
                self.end, self.error = "refused", f"{response.status} {response.read()[:200]!r}"
                return
            pending = b""
            while data := response.read1(65536):
                pending += data
                *lines, pending = pending.split(b"\n")
                self.events += [json.loads(line) for line in lines if line.strip()]
            self.end = "cut" if pending.strip() else "clean"
        except TimeoutError as err:
            self.end, self.error = "hung", str(err)
        except (OSError, http.client.HTTPException, ValueError) as err:
            self.end, self.error = "cut", f"{type(err).__name__}: {err}"
        finally:
            self.ended = time.monotonic()
            conn.close()
