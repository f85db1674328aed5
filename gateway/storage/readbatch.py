"""Concurrent single-key reads sent to etcd together, as one transaction of ranges.

A Range RPC costs this process far more than it costs etcd (grpc.aio's machinery per call):
with many GETs in flight, the call itself was most of a GET's CPU. A read-only transaction
of ranges is one request that etcd answers at one revision through its linearizable read
path, so reads batched this way stay linearizable, on one condition kept here: a read goes
only into a batch sent after it was asked for. A read that arrives while a batch is in
flight waits for the next one, which leaves as soon as the one in flight returns.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable

#: A key's (mod_revision, value), or None when it does not exist.
Found = tuple[int, bytes] | None
#: Reads several keys in one request, in order.
ReadMany = Callable[[list[bytes]], Awaitable[list[Found]]]

#: etcd's default --max-txn-ops.
MAX_BATCH = 128


class ReadBatcher:
    """Gathers reads that arrive while one request is in flight into the next request."""

    def __init__(self, read_many: ReadMany, *, max_batch: int = MAX_BATCH) -> None:
        self.read_many = read_many
        self.max_batch = max_batch
        self._waiting: list[tuple[bytes, asyncio.Future[Found]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def get(self, key: bytes) -> Found:
        future: asyncio.Future[Found] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, future))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())
        return await future

    async def _send(self) -> None:
        """Send what waits, batch after batch, until nothing does."""
        try:
            while self._waiting:
                batch = self._waiting[:self.max_batch]
                del self._waiting[:self.max_batch]
                await self._send_one(batch)
        finally:
            self._sender = None

    async def _send_one(self, batch: list[tuple[bytes, asyncio.Future[Found]]]) -> None:
        try:
            found = await self.read_many([key for key, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                if not future.done():
                    future.cancel()
            raise
        except Exception as err:  # every reader gets the request's failure, its own copy
            for _, future in batch:
                if not future.done():
                    future.set_exception(copy.copy(err))
            return
        for (_, future), value in zip(batch, found, strict=True):
            if not future.done():  # its reader may have gone (a cancelled request)
                future.set_result(value)
