"""The etcd v3 store, selected by --etcd-servers (design §2).

It speaks etcd's gRPC API through aetcd's generated stubs on channels built here, because
aetcd's own client opens only insecure channels, ignores ``limit`` and ``revision`` in ranges,
does not resume a broken watch, and queues watch events without bound. So, as
k8s.io/apiserver's etcd3 store does:

- keys live under ``--etcd-prefix``; resourceVersion is etcd's mod_revision;
- create is a transaction comparing mod_revision == 0; update and delete are compare-and-swap
  loops whose failure branch returns the current value, so a retry costs no extra round trip;
- lists use the Range RPC with ``limit`` and ``revision``, so every page of a paged list reads
  the same revision;
- a watch is one gRPC stream with prev_kv; after a stream error it resumes from the last
  delivered revision + 1, and a full buffer pushes back on the stream instead of growing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import grpc
import structlog
from aetcd import rpc

from gateway.storage import cas, codec, continuetoken
from gateway.storage.errors import (
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    StorageError,
    StorageInternalError,
    StorageUnavailableError,
    TooOldResourceVersionError,
)
from gateway.storage.interface import (
    EventType,
    ListResult,
    Object,
    Preconditions,
    Predicate,
    UpdateFunc,
    WatchEvent,
    prefix_end,
)
from gateway.storage.watchstream import QueueWatch

log = structlog.get_logger(__name__)

_EQUAL = rpc.Compare.CompareResult.Value("EQUAL")
_MOD = rpc.Compare.CompareTarget.Value("MOD")
_VERSION = rpc.Compare.CompareTarget.Value("VERSION")
#: The key replicas agree on compaction through, as kube-apiservers do (outside any prefix).
COMPACT_REV_KEY = b"compact_rev_key"
_PUT = rpc.Event.EventType.Value("PUT")

#: Raise gRPC's 4 MB receive default: a list of many large objects is one message.
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 2**31 - 1),
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # reconnect quickly once etcd is back, instead of gRPC's default of up to 120 s
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]
_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.CANCELLED}
_LIST_PAGE_MAX = 10_000


@dataclass(frozen=True)
class EtcdConfig:
    servers: tuple[str, ...]
    prefix: str = "/registry"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    request_timeout: float = 10.0
    watch_buffer: int = 1024
    #: kube-apiserver's --etcd-compaction-interval; 0 leaves compaction to someone else.
    compaction_interval: float = 300.0


def _map_error(err: grpc.aio.AioRpcError, key: str = "") -> StorageError:
    """The storage error an etcd failure means."""
    details = err.details() or str(err.code())
    if "required revision has been compacted" in details:
        return TooOldResourceVersionError(0, 0)
    if "required revision is a future revision" in details:
        return FutureRevisionError(0, 0)
    if err.code() in _UNAVAILABLE:
        return StorageUnavailableError(f"etcd is unavailable: {details}", key=key)
    return StorageInternalError(f"etcd: {details}", key=key)


class _Endpoints:
    """One gRPC channel per etcd endpoint; requests fail over to the next on UNAVAILABLE."""

    def __init__(self, config: EtcdConfig) -> None:
        self.targets = [self._target(url) for url in config.servers]
        self.credentials = self._credentials(config)
        self.channels: list[grpc.aio.Channel | None] = [None] * len(self.targets)
        self.current = 0

    @staticmethod
    def _target(url: str) -> tuple[str, bool]:
        parsed = urlparse(url)
        host = parsed.hostname or "localhost"
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{parsed.port or 2379}", parsed.scheme == "https"

    @staticmethod
    def _credentials(config: EtcdConfig) -> grpc.ChannelCredentials | None:
        def read(path: str | None, what: str) -> bytes | None:
            if path is None:
                return None
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as err:
                raise StorageInternalError(f"cannot read the etcd {what} {path}: {err}") from None

        if not any(url.startswith("https://") for url in config.servers):
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=read(config.ca_file, "CA file"),
            private_key=read(config.key_file, "key file"),
            certificate_chain=read(config.cert_file, "certificate file"),
        )

    def channel(self, index: int) -> grpc.aio.Channel:
        channel = self.channels[index]
        if channel is None:
            target, secure = self.targets[index]
            if secure:
                assert self.credentials is not None
                channel = grpc.aio.secure_channel(target, self.credentials, _CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.insecure_channel(target, _CHANNEL_OPTIONS)
            self.channels[index] = channel
        return channel

    def failed(self, index: int) -> None:
        if index == self.current:
            self.current = (self.current + 1) % len(self.targets)

    async def close(self) -> None:
        for channel in self.channels:
            if channel is not None:
                await channel.close()
        self.channels = [None] * len(self.targets)


class EtcdStorage:
    """The Storage interface on etcd (see the module docstring)."""

    def __init__(self, config: EtcdConfig) -> None:
        self.config = config
        self.prefix = config.prefix.rstrip("/")
        self._endpoints: _Endpoints | None = None
        self._watches: set[_EtcdWatch] = set()
        self._compactor: asyncio.Task[None] | None = None

    # -- plumbing -------------------------------------------------------------------------

    def _full(self, key: str) -> bytes:
        return (self.prefix + key).encode()

    def _short(self, full: bytes) -> str:
        return full.decode()[len(self.prefix):]

    @property
    def endpoints(self) -> _Endpoints:
        if self._endpoints is None:
            raise StorageUnavailableError("the etcd store is not started")
        return self._endpoints

    async def _kv(self, method: str, request: Any, key: str = "",
                  timeout: float | None = None) -> Any:
        """One KV RPC, failing over across endpoints on UNAVAILABLE."""
        endpoints = self.endpoints
        last: grpc.aio.AioRpcError | None = None
        for _ in range(len(endpoints.targets)):
            index = endpoints.current
            stub = rpc.KVStub(endpoints.channel(index))
            try:
                return await getattr(stub, method)(
                    request, timeout=timeout or self.config.request_timeout
                )
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise _map_error(err, key) from None
                last = err
                endpoints.failed(index)
        assert last is not None
        raise _map_error(last, key) from None

    async def _current_kv(self, full: bytes, key: str) -> tuple[int, bytes] | None:
        resp = await self._kv("Range", rpc.RangeRequest(key=full), key)
        if not resp.kvs:
            return None
        return resp.kvs[0].mod_revision, resp.kvs[0].value

    async def _swap(self, full: bytes, key: str, expected: int,
                    op: rpc.RequestOp) -> tuple[bool, Any]:
        """Apply ``op`` if the key is still at ``expected``; else return its current kv."""
        request = rpc.TxnRequest(
            compare=[rpc.Compare(result=_EQUAL, target=_MOD, key=full, mod_revision=expected)],
            success=[op],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=full))],
        )
        resp = await self._kv("Txn", request, key)
        if resp.succeeded:
            return True, resp.header.revision
        kvs = resp.responses[0].response_range.kvs
        return False, (kvs[0].mod_revision, kvs[0].value) if kvs else None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._endpoints = _Endpoints(self.config)
        if self.config.compaction_interval > 0:
            self._compactor = asyncio.get_running_loop().create_task(self._compact_loop())

    async def close(self) -> None:
        if self._compactor is not None:
            self._compactor.cancel()
            await asyncio.gather(self._compactor, return_exceptions=True)
        for watch in list(self._watches):
            watch.close()
        self._watches.clear()
        if self._endpoints is not None:
            await self._endpoints.close()

    async def check_health(self) -> None:
        try:
            await self._kv("Range", rpc.RangeRequest(key=self._full("/health")), timeout=2.0)
        except StorageError as err:
            raise StorageUnavailableError(str(err)) from None

    # -- reads ----------------------------------------------------------------------------

    async def get(self, key: str) -> Object:
        current = await self._current_kv(self._full(key), key)
        if current is None:
            raise KeyNotFoundError(key)
        return codec.decode(current[1], current[0], key)

    async def current_revision(self) -> int:
        resp = await self._kv("Range", rpc.RangeRequest(key=self._full("/"), count_only=True))
        return resp.header.revision

    async def count(self, prefix: str) -> int:
        full = self._full(prefix)
        request = rpc.RangeRequest(key=full, range_end=prefix_end(full.decode()).encode(),
                                   count_only=True)
        return (await self._kv("Range", request)).count

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str = "",
        revision: int = 0,
        predicate: Predicate | None = None,
    ) -> ListResult:
        full_prefix = self.prefix + prefix
        start = full_prefix
        if continue_token:
            token = continuetoken.decode(continue_token)
            start, revision = full_prefix + token.start_key, token.revision
        end = prefix_end(full_prefix).encode()
        page = limit
        items: list[Object] = []
        more, last, count = False, "", 0
        while True:
            request = rpc.RangeRequest(key=start.encode(), range_end=end, limit=page,
                                       revision=revision)
            try:
                resp = await self._kv("Range", request)
            except TooOldResourceVersionError:
                raise TooOldResourceVersionError(revision, 0) from None
            except FutureRevisionError:
                raise FutureRevisionError(revision, await self.current_revision()) from None
            revision = revision or resp.header.revision
            count = count or resp.count
            taken, full = self._take(resp.kvs, items, limit, predicate)
            if taken:
                last = resp.kvs[taken - 1].key.decode()
            if full:
                more = taken < len(resp.kvs) or resp.more
                break
            if not (limit and resp.more):
                break
            start = last + "\x00"
            page = min(page * 2, _LIST_PAGE_MAX) if predicate else page
        result = ListResult(items=items, revision=revision)
        if more:
            result.continue_token = continuetoken.encode(revision, last[len(full_prefix):] + "\x00")
            if predicate is None:
                result.remaining = count - len(items)
        return result

    def _take(self, kvs: Any, items: list[Object], limit: int,
              predicate: Predicate | None) -> tuple[int, bool]:
        """Add matching kvs to ``items``; returns how many kvs were used and whether the page
        is full."""
        for index, kv in enumerate(kvs):
            obj = codec.decode(kv.value, kv.mod_revision, self._short(kv.key))
            if predicate is None or predicate(obj):
                items.append(obj)
                if limit and len(items) == limit:
                    return index + 1, True
        return len(kvs), False

    # -- writes ---------------------------------------------------------------------------

    async def create(self, key: str, obj: Object) -> Object:
        full, data = self._full(key), codec.encode(obj)
        put = rpc.RequestOp(request_put=rpc.PutRequest(key=full, value=data))
        done, revision = await self._swap(full, key, 0, put)
        if not done:
            raise KeyExistsError(key)
        return codec.decode(data, revision, key)

    async def guaranteed_update(
        self,
        key: str,
        update: UpdateFunc,
        *,
        preconditions: Preconditions | None = None,
        ignore_not_found: bool = False,
    ) -> Object:
        full = self._full(key)

        async def swap(expected: int, data: bytes | None, new_data: bytes) -> cas.Outcome:
            put = rpc.RequestOp(request_put=rpc.PutRequest(key=full, value=new_data))
            return await self._swap(full, key, expected, put)

        return await cas.guaranteed_update(
            key, await self._current_kv(full, key), update, swap,
            preconditions=preconditions, ignore_not_found=ignore_not_found,
        )

    async def delete(
        self,
        key: str,
        *,
        preconditions: Preconditions | None = None,
        validate: Callable[[Object], Awaitable[None]] | None = None,
    ) -> Object:
        full = self._full(key)

        async def swap(expected: int, data: bytes) -> cas.Outcome:
            delete = rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=full))
            return await self._swap(full, key, expected, delete)

        return await cas.guaranteed_delete(
            key, await self._current_kv(full, key), swap,
            preconditions=preconditions, validate=validate,
        )

    async def compact(self, revision: int) -> None:
        try:
            await self._kv("Compact", rpc.CompactionRequest(revision=revision))
        except TooOldResourceVersionError:
            return  # already compacted past it
        except FutureRevisionError:
            raise FutureRevisionError(revision, await self.current_revision()) from None
        log.info("etcd compacted", revision=revision)

    async def _compact_loop(self) -> None:
        """Every interval, compact to the revision seen one interval ago (kube's compactor)."""
        version, revision = 0, 0
        while True:
            await asyncio.sleep(self.config.compaction_interval)
            try:
                version, revision = await self.compact_step(version, revision)
            except StorageError as err:
                log.warning("etcd compaction failed", error=str(err))

    async def compact_step(self, version: int, revision: int) -> tuple[int, int]:
        """One round: whichever replica moves compact_rev_key from ``version`` compacts to
        ``revision``; everyone learns the key's new version and the current revision."""
        request = rpc.TxnRequest(
            compare=[rpc.Compare(result=_EQUAL, target=_VERSION, key=COMPACT_REV_KEY,
                                 version=version)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(
                key=COMPACT_REV_KEY, value=str(revision).encode()))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=COMPACT_REV_KEY))],
        )
        resp = await self._kv("Txn", request)
        current = resp.header.revision
        if not resp.succeeded:
            return resp.responses[0].response_range.kvs[0].version, current
        if revision:
            await self.compact(revision)
        return version + 1, current

    # -- watch ----------------------------------------------------------------------------

    async def watch(self, prefix: str, *, revision: int = 0) -> QueueWatch:
        watch = _EtcdWatch(self, prefix, revision)
        await watch.establish()
        self._watches.add(watch)
        watch.run()
        return watch.queue

    def _event(self, event: Any) -> WatchEvent:
        kv, prev = event.kv, event.prev_kv
        key = self._short(kv.key)
        previous = codec.decode(prev.value, prev.mod_revision, key) if prev.value else None
        if event.type == _PUT:
            created = kv.create_revision == kv.mod_revision
            return WatchEvent(
                type=EventType.ADDED if created else EventType.MODIFIED,
                key=key,
                object=codec.decode(kv.value, kv.mod_revision, key),
                revision=kv.mod_revision,
                prev_object=None if created else previous,
            )
        last = codec.decode(prev.value, kv.mod_revision, key) if prev.value else {
            "metadata": {"name": key.rsplit("/", 1)[-1],
                         "resourceVersion": str(kv.mod_revision)}}
        return WatchEvent(EventType.DELETED, key, last, kv.mod_revision, previous)


class _EtcdWatch:
    """One storage watch on one gRPC Watch stream, resumed after stream failures."""

    def __init__(self, store: EtcdStorage, prefix: str, revision: int) -> None:
        self.store = store
        self.full_prefix = store._full(prefix)
        self.next_revision = revision + 1 if revision else 0
        self.queue = QueueWatch(store.config.watch_buffer, on_stop=self.close,
                                on_progress=self.request_progress)
        self.call: Any = None
        self.task: asyncio.Task[None] | None = None

    def _create_request(self) -> rpc.WatchRequest:
        create = rpc.WatchCreateRequest(
            key=self.full_prefix,
            range_end=prefix_end(self.full_prefix.decode()).encode(),
            start_revision=self.next_revision,
            prev_kv=True,
            progress_notify=True,
        )
        return rpc.WatchRequest(create_request=create)

    async def _probe_compaction(self) -> None:
        """etcd reports a compacted start revision only after creating the watch; a range
        read at that revision tells at once, so watch() can raise TooOld itself."""
        if self.next_revision <= 0:
            return
        probe = rpc.RangeRequest(key=self.full_prefix, revision=self.next_revision,
                                 count_only=True)
        try:
            await self.store._kv("Range", probe)
        except TooOldResourceVersionError:
            raise TooOldResourceVersionError(self.next_revision - 1, 0) from None
        except FutureRevisionError:
            pass  # a watch may start ahead of the store: it waits

    async def establish(self) -> None:
        """Open the stream and wait until etcd created the watch (TooOld if compacted)."""
        await self._probe_compaction()
        endpoints = self.store.endpoints
        last: grpc.aio.AioRpcError | None = None
        for _ in range(len(endpoints.targets)):
            index = endpoints.current
            call = rpc.WatchStub(endpoints.channel(index)).Watch()
            try:
                await call.write(self._create_request())
                resp = await asyncio.wait_for(call.read(), self.store.config.request_timeout)
            except grpc.aio.AioRpcError as err:
                call.cancel()
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise _map_error(err) from None
                last = err
                endpoints.failed(index)
                continue
            except TimeoutError:
                call.cancel()
                raise StorageUnavailableError("etcd did not create the watch in time") from None
            if resp is grpc.aio.EOF or not resp.created:
                call.cancel()
                raise StorageUnavailableError("etcd closed the watch stream at its start")
            if resp.canceled or resp.compact_revision:
                call.cancel()
                raise TooOldResourceVersionError(
                    max(self.next_revision - 1, 0), resp.compact_revision
                )
            if self.next_revision == 0:  # "from now": resume after what etcd had then
                self.next_revision = resp.header.revision + 1
            self.call = call
            return
        assert last is not None
        raise _map_error(last) from None

    def run(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        delay = 0.1
        try:
            while not self.queue.done:
                try:
                    await self._read_stream()
                    delay = 0.1
                except (grpc.aio.AioRpcError, StorageUnavailableError) as err:
                    log.info("etcd watch interrupted; resuming", prefix=self.full_prefix.decode(),
                             from_revision=self.next_revision, error=str(err).splitlines()[0])
                if self.queue.done:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                with contextlib.suppress(StorageUnavailableError):
                    await self._reestablish()
        except TooOldResourceVersionError as err:
            self.queue.finish(err)
        except StorageError as err:
            self.queue.finish(err)
        finally:
            self._cancel_call()
            self.store._watches.discard(self)

    async def _reestablish(self) -> None:
        self._cancel_call()
        await self.establish()

    async def _read_stream(self) -> None:
        if self.call is None:
            raise StorageUnavailableError("no watch stream")
        while True:
            resp = await self.call.read()
            if resp is grpc.aio.EOF:
                raise StorageUnavailableError("etcd ended the watch stream")
            if resp.canceled:
                if resp.compact_revision:
                    raise TooOldResourceVersionError(self.next_revision - 1,
                                                     resp.compact_revision)
                raise StorageUnavailableError(f"etcd canceled the watch: {resp.cancel_reason}")
            if resp.events:
                for event in resp.events:
                    if not await self.queue.put(self.store._event(event)):
                        return
                    self.next_revision = event.kv.mod_revision + 1
            elif not resp.created:  # a progress notification: nothing before it is pending
                revision = resp.header.revision
                self.next_revision = max(self.next_revision, revision + 1)
                mark = WatchEvent(EventType.BOOKMARK, "", None, revision)
                if not await self.queue.put(mark):
                    return

    async def request_progress(self) -> None:
        if self.call is not None:
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError):
                await self.call.write(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))

    def _cancel_call(self) -> None:
        if self.call is not None:
            self.call.cancel()
            self.call = None

    def close(self) -> None:
        self.queue.finish()
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self._cancel_call()
