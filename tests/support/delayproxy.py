"""A TCP relay that delivers what the far side sends after a delay, in order: a slow network
between a gateway and etcd, for tests of what a lagging watch cache must not answer."""

from __future__ import annotations

import asyncio
import threading

from tests.support.gateway import free_port


class DelayProxy:
    """Listens on a free loopback port and relays to ``target_port``; bytes coming back from
    the target reach the client ``delay`` seconds after they arrive (order kept)."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.target_port = target_port
        self.delay = delay
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("delay proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._started.set()
        self._loop.run_forever()
        server.close()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        try:
            target_reader, target_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(self._pipe(client_reader, target_writer, 0.0),
                             self._pipe(target_reader, client_writer, self.delay),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    delay: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await reader.read(65536):
                if delay:
                    due = loop.time() + delay
                    loop.call_at(due, writer.write, data)  # in order: dues only grow
                else:
                    writer.write(data)
                    await writer.drain()
        finally:
            if delay:
                await asyncio.sleep(delay)
            writer.close()
