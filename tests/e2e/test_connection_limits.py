"""Hostile connections, as kube-apiserver's Go server meets them (issue 19, item 4).

kube serves with ``MaxHeaderBytes: 1 << 20``, ``ReadHeaderTimeout: 32s`` and
``IdleTimeout: 90s``, and its responses carry no ``Server`` header. Each check runs on both of
the gateway's paths: the proxy's fast lane (a connection's first request, for a remote
APIService: the test backend over mTLS) and aiohttp's server (a connection that first asked
for ``/version``, which hands it to aiohttp for good). Connections are raw TLS sockets, so
what the gateway writes (or does not) is seen byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.backend import (
    APISERVICE_NAME,
    GROUP_VERSION,
    BackendProcess,
    apiservice_available,
)
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

TOKENS = "alice-token,alice,uid-alice\nbob-token,bob,uid-bob\n"
POLICY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: limits-alice}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"""
FLUNDERS = f"/apis/{GROUP_VERSION}/namespaces/default/flunders"
COUNTER = re.compile(r"^aggregator_proxy_fast_lane_requests_total (\S+)$", re.M)
#: Go's answer to a head past MaxHeaderBytes, byte for byte.
TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
             b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
             b"431 Request Header Fields Too Large")
#: kube's ReadHeaderTimeout, and how late the gateway may be to apply it (its sweep is 1 s).
HEADER_TIMEOUT, LATE = 32.0, 8.0


#: Run the gateway with a soft limit of 1024 open files (many machines' default), keeping the
#: hard limit: the gateway must raise it, as Go does for kube-apiserver, to hold thousands of
#: connections.
LOW_FILE_LIMIT = ("import os, resource, sys; "
                  "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]; "
                  "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)); "
                  "os.execv(sys.argv[1], sys.argv[1:])")


class LowFileLimitGateway(GatewayProcess):
    @property
    def args(self) -> list[str]:
        return [sys.executable, "-c", LOW_FILE_LIMIT, *super().args]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("limits")
    (workdir / "tokens.csv").write_text(TOKENS)
    with LowFileLimitGateway(workdir, "--token-auth-file", str(workdir / "tokens.csv"),
                             "--enable-aggregator-routing") as proc:
        proc.kubectl("apply", "-f", "-", input=POLICY)
        backend = BackendProcess.for_gateway(tmp_path_factory.mktemp("wardle"), proc)
        with backend:
            proc.kubectl("apply", "-f", "-", input=backend.manifests_yaml("127.0.0.1"))
            eventually(lambda: apiservice_available(proc), timeout=60,
                       what=f"APIService {APISERVICE_NAME} Available")
            yield proc


def _lane_served(gw: GatewayProcess) -> float:
    code, body = gw.request("GET", "/metrics")
    assert code == 200
    match = COUNTER.search(body.decode())
    assert match
    return float(match.group(1))


# -- raw connections ---------------------------------------------------------------------------


def _connect(gw: GatewayProcess, timeout: float = 30) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", gw.port), timeout=timeout)
    return gw.ssl_context(None).wrap_socket(raw, server_hostname="127.0.0.1")


def _head(method: str, path: str, *lines: str) -> bytes:
    text = "".join(f"{line}\r\n" for line in ("Host: 127.0.0.1",
                                                "Authorization: Bearer alice-token", *lines))
    return f"{method} {path} HTTP/1.1\r\n{text}\r\n".encode()


def _read_response(sock: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length (what the gateway's own answers have)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split()[1]), headers, body[:length]


def _read_all(sock: ssl.SSLSocket) -> bytes:
    """What the gateway writes until it closes the connection."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, ssl.SSLError):
        pass
    return data


def _on_aiohttp(gw: GatewayProcess) -> ssl.SSLSocket:
    """A connection handed to aiohttp's server: its first request is not the lane's."""
    sock = _connect(gw)
    sock.sendall(_head("GET", "/version"))
    code, _, _ = _read_response(sock)
    assert code == 200
    return sock


# -- no Server header --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/version", "/api/v1/namespaces/nothing-here", FLUNDERS,
                                  f"{FLUNDERS}/nothing-here"])
def test_no_server_header_on_either_path(gw: GatewayProcess, path: str) -> None:
    """The gateway's own answers (the remote ones refused before the backend: bob may not)
    carry no Server header, as kube-apiserver's carry none."""
    for lane in (True, False):
        before = _lane_served(gw)
        sock = _connect(gw) if lane else _on_aiohttp(gw)
        with sock:
            sock.sendall(_head("GET", path).replace(b"alice-token", b"bob-token"))
            code, headers, body = _read_response(sock)
        assert code in (200, 403, 404), body
        assert "server" not in headers, (lane, path, headers)
        assert "date" in headers and "audit-id" in headers
        taken = lane and path.startswith("/apis/")
        assert _lane_served(gw) - before == (1 if taken else 0), (lane, path)


# -- oversized heads ---------------------------------------------------------------------------


def _oversized(gw: GatewayProcess, sock: ssl.SSLSocket, head: bytes) -> bytes:
    # the gateway may close before reading all of it, as Go does
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, ssl.SSLError):
        sock.sendall(head)
    return _read_all(sock)


@pytest.mark.parametrize("lane", [True, False], ids=["fast lane", "aiohttp"])
def test_a_head_past_one_mebibyte_is_431(gw: GatewayProcess, lane: bool) -> None:
    path = FLUNDERS if lane else "/api/v1/namespaces/default/configmaps"
    one_line = _head("GET", path, "X-Big: " + "a" * (1 << 20) + "b" * 4096)
    many = _head("GET", path, *(f"X-Many-{i}: {'a' * 1000}" for i in range(1100)))
    for head in (one_line, many):
        with (_connect(gw) if lane else _on_aiohttp(gw)) as sock:
            assert _oversized(gw, sock, head) == TOO_LARGE
    # still serving
    assert gw.request("GET", "/readyz")[0] == 200


@pytest.mark.parametrize("lane", [True, False], ids=["fast lane", "aiohttp"])
def test_a_large_head_within_the_limit_is_served(gw: GatewayProcess, lane: bool) -> None:
    """Go accepts a head up to MaxHeaderBytes: 100 KiB of headers (past the lane's own
    head size, and aiohttp's default line limit) are read and answered by the gateway (bob
    may not list flunders: the gateway's own 403, the backend not asked, whose own limits
    are its business)."""
    path = FLUNDERS if lane else "/api/v1/namespaces/default/configmaps"
    head = _head("GET", path, "X-Long: " + "a" * 100_000,
                 *(f"X-Many-{i}: {'a' * 100}" for i in range(200)))
    if lane:
        head = head.replace(b"alice-token", b"bob-token")
    with (_connect(gw) if lane else _on_aiohttp(gw)) as sock:
        sock.sendall(head)
        code, _, body = _read_response(sock)
    assert code == (403 if lane else 200), body[:300]
    assert json.loads(body)["kind"] == ("Status" if lane else "ConfigMapList")


# -- slow heads --------------------------------------------------------------------------------


def _trickle(sock: ssl.SSLSocket, head: bytes, outcome: dict[str, object]) -> None:
    """Send ``head`` one byte a second until the gateway closes the connection."""
    started = time.monotonic()
    sent = 0
    sock.settimeout(1.0)
    try:
        for byte in head:
            sock.sendall(bytes([byte]))
            sent += 1
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            outcome["answer"] = data  # b"": closed
            break
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError) as err:
        outcome["answer"] = f"{type(err).__name__}"
    outcome["seconds"] = time.monotonic() - started
    outcome["sent"] = sent


def test_a_head_sent_a_byte_a_second_is_cut_off(gw: GatewayProcess) -> None:
    """Both paths at once (each is a wait of half a minute): the connection is closed without
    an answer once the header timeout has passed since the head's first byte, long before
    the head is complete."""
    head = _head("GET", FLUNDERS, "X-Slow: " + "a" * 120)
    socks = {"fast lane": _connect(gw, timeout=60), "aiohttp": _on_aiohttp(gw)}
    outcomes: dict[str, dict[str, object]] = {name: {} for name in socks}
    threads = [threading.Thread(target=_trickle, args=(sock, head, outcomes[name]))
               for name, sock in socks.items()]
    for thread in threads:
        thread.start()
    # meanwhile the gateway serves others at once
    assert gw.request("GET", "/readyz")[0] == 200
    for thread in threads:
        thread.join(HEADER_TIMEOUT + LATE + 10)
    for name, sock in socks.items():
        sock.close()
        outcome = outcomes[name]
        assert outcome.get("answer") in (b"", "ConnectionResetError", "BrokenPipeError"), \
            (name, outcome)
        assert HEADER_TIMEOUT - 1 <= outcome["seconds"] <= HEADER_TIMEOUT + LATE, \
            (name, outcome)
        assert outcome["sent"] < len(head), (name, outcome)


# -- many idle connections ---------------------------------------------------------------------


async def _hold(gw: GatewayProcess, tls: int, plain: int) -> list[asyncio.StreamWriter]:
    """``tls`` connections through the TLS handshake and ``plain`` that never start it, all
    idle."""
    context = gw.ssl_context(None)
    writers: list[asyncio.StreamWriter] = []
    limit = asyncio.Semaphore(100)

    async def one(secure: bool) -> None:
        async with limit:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", gw.port, ssl=context if secure else None,
                server_hostname="127.0.0.1" if secure else None)
            writers.append(writer)

    failed = [err for err in await asyncio.gather(
        *(one(True) for _ in range(tls)), *(one(False) for _ in range(plain)),
        return_exceptions=True) if err is not None]
    assert not failed, f"{len(failed)} idle connections refused, e.g. {failed[0]!r}"
    return writers


def test_thousands_of_idle_connections_do_not_starve_others(gw: GatewayProcess) -> None:
    tls, plain = 2000, 1000
    loop = asyncio.new_event_loop()
    writers: list[asyncio.StreamWriter] = []
    try:
        writers = loop.run_until_complete(_hold(gw, tls, plain))
        assert len(writers) == tls + plain
        assert gw.proc is not None
        eventually(lambda: len(os.listdir(f"/proc/{gw.proc.pid}/fd")) > tls + plain,
                   what="the gateway holding every connection")
        # others are served as usual, on both paths, by kubectl and by plain HTTPS
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(
                lambda i: gw.request("GET", FLUNDERS if i % 2 else "/api/v1/namespaces")[0],
                range(40)))
        assert answers == [200] * 40
        assert "default" in gw.kubectl("get", "namespaces").stdout
        assert time.monotonic() - started < 20, "served while the idle connections wait"
        with _connect(gw) as sock:
            sock.sendall(_head("GET", FLUNDERS))
            assert _read_response(sock)[0] == 200
    finally:
        for writer in writers:
            writer.close()
        loop.close()
