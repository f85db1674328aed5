"""A minimal HTTP/1.1 client over one TLS keep-alive connection, for benchmarks.

General clients spend more time per request than the gateway does; this one only writes the
request bytes and reads the status, headers and body, so the figures are the gateway's.
"""

from __future__ import annotations

import asyncio
import ssl


class RawConnection:
    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        self.host, self.port, self.context = host, port, context
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> RawConnection:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.context, server_hostname="localhost",
            limit=2**24)
        return self

    async def request(self, method: str, path: str, body: bytes = b"",
                      content_type: str = "application/json") -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}"
                f"\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        code = int(status_line.split(b" ", 2)[1])
        length, chunked = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if not chunked:
            return code, await self.reader.readexactly(length)
        parts = []
        while True:
            size = int((await self.reader.readline()).strip(), 16)
            data = await self.reader.readexactly(size + 2)
            if size == 0:
                return code, b"".join(parts)
            parts.append(data[:-2])

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
