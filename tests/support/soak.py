"""A long mixed load at a share of measured capacity, with the gateway's memory and latency
watched over time (issue 19, item 5).

One asyncio client (aiohttp, keep-alive over TLS with the admin certificate) drives the whole
mix, so the load generator costs little next to the gateway it measures on a small machine:

- creates of ConfigMaps, each followed by the delete of the oldest one the run made once
  ``ring`` of them exist, so the data set stays the same size for hours (a soak that only
  created would measure a growing store, not a steady one);
- updates (PUT with the resourceVersion last read, as kube clients send them) of a fixed set
  of ConfigMaps, each updated by one request at a time: a 409 is an error here;
- lists of the namespace, from etcd (``limit=100``) and from the watch cache
  (``resourceVersion=0``) in turn;
- proxied GETs of a Flunder from the registered backend (tests/support/backend.py, over mTLS);
- ``watches`` watches of the namespace, each resuming from the last resourceVersion it saw
  when its stream ends (timeoutSeconds 60-120 s, as reflectors pick). They read whole chunks
  and look only at each chunk's last event, so 200 of them cost little.

``measure_capacity`` runs the mix closed-loop (a fixed number of requests in flight, the
watches open) and counts operations a second; ``run`` then sends the mix open-loop at a rate
(a share of that), every operation on its schedule, so latency is measured without the
coordinated omission of a closed loop. A scheduler that cannot start an operation because too
many are still in flight counts it as ``behind``.

What comes out (``SoakResult``): latencies per time window and kind, every error, the
gateway's resident memory sampled over the run (/proc/<pid>/status), and what the watches saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import math
import os
import random
import re
import ssl
import time
from array import array
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from gateway.storage.watchcache import Cacher
from tests.support.backend import GV_PATH
from tests.support.load import Replica

#: The mix: each kind's share of the operations (a create's paired delete not counted).
MIX = {"create": 0.2, "update": 0.3, "list": 0.15, "proxied": 0.35}
#: A resourceVersion in a watch event's line (the object's metadata, the first one there).
_RV = re.compile(rb'"resourceVersion":"(\d+)"')
#: The events the gateway's watch cache keeps (its window), as the gateway makes its caches.
WINDOW: int = inspect.signature(Cacher).parameters["window"].default
#: Requests that take longer than this are failures (the client gives up, as kubectl does).
REQUEST_TIMEOUT = 30.0


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (Linux), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used (Linux), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quantile(values: Any, q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class SoakResult:
    """What one run saw; times are seconds from the start of the run."""

    window: float
    started: float = 0.0
    duration: float = 0.0
    rate: float = 0.0
    #: (window index, kind) -> latencies (seconds) of the successful operations
    latencies: dict[tuple[int, str], array] = field(default_factory=lambda: defaultdict(
        lambda: array("d")))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_count: int = 0
    errors: list[str] = field(default_factory=list)  # the first ones, for messages
    behind: int = 0  # operations not started on time: too many still in flight
    rss: list[tuple[float, int]] = field(default_factory=list)  # (t, bytes)
    #: (t, the gateway's CPU seconds so far)
    gateway_cpu: list[tuple[float, float]] = field(default_factory=list)
    #: (t, the machine's 1-minute load average): another process's burst shows here
    machine_load: list[tuple[float, float]] = field(default_factory=list)
    watch_events: int = 0
    watch_streams: int = 0
    watch_errors: int = 0
    watch_early_ends: int = 0  # streams that ended well before their timeoutSeconds
    watch_behind: int = 0  # watches that had not seen the last write at the end
    last_write_rv: int = 0  # of the last acknowledged create or update
    gateway_cpu_s: float = 0.0  # CPU time the gateway used during the run
    client_cpu_s: float = 0.0  # and the load generator (this process)

    def ok(self, kind: str, start: float, latency: float) -> None:
        self.counts[kind] += 1
        self.latencies[(int((start - self.started) // self.window), kind)].append(latency)

    def error(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        self.error_count += 1
        if len(self.errors) < 50:
            self.errors.append(f"{time.monotonic() - self.started:.1f}s {kind}: {what}")

    # -- reading it -----------------------------------------------------------------------

    def p99(self, since: float, until: float) -> float:
        """The 99th percentile latency (seconds) of every operation that started in
        [since, until) (whole windows)."""
        first, last = int(since // self.window), math.ceil(until / self.window)
        values = itertools.chain.from_iterable(
            v for (w, _), v in self.latencies.items() if first <= w < last)
        return quantile(values, 0.99)

    def p99_by_kind(self, since: float, until: float) -> dict[str, float]:
        first, last = int(since // self.window), math.ceil(until / self.window)
        out: dict[str, list[float]] = defaultdict(list)
        for (w, kind), v in self.latencies.items():
            if first <= w < last:
                out[kind].extend(v)
        return {k: round(quantile(v, 0.99) * 1000, 1) for k, v in sorted(out.items())}

    def rss_at(self, t: float, span: float = 15.0) -> int:
        """The median resident size of the samples in [t - span/2, t + span/2] (the nearest
        sample when none is there): one sample is a moment, the median a level."""
        near = sorted(b for s, b in self.rss if abs(s - t) <= span / 2)
        if near:
            return near[len(near) // 2]
        return min(self.rss, key=lambda sample: abs(sample[0] - t))[1]

    def rss_end(self, span: float = 15.0) -> int:
        return self.rss_at(self.rss[-1][0] - span / 2, span)

    def load_during(self, since: float, until: float) -> float:
        """The machine's mean 1-minute load average over [since, until)."""
        values = [v for t, v in self.machine_load if since <= t < until]
        return round(sum(values) / len(values), 2) if values else 0.0

    def cpu_ms_per_operation(self, since: float, until: float) -> float:
        """The gateway's CPU time per operation over [since, until): unlike latency, it
        does not grow when other processes take the CPU, only when the gateway's work per
        operation does."""
        inside = [(t, c) for t, c in self.gateway_cpu if since <= t <= until]
        first, last = int(since // self.window), math.ceil(until / self.window)
        ops = sum(len(v) for (w, _), v in self.latencies.items() if first <= w < last)
        if len(inside) < 2 or not ops:
            return 0.0
        return round(1000 * (inside[-1][1] - inside[0][1]) / ops, 2)

    def rss_series(self, points: int = 24) -> list[tuple[int, float]]:
        """About ``points`` samples of (seconds, MiB) over the run, for the record."""
        step = max(1, len(self.rss) // points)
        return [(round(t), round(b / 2**20, 1)) for t, b in self.rss[::step]]

    def summary(self, warmup: float, window: float) -> dict[str, Any]:
        """The numbers a results table shows: p99 of the first and last ``window`` seconds
        after ``warmup``, memory from ``warmup`` to the end."""
        end = self.duration
        rss_warm, rss_last = self.rss_at(warmup), self.rss_end()
        return {
            "duration_s": round(self.duration, 1),
            "rate_per_s": round(self.rate, 1),
            "operations": sum(self.counts.values()),
            "by_kind": dict(self.counts),
            "errors": self.error_count,
            "behind": self.behind,
            "warmup_s": warmup,
            "p99_first_ms": round(self.p99(warmup, warmup + window) * 1000, 1),
            "p99_last_ms": round(self.p99(end - window, end) * 1000, 1),
            "cpu_ms_per_op_first": self.cpu_ms_per_operation(warmup, warmup + window),
            "cpu_ms_per_op_last": self.cpu_ms_per_operation(end - window, end),
            "machine_load_first": self.load_during(warmup, warmup + window),
            "machine_load_last": self.load_during(end - window, end),
            "p99_first_by_kind_ms": self.p99_by_kind(warmup, warmup + window),
            "p99_last_by_kind_ms": self.p99_by_kind(end - window, end),
            "rss_warm_mib": round(rss_warm / 2**20, 1),
            "rss_end_mib": round(rss_last / 2**20, 1),
            "rss_max_mib": round(max(b for _, b in self.rss) / 2**20, 1),
            "rss_growth_pct": round(100 * (rss_last - rss_warm) / rss_warm, 1),
            "rss_series_mib": self.rss_series(),
            "watch_events": self.watch_events,
            "watch_streams": self.watch_streams,
            "watch_errors": self.watch_errors,
            "watch_early_ends": self.watch_early_ends,
            "watch_behind": self.watch_behind,
            "gateway_cpu_pct": round(100 * self.gateway_cpu_s / self.duration, 1),
            "client_cpu_pct": round(100 * self.client_cpu_s / self.duration, 1),
        }


class Soak:
    """The mix against one gateway (``replica``, process ``pid``) in ``namespace`` (which
    must exist), with a Flunder named ``flunder`` there for the proxied calls."""

    def __init__(self, replica: Replica, pid: int, namespace: str, *, watches: int = 200,
                 ring: int = 300, updated: int = 50, max_in_flight: int = 64,
                 flunder: str = "soak") -> None:
        self.replica = replica
        self.pid = pid
        self.namespace = namespace
        self.watches = watches
        self.ring = ring
        self.updated = updated
        self.max_in_flight = max_in_flight
        self.flunder = flunder
        self.cm_path = f"/api/v1/namespaces/{namespace}/configmaps"
        self.proxied_path = f"{GV_PATH}/namespaces/{namespace}/flunders/{flunder}"
        self._made: list[str] = []  # ConfigMaps the creates made, oldest first
        self._seq = itertools.count()
        self._objects: dict[str, dict[str, Any]] = {}  # updated ones, as last read
        self._busy: set[str] = set()
        self._turn = itertools.count()
        self._stop = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self.prepare_s = 0.0  # how long prepare() took (most of it filling the window)

    # -- plumbing -------------------------------------------------------------------------

    def _ssl(self) -> ssl.SSLContext:
        return self.replica.ssl_context()

    def _url(self, path: str) -> str:
        return self.replica.url + path

    async def _request(self, result: SoakResult | None, kind: str, method: str, path: str,
                       body: Any = None, expect: tuple[int, ...] = (200,)) -> Any:
        """One request, timed into ``result`` (None: not counted); the decoded answer, or
        None when it failed (then counted as an error)."""
        assert self._session is not None
        began = time.monotonic()
        try:
            async with self._session.request(method, self._url(path), json=body) as resp:
                raw = await resp.read()
                if resp.status not in expect:
                    if result is not None:
                        result.error(kind, f"{method} {path} {resp.status} {raw[:200]!r}")
                    return None
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            if result is not None:
                result.error(kind, f"{method} {path} {type(err).__name__}: {err}"[:300])
            return None
        if result is not None:
            result.ok(kind, began, time.monotonic() - began)
        return json.loads(raw) if raw else {}

    # -- set-up ---------------------------------------------------------------------------

    async def prepare(self) -> None:
        """The watch cache's window filled, the objects the updates change, the ring full
        of created ones, the Flunder."""
        await self._fill_window()
        for i in range(self.updated):
            name = f"soak-u{i}"
            made = await self._request(None, "", "POST", self.cm_path, {
                "metadata": {"name": name}, "data": {"n": "0"}}, expect=(201,))
            assert made is not None, f"could not create {name}"
            self._objects[name] = made
        for _ in range(self.ring):
            assert await self._create(None), "could not fill the ring"
        made = await self._request(None, "", "POST",
                                   f"{GV_PATH}/namespaces/{self.namespace}/flunders",
                                   {"apiVersion": "wardle.example.com/v1alpha1",
                                    "kind": "Flunder", "metadata": {"name": self.flunder}},
                                   expect=(201, 409))
        assert made is not None, "could not create the Flunder"

    async def _fill_window(self, batch: int = 500, concurrency: int = 16) -> None:
        """``WINDOW`` events of this resource before the run: the watch cache keeps the latest
        10,000 events, so until that many were written its memory grows with every write,
        which a short run would take for a leak. Creates of ring-sized objects, then one
        DELETE of the collection per batch (half the events for one request): as in the run,
        one new object version for every two events."""
        semaphore = asyncio.Semaphore(concurrency)
        serial = itertools.count()

        async def create() -> None:
            async with semaphore:
                made = await self._request(None, "", "POST", self.cm_path, {
                    "metadata": {"name": f"soak-fill{next(serial):06d}",
                                 "labels": {"soak-fill": "yes"}},
                    "data": {"payload": "x" * 256}}, expect=(201,))
                assert made is not None, "could not fill the watch cache's window"

        for _ in range(WINDOW // (2 * batch)):
            await asyncio.gather(*(create() for _ in range(batch)))
            await self._delete_fill()
        for _ in range(10):  # a collection delete reads the cache: a late create stays
            listed = await self._request(None, "", "GET",
                                         f"{self.cm_path}?labelSelector=soak-fill%3Dyes")
            if listed is not None and not listed["items"]:
                return
            await self._delete_fill()
        raise AssertionError("objects of the window's filling were left")

    async def _delete_fill(self) -> None:
        done = await self._request(None, "", "DELETE",
                                   f"{self.cm_path}?labelSelector=soak-fill%3Dyes")
        assert done is not None, "could not delete the window's filling"

    # -- operations -----------------------------------------------------------------------

    async def _create(self, result: SoakResult | None) -> bool:
        name = f"soak-c{next(self._seq):08d}"
        made = await self._request(result, "create", "POST", self.cm_path, {
            "metadata": {"name": name, "labels": {"soak": "yes"}},
            "data": {"payload": "x" * 256, "seq": name}}, expect=(201,))
        if made is None:
            return False
        self._wrote(result, made)
        self._made.append(name)
        if len(self._made) > self.ring:
            old = self._made.pop(0)
            await self._request(result, "delete", "DELETE", f"{self.cm_path}/{old}")
        return True

    @staticmethod
    def _wrote(result: SoakResult | None, obj: dict[str, Any]) -> None:
        if result is not None:
            rv = int(obj["metadata"]["resourceVersion"])
            result.last_write_rv = max(result.last_write_rv, rv)

    async def _update(self, result: SoakResult | None) -> None:
        free = [n for n in self._objects if n not in self._busy]
        if not free:
            if result is not None:
                result.behind += 1
            return
        name = free[next(self._turn) % len(free)]
        self._busy.add(name)
        try:
            current = self._objects[name]
            body = {**current, "data": {"n": str(int(current["data"]["n"]) + 1)}}
            done = await self._request(result, "update", "PUT", f"{self.cm_path}/{name}", body)
            if done is None:  # read it again for the next one
                again = await self._request(None, "", "GET", f"{self.cm_path}/{name}")
                if again is not None:
                    self._objects[name] = again
            else:
                self._objects[name] = done
                self._wrote(result, done)
        finally:
            self._busy.discard(name)

    async def _list(self, result: SoakResult | None) -> None:
        query = "limit=100" if next(self._turn) % 2 else "resourceVersion=0"
        await self._request(result, "list", "GET", f"{self.cm_path}?{query}")

    async def _proxied(self, result: SoakResult | None) -> None:
        await self._request(result, "proxied", "GET", self.proxied_path)

    def _operation(self, kind: str) -> Callable[[SoakResult | None], Awaitable[Any]]:
        return {"create": self._create, "update": self._update, "list": self._list,
                "proxied": self._proxied}[kind]

    # -- watches --------------------------------------------------------------------------

    async def _watch(self, result: SoakResult, rv: int, ready: asyncio.Event,
                     latest: list[int]) -> None:
        """Watch from ``rv``; on each end, again from the last resourceVersion seen."""
        assert self._session is not None
        first = True
        while not self._stop.is_set():
            timeout = random.randint(60, 120)
            query = (f"watch=true&allowWatchBookmarks=true&resourceVersion={rv}"
                     f"&timeoutSeconds={timeout}")
            began = time.monotonic()
            try:
                async with self._session.get(self._url(f"{self.cm_path}?{query}"),
                                             timeout=aiohttp.ClientTimeout(
                                                 total=None, sock_read=timeout + 30)) as resp:
                    if first:
                        ready.set()
                        first = False
                    if resp.status != 200:
                        result.watch_errors += 1
                        result.error("watch", f"{resp.status} {(await resp.read())[:200]!r}")
                        await asyncio.sleep(0.5)
                        continue
                    result.watch_streams += 1
                    rest = b""
                    async for chunk in resp.content.iter_any():
                        data = rest + chunk
                        cut = data.rfind(b"\n")
                        if cut < 0:
                            rest = data
                            continue
                        lines, rest = data[:cut], data[cut + 1:]
                        result.watch_events += lines.count(b"\n") + 1
                        if b'"type":"ERROR"' in lines:
                            result.watch_errors += 1
                            result.error("watch", lines[-300:].decode(errors="replace"))
                        last = lines[lines.rfind(b"\n") + 1:]
                        found = _RV.search(last)
                        if found:
                            rv = int(found.group(1))
                            latest[0] = rv
                    if not self._stop.is_set() and time.monotonic() - began < timeout - 5:
                        result.watch_early_ends += 1
            except (TimeoutError, aiohttp.ClientError, OSError) as err:
                if not self._stop.is_set():
                    result.watch_errors += 1
                    result.error("watch", f"{type(err).__name__}: {err}"[:300])
                    await asyncio.sleep(0.5)
            finally:
                ready.set()

    @staticmethod
    async def _caught_up(result: SoakResult, watches: list[tuple[asyncio.Task, list[int]]],
                         timeout: float) -> None:
        """Until every watch has seen the last acknowledged write (or ``timeout``); how many
        had not goes into ``result.watch_behind``."""
        settle = time.monotonic() + timeout
        while time.monotonic() < settle and any(
                latest[0] < result.last_write_rv for _, latest in watches):
            await asyncio.sleep(0.05)
        result.watch_behind = sum(1 for _, latest in watches
                                  if latest[0] < result.last_write_rv)

    async def _open_watches(self, result: SoakResult) -> list[tuple[asyncio.Task, list[int]]]:
        listed = await self._request(None, "", "GET", f"{self.cm_path}?limit=1")
        assert listed is not None, "could not list"
        rv = int(listed["metadata"]["resourceVersion"])
        watches = []
        for _ in range(self.watches):
            ready, latest = asyncio.Event(), [rv]
            task = asyncio.ensure_future(self._watch(result, rv, ready, latest))
            watches.append((task, latest))
            await ready.wait()  # opened one by one: no thundering herd of handshakes
        return watches

    # -- the runs -------------------------------------------------------------------------

    def _kinds(self) -> list[str]:
        """A round of kinds in the mix's proportions (20 operations), shuffled."""
        kinds = [k for k, share in MIX.items() for _ in range(round(share * 20))]
        random.shuffle(kinds)
        return kinds

    async def _sample_rss(self, result: SoakResult, every: float) -> None:
        while not self._stop.is_set():
            now = time.monotonic() - result.started
            result.rss.append((now, rss_bytes(self.pid)))
            result.machine_load.append((now, os.getloadavg()[0]))
            result.gateway_cpu.append((now, cpu_seconds(self.pid)))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), every)

    async def _session_for(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(ssl=self._ssl(), limit=0, force_close=False)
        return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(
            total=REQUEST_TIMEOUT), headers={"Accept": "application/json"})

    async def measure_capacity(self, seconds: float, concurrency: int = 16) -> float:
        """Operations a second the mix gets through closed-loop, ``concurrency`` in flight,
        with the watches open (they cost the gateway a write's fan-out)."""
        self._session = await self._session_for()
        self._stop = asyncio.Event()
        result = SoakResult(window=seconds)
        result.started = time.monotonic()
        try:
            began = time.monotonic()
            await self.prepare()
            self.prepare_s = time.monotonic() - began
            watches = await self._open_watches(result)
            await asyncio.sleep(2)
            done = 0
            end = time.monotonic() + seconds

            async def worker() -> None:
                nonlocal done
                kinds = itertools.cycle(self._kinds())
                while time.monotonic() < end:
                    await self._operation(next(kinds))(result)
                    done += 1

            began = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            # the time counted ends when every watch has seen the last write: events the
            # gateway still had to fan out are work of the measured period
            await self._caught_up(result, watches, 30.0)
            capacity = done / (time.monotonic() - began)
            assert not result.error_count, result.errors
            assert not result.watch_behind, "watches did not catch up after the measure"
            self._stop.set()
            for task, _ in watches:
                task.cancel()
            await asyncio.gather(*(t for t, _ in watches), return_exceptions=True)
            return capacity
        finally:
            await self._session.close()

    async def run(self, rate: float, seconds: float, *, window: float = 10.0,
                  rss_every: float = 2.0) -> SoakResult:
        """The mix at ``rate`` operations a second for ``seconds``, open-loop."""
        self._session = await self._session_for()
        self._stop = asyncio.Event()
        result = SoakResult(window=window, rate=rate)
        result.started = time.monotonic()
        try:
            watches = await self._open_watches(result)
            result.started = time.monotonic()  # the clock starts with every watch open
            sampler = asyncio.ensure_future(self._sample_rss(result, rss_every))
            gateway_cpu, client_cpu = cpu_seconds(self.pid), time.process_time()
            in_flight: set[asyncio.Task] = set()
            kinds = itertools.cycle(self._kinds())
            interval = 1.0 / rate
            due = time.monotonic()
            end = due + seconds
            while (now := time.monotonic()) < end:
                while due <= now:
                    due += interval
                    if len(in_flight) >= self.max_in_flight:
                        result.behind += 1
                        continue
                    task = asyncio.ensure_future(self._operation(next(kinds))(result))
                    in_flight.add(task)
                    task.add_done_callback(in_flight.discard)
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            if in_flight:
                await asyncio.wait(in_flight, timeout=REQUEST_TIMEOUT + 5)
            result.duration = time.monotonic() - result.started
            # every watch must see the last acknowledged write before it stops
            await self._caught_up(result, watches, 30.0)
            result.gateway_cpu_s = cpu_seconds(self.pid) - gateway_cpu
            result.client_cpu_s = time.process_time() - client_cpu
            self._stop.set()
            for task, _ in watches:
                task.cancel()
            await asyncio.gather(*(t for t, _ in watches), sampler, return_exceptions=True)
            return result
        finally:
            await self._session.close()
