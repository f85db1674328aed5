"""A lean HTTP/1.1 keep-alive relay for the proxy's common case (a bodiless GET, HEAD, DELETE or
OPTIONS): the request head is written on a pooled asyncio TLS stream, the response head parsed
here, and the body read by its length (or chunk by chunk). It skips aiohttp's client machinery,
a quarter of the proxy's CPU per request.

Connections are pooled per (host, port, server name, TLS context): a reloaded client
certificate yields a new context, hence a new pool, and the old one drains as its connections
age out. Idle connections are reused last in, first out, closed after IDLE_TIMEOUT or when the
server closed them, at most MAX_IDLE kept per key.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator

import aiohttp

from gateway.transport import wire

#: An idle connection is closed after this long.
IDLE_TIMEOUT = 30.0
#: Idle connections kept at most per key.
MAX_IDLE = 64
#: Largest response head accepted.
MAX_HEAD = 64 * 1024
_READ = 64 * 1024
_SWEEP_INTERVAL = 5.0

Key = tuple[str, int, str, ssl.SSLContext]


class StaleConnection(Exception):
    """A reused connection ended before any byte of the response: the request may be sent
    again on a fresh one."""


class Connection:
    __slots__ = ("idle_since", "key", "reader", "reused", "writer")

    def __init__(self, key: Key, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.key = key
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0
        self.reused = False

    def usable(self) -> bool:
        """Open, at rest, nothing unread (asyncio's StreamReader state read directly)."""
        reader = self.reader
        return not (self.writer.is_closing() or reader.at_eof() or reader.exception() is not None
                    # unread bytes: asyncio has no public way to look without reading
                    or reader._buffer)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.writer.close()


class Pools:
    """Idle keep-alive connections, per key."""

    def __init__(self) -> None:
        self._idle: dict[Key, list[Connection]] = {}
        self._swept = time.monotonic()
        self.opened = 0  # connections made, for tests and curiosity

    async def acquire(self, key: Key, connect_timeout: float) -> Connection:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if now - conn.idle_since < IDLE_TIMEOUT and conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return await self.connect(key, connect_timeout)

    async def connect(self, key: Key, connect_timeout: float) -> Connection:
        host, port, server_name, context = key
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=context, server_hostname=server_name, limit=MAX_HEAD),
            connect_timeout)
        self.opened += 1
        return Connection(key, reader, writer)

    def release(self, conn: Connection) -> None:
        now = time.monotonic()
        if now - self._swept > _SWEEP_INTERVAL:
            self._sweep(now)
        if not conn.usable():
            conn.close()
            return
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= MAX_IDLE:
            conn.close()
            return
        conn.idle_since = now
        idle.append(conn)

    def _sweep(self, now: float) -> None:
        self._swept = now
        for key in list(self._idle):
            kept = []
            for conn in self._idle[key]:
                if now - conn.idle_since < IDLE_TIMEOUT and conn.usable():
                    kept.append(conn)
                else:
                    conn.close()
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]

    def idle_count(self) -> int:
        return sum(len(v) for v in self._idle.values())

    async def close(self) -> None:
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()


class Response:
    """A parsed response head on a connection; the body is read with ``read``/``iter``."""

    __slots__ = ("chunked", "conn", "done", "headers", "keep_alive", "length", "no_body",
                 "reason", "status")

    def __init__(self, conn: Connection, status: int, reason: str,
                 headers: list[tuple[str, str]], length: int | None, chunked: bool,
                 keep_alive: bool, no_body: bool) -> None:
        self.conn = conn
        self.status = status
        self.reason = reason
        self.headers = headers
        self.length = length
        self.chunked = chunked
        self.keep_alive = keep_alive
        self.no_body = no_body
        self.done = no_body

    async def read(self) -> bytes:
        """The whole body of a known length."""
        if self.done:
            return b""
        assert self.length is not None and not self.chunked
        body = await self.conn.reader.readexactly(self.length) if self.length else b""
        self.done = True
        return body

    async def iter(self) -> AsyncIterator[bytes]:
        """The body piece by piece (decoded when chunked)."""
        reader = self.conn.reader
        if self.done:
            return
        if self.chunked:
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                        pass
                    break
                while size:
                    data = await reader.read(min(size, _READ))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", size)
                    size -= len(data)
                    yield data
                if await reader.readexactly(2) != b"\r\n":
                    raise ValueError("malformed chunked body")
        elif self.length is not None:
            left = self.length
            while left:
                data = await reader.read(min(left, _READ))
                if not data:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(data)
                yield data
        else:
            self.keep_alive = False
            while data := await reader.read(_READ):
                yield data
        self.done = True


async def send(conn: Connection, head: bytes, method: str) -> Response:
    """Write a request head, read the response head (interim 1xx ones skipped). A reused
    connection that ends before a byte of the response raises StaleConnection; a fresh one
    aiohttp.ServerDisconnectedError (Go: EOF)."""
    reader = conn.reader
    conn.writer.write(head)
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as err:
            if conn.reused and not err.partial:
                raise StaleConnection() from err
            raise aiohttp.ServerDisconnectedError() from err
        except (ConnectionResetError, BrokenPipeError) as err:
            if conn.reused:
                raise StaleConnection() from err
            raise
        except asyncio.LimitOverrunError as err:
            raise ValueError("response head too large") from err
        response = _parse(conn, raw, method)
        if response is not None:
            return response


def _parse(conn: Connection, raw: bytes, method: str) -> Response | None:
    """The response head in ``raw`` (with its final blank line); None for an interim 1xx;
    ValueError when it is malformed (gateway/transport/wire.py)."""
    parsed = wire.parse_response_head(raw)
    if parsed is None:
        return None
    status, reason, headers, length, chunked, keep_alive = parsed
    no_body = method == "HEAD" or status in (204, 304) or status < 200
    return Response(conn, status, reason, headers, length, chunked, keep_alive, no_body)
