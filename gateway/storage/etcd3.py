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
import builtins
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
    BackendRefusedError,
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
from gateway.storage.readbatch import ReadBatcher
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
    # keep pinging an idle watch stream, so a vanished etcd host is noticed, not waited on
    ("grpc.http2.max_pings_without_data", 0),
    # reconnect quickly once etcd is back, instead of gRPC's default of up to 120 s
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    # this is also gRPC's connect timeout (default 20 s): a host that accepts and then says
    # nothing fails a connect in 2 s, so reads move on to the next endpoint
    ("grpc.min_reconnect_backoff_ms", 2_000),
]
#: clientv3.WithRequireLeader: a member cut off from its cluster ends the watch, so it moves on.
_REQUIRE_LEADER = (("hasleader", "true"),)
_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.CANCELLED}
#: gRPC's words for a request that never left this process (so retrying a write is safe).
_NOT_SENT = ("failed to connect", "connection refused", "dns resolution failed",
             "name resolution", "empty address list")
#: gRPC's words when a connection dropped under a call (code UNKNOWN): etcd went away.
_DROPPED = ("No status received", "Socket closed")
_READ_ONLY = {"Range"}
_LIST_PAGE_MAX = 10_000
_WATCH_RETRY_MIN, _WATCH_RETRY_MAX = 0.1, 5.0
#: How long a broken watch may fail to resume on every endpoint before it ends with
#: StorageUnavailableError (its consumer, the watch cache, then ends its own watchers and
#: watches on from its revision later). Longer than a leader election, which it outlives.
OUTAGE_GRACE = 3.0


def _unavailable(err: grpc.aio.AioRpcError) -> bool:
    """Whether etcd could not be reached (rather than refusing the request)."""
    return err.code() in _UNAVAILABLE or (
        err.code() == grpc.StatusCode.UNKNOWN and (err.details() or "") in _DROPPED)


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
    """The storage error an etcd failure means (etcd's gRPC errors name no revisions)."""
    details = err.details() or err.code().name
    if "required revision is a future revision" in details:
        return FutureRevisionError(0, 0)
    if "required revision has been compacted" in details or (
        err.code() == grpc.StatusCode.OUT_OF_RANGE
    ):
        return TooOldResourceVersionError(0, 0)
    if _unavailable(err):
        return StorageUnavailableError(f"etcd is unavailable: {details}", key=key)
    return BackendRefusedError(details, key=key)


def _retryable(method: str, err: grpc.aio.AioRpcError) -> bool:
    """Whether ``err`` lets the request go to the next endpoint: reads always may; a write
    only when it never reached etcd, or a retried create would report AlreadyExists."""
    if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
        return False  # a deadline spent, or a cancel: no time or reason left to try again
    details = (err.details() or "").lower()
    return method in _READ_ONLY or any(words in details for words in _NOT_SENT)


def _read_pem(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise StorageInternalError(f"cannot read the etcd {what} {path}: {err}") from None
    if b"-----BEGIN " not in data:
        raise StorageInternalError(f"the etcd {what} {path} holds no PEM data")
    return data


class _Endpoints:
    """One gRPC channel per etcd endpoint; requests fail over to the next on UNAVAILABLE."""

    def __init__(self, config: EtcdConfig) -> None:
        if not config.servers:
            raise StorageInternalError("no etcd servers given")
        self.targets = [self._target(url) for url in config.servers]
        self.credentials = self._credentials(config)
        self.channels: list[grpc.aio.Channel | None] = [None] * len(self.targets)
        #: One KV stub per channel: a stub is five callables made anew each time otherwise.
        self.kv_stubs: list[rpc.KVStub | None] = [None] * len(self.targets)
        self.current = 0

    @staticmethod
    def _target(url: str) -> tuple[str, bool]:
        parsed = urlparse(url)
        try:
            port = parsed.port or 2379
        except ValueError:
            port = 0
        if parsed.scheme not in ("http", "https") or not parsed.hostname or not port:
            raise StorageInternalError(
                f"etcd server {url!r} is not an http://host:port or https://host:port URL"
            )
        host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
        return f"{host}:{port}", parsed.scheme == "https"

    @staticmethod
    def _credentials(config: EtcdConfig) -> grpc.ChannelCredentials | None:
        """TLS credentials for https:// servers; the client pair is for client-cert auth."""
        if (config.cert_file is None) != (config.key_file is None):
            raise StorageInternalError("an etcd client certificate needs its key, and back")
        if not any(url.startswith("https://") for url in config.servers):
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=_read_pem(config.ca_file, "CA file"),
            private_key=_read_pem(config.key_file, "key file"),
            certificate_chain=_read_pem(config.cert_file, "certificate file"),
        )

    def channel(self, index: int) -> grpc.aio.Channel:
        """The endpoint's channel, made on first use (gRPC channels connect lazily)."""
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

    def kv(self, index: int) -> rpc.KVStub:
        stub = self.kv_stubs[index]
        if stub is None:
            stub = self.kv_stubs[index] = rpc.KVStub(self.channel(index))
        return stub

    def failed(self, index: int) -> None:
        """Move on from a failing endpoint (once, however many requests saw it fail)."""
        if index == self.current:
            self.current = (self.current + 1) % len(self.targets)

    async def close(self) -> None:
        for channel in self.channels:
            if channel is not None:
                await channel.close()
        self.channels = [None] * len(self.targets)
        self.kv_stubs = [None] * len(self.targets)


class EtcdStorage:
    """The Storage interface on etcd (see the module docstring)."""

    def __init__(self, config: EtcdConfig) -> None:
        self.config = config
        self.prefix = config.prefix.rstrip("/")
        self._endpoints: _Endpoints | None = None
        self._watches: set[_EtcdWatch] = set()
        self._compactor: asyncio.Task[None] | None = None
        self._reads = ReadBatcher(self._read_many)

    # -- plumbing -------------------------------------------------------------------------

    def _full(self, key: str) -> bytes:
        return (self.prefix + key).encode()

    def _short(self, full: bytes) -> str:
        return full.decode()[len(self.prefix):]

    @property
    def endpoints(self) -> _Endpoints:
        if self._endpoints is None:
            raise StorageUnavailableError("the etcd store is not open")
        return self._endpoints

    async def _kv(self, method: str, request: Any, key: str = "",
                  timeout: float | None = None) -> Any:
        """One KV RPC with the request timeout, failing over across endpoints."""
        endpoints = self.endpoints
        last: grpc.aio.AioRpcError | None = None
        for _ in range(len(endpoints.targets)):
            index = endpoints.current
            stub = endpoints.kv(index)
            try:
                return await getattr(stub, method)(
                    request, timeout=timeout or self.config.request_timeout
                )
            except grpc.aio.AioRpcError as err:
                last = err
                if not _unavailable(err):
                    break
                endpoints.failed(index)
                if not _retryable(method, err):
                    break
            except grpc.aio.UsageError:  # the channel was closed under the request
                raise StorageUnavailableError("the etcd store is closed", key=key) from None
        assert last is not None
        raise _map_error(last, key) from None

    async def _current_kv(self, full: bytes, key: str) -> tuple[int, bytes] | None:
        """The key's (mod_revision, value), read with the other reads in flight."""
        return await self._reads.get(full)

    async def _read_many(self, keys: list[bytes]) -> list[tuple[int, bytes] | None]:
        """Several keys in one request: a Range for one, a read-only Txn of Ranges for more
        (both answered at one revision, linearizably)."""
        if len(keys) == 1:
            responses = [await self._kv("Range", rpc.RangeRequest(key=keys[0]))]
        else:
            request = rpc.TxnRequest(success=[rpc.RequestOp(
                request_range=rpc.RangeRequest(key=key)) for key in keys])
            responses = [r.response_range for r in (await self._kv("Txn", request)).responses]
        return [(r.kvs[0].mod_revision, r.kvs[0].value) if r.kvs else None for r in responses]

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

    async def _revision_or_zero(self) -> int:
        """The current revision for an error message; 0 when etcd cannot say."""
        try:
            return await self.current_revision()
        except StorageError:
            return 0

    async def _compacted_revision(self) -> int:
        """etcd names its compaction point only to a watch that starts before it: open one
        from revision 1 on a key nobody writes (error paths only; 0 when it cannot say)."""
        try:
            call = rpc.WatchStub(self.endpoints.channel(self.endpoints.current)).Watch()
        except StorageError:
            return 0
        create = rpc.WatchCreateRequest(key=self._full("/\x00compaction-probe"), start_revision=1)
        try:
            async with asyncio.timeout(min(self.config.request_timeout, 2.0)):
                await call.write(rpc.WatchRequest(create_request=create))
                while (resp := await call.read()) is not grpc.aio.EOF:
                    if resp.compact_revision or resp.canceled:
                        return resp.compact_revision
        except (TimeoutError, grpc.aio.AioRpcError, grpc.aio.UsageError):
            pass
        finally:
            call.cancel()
        return 0

    async def _too_old(self, requested: int, compacted: int = 0) -> TooOldResourceVersionError:
        """A TooOld error with etcd's compaction point and current revision filled in."""
        compacted = compacted or await self._compacted_revision()
        return TooOldResourceVersionError(requested, compacted, await self._revision_or_zero())

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Check the configuration; no connection yet (channels connect on first use)."""
        self._endpoints = _Endpoints(self.config)
        if self.config.compaction_interval > 0:
            self._compactor = asyncio.get_running_loop().create_task(self._compact_loop())

    async def close(self) -> None:
        """End every watch (its consumer sees the end of the stream), then the channels."""
        if self._compactor is not None:
            self._compactor.cancel()
            await asyncio.gather(self._compactor, return_exceptions=True)
            self._compactor = None
        watches, self._watches = list(self._watches), set()
        for watch in watches:
            watch.close()
        await asyncio.gather(*(w.task for w in watches if w.task), return_exceptions=True)
        if self._endpoints is not None:
            endpoints, self._endpoints = self._endpoints, None
            await endpoints.close()

    async def check_health(self) -> None:
        """A linearizable read of one key: it answers only with a leader and a quorum."""
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
        """Range pages at one revision; with a predicate, fetch (doubling) pages until
        ``limit`` items match or the range ends, as kube's etcd3 store does."""
        full_prefix = self.prefix + prefix
        start = full_prefix
        if continue_token:
            token = continuetoken.decode(continue_token)
            start, revision = full_prefix + token.start_key, token.revision
        end = prefix_end(full_prefix).encode()
        page = limit
        items: list[Object] = []
        more, last, count = False, "", -1
        while True:
            resp = await self._range(start, end, page, revision)
            revision = revision or resp.header.revision
            count = resp.count if count < 0 else count
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

    async def _range(self, start: str, end: bytes, limit: int, revision: int) -> Any:
        """One Range of a list, with the revision named in TooOld and FutureRevision."""
        request = rpc.RangeRequest(key=start.encode(), range_end=end, limit=limit,
                                   revision=revision)
        try:
            return await self._kv("Range", request)
        except TooOldResourceVersionError:
            raise await self._too_old(revision) from None
        except FutureRevisionError:
            raise FutureRevisionError(revision, await self._revision_or_zero()) from None

    def _take(self, kvs: Any, items: builtins.list[Object], limit: int,
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
        cached: tuple[int, bytes] | None = None,
    ) -> Object:
        full = self._full(key)

        async def swap(expected: int, data: bytes | None, new_data: bytes) -> cas.Outcome:
            put = rpc.RequestOp(request_put=rpc.PutRequest(key=full, value=new_data))
            return await self._swap(full, key, expected, put)

        async def fetch() -> cas.Current:
            return await self._current_kv(full, key)

        if cached is None:  # no guess: read first
            return await cas.guaranteed_update(
                key, await fetch(), update, swap,
                preconditions=preconditions, ignore_not_found=ignore_not_found)
        return await cas.guaranteed_update(
            key, cached, update, swap, preconditions=preconditions,
            ignore_not_found=ignore_not_found, fetch=fetch)

    async def delete(
        self,
        key: str,
        *,
        preconditions: Preconditions | None = None,
        validate: Callable[[Object], Awaitable[None]] | None = None,
        cached: tuple[int, bytes] | None = None,
    ) -> Object:
        full = self._full(key)

        async def swap(expected: int, data: bytes) -> cas.Outcome:
            delete = rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=full))
            return await self._swap(full, key, expected, delete)

        async def fetch() -> cas.Current:
            return await self._current_kv(full, key)

        if cached is None:
            return await cas.guaranteed_delete(
                key, await fetch(), swap, preconditions=preconditions, validate=validate)
        return await cas.guaranteed_delete(
            key, cached, swap, preconditions=preconditions, validate=validate, fetch=fetch)

    async def compact(self, revision: int) -> None:
        """etcd's (logical) compaction of the whole store; already compacted is done."""
        try:
            await self._kv("Compact", rpc.CompactionRequest(revision=revision))
        except TooOldResourceVersionError:
            return  # already compacted past it
        except FutureRevisionError:
            raise FutureRevisionError(revision, await self._revision_or_zero()) from None
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

    async def watch(self, prefix: str, *, revision: int | None = None) -> QueueWatch:
        """A watch whose stream etcd has created (TooOld at once when compacted). etcd's
        revisions start at 1, so after 0 is from 1."""
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
        # no prev_kv only when etcd compacted it away before this watcher caught up
        last = codec.decode(prev.value, kv.mod_revision, key) if prev.value else {
            "metadata": {"name": key.rsplit("/", 1)[-1],
                         "resourceVersion": str(kv.mod_revision)}}
        return WatchEvent(EventType.DELETED, key, last, kv.mod_revision, previous)


class _EtcdWatch:
    """One storage watch on one gRPC Watch stream, resumed after stream failures.

    ``next_revision`` is the first revision not yet delivered: a new stream starts there, so
    a resumed watch neither loses nor repeats an event.
    """

    def __init__(self, store: EtcdStorage, prefix: str, revision: int | None) -> None:
        self.store = store
        self.full_prefix = store._full(prefix)
        self.next_revision = revision + 1 if revision is not None else 0
        self.queue = QueueWatch(store.config.watch_buffer, on_stop=self.close,
                                on_progress=self.request_progress)
        self.call: Any = None
        self.task: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()  # gRPC allows one write at a time per stream
        self._progress_wanted = False  # a progress request not yet answered
        self._streamed = False  # the current stream delivered something

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
        if self.next_revision <= 1:
            return
        probe = rpc.RangeRequest(key=self.full_prefix, revision=self.next_revision,
                                 count_only=True)
        try:
            await self.store._kv("Range", probe)
        except TooOldResourceVersionError:
            raise await self.store._too_old(self.next_revision - 1) from None
        except FutureRevisionError:
            pass  # a watch may start ahead of the store: it waits

    async def establish(self) -> None:
        """Open a stream, on the first endpoint that answers, and wait until etcd created
        the watch (TooOld if compacted)."""
        await self._probe_compaction()
        endpoints = self.store.endpoints
        problem = "no endpoint"
        for _ in range(len(endpoints.targets)):
            index = endpoints.current
            try:
                self.call = await self._open(endpoints.channel(index))
            except grpc.aio.AioRpcError as err:
                if not _unavailable(err):
                    raise _map_error(err) from None
                problem = err.details() or err.code().name
            except TimeoutError:
                problem = "etcd did not create the watch in time"
            else:
                if self._progress_wanted:
                    await self.request_progress()
                return
            endpoints.failed(index)
        raise StorageUnavailableError(f"etcd is unavailable: {problem}")

    async def _open(self, channel: grpc.aio.Channel) -> Any:
        """A Watch stream whose ``created`` answer has arrived."""
        call = rpc.WatchStub(channel).Watch(metadata=_REQUIRE_LEADER)
        try:
            async with asyncio.timeout(self.store.config.request_timeout):
                await call.write(self._create_request())
                resp = await call.read()
            if resp is grpc.aio.EOF:
                raise StorageUnavailableError("etcd closed the watch stream at its start")
            if resp.canceled or not resp.created:
                raise await self._refused(resp)
        except BaseException:
            call.cancel()
            raise
        if self.next_revision == 0:  # "from now": resume after what etcd had then
            self.next_revision = resp.header.revision + 1
        return call

    async def _refused(self, resp: Any) -> StorageError:
        if resp.compact_revision:
            return await self.store._too_old(max(self.next_revision - 1, 0),
                                             resp.compact_revision)
        return StorageInternalError(f"etcd refused the watch: {resp.cancel_reason or resp}")

    def run(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        """Deliver events; on a broken stream, resume with capped exponential back-off, and
        end with StorageUnavailableError when no endpoint took it for OUTAGE_GRACE."""
        delay = _WATCH_RETRY_MIN
        loop = asyncio.get_running_loop()
        lost_since: float | None = None
        try:
            while not self.queue.done:
                if self.call is not None:
                    await self._read_until_broken()
                    if self.queue.done:
                        return
                    lost_since = loop.time()
                if self._streamed:  # the last stream worked: a fresh failure, retry soon
                    delay, self._streamed = _WATCH_RETRY_MIN, False
                await asyncio.sleep(delay)
                delay = min(delay * 2, _WATCH_RETRY_MAX)
                try:
                    await self.establish()
                except StorageUnavailableError:
                    if lost_since is not None and loop.time() - lost_since >= OUTAGE_GRACE:
                        raise
        except StorageError as err:  # compacted while away, unreachable, or refused
            self.queue.finish(err)
        finally:
            self._cancel_call()
            self.store._watches.discard(self)

    async def _read_until_broken(self) -> None:
        try:
            await self._read_stream()
        except (grpc.aio.AioRpcError, StorageUnavailableError) as err:
            log.info("etcd watch interrupted; resuming", prefix=self.full_prefix.decode(),
                     from_revision=self.next_revision, error=str(err).splitlines()[0])
        self._cancel_call()

    async def _read_stream(self) -> None:
        """Read responses until the consumer is done (return) or the stream fails (raise)."""
        while True:
            resp = await self.call.read()
            if resp is grpc.aio.EOF:
                raise StorageUnavailableError("etcd ended the watch stream")
            self._streamed = True
            if resp.canceled:
                if resp.compact_revision:
                    raise await self.store._too_old(self.next_revision - 1,
                                                    resp.compact_revision)
                raise StorageUnavailableError(f"etcd canceled the watch: {resp.cancel_reason}")
            if resp.events:
                for event in resp.events:
                    if not await self.queue.put(self.store._event(event)):
                        return
                    self.next_revision = event.kv.mod_revision + 1
            elif not resp.created and not await self._progress(resp.header.revision):
                return

    async def _progress(self, revision: int) -> bool:
        """A progress notification: every event up to ``revision`` was sent; a BOOKMARK."""
        self._progress_wanted = False
        self.next_revision = max(self.next_revision, revision + 1)
        return await self.queue.put(WatchEvent(EventType.BOOKMARK, "", None, revision))

    async def request_progress(self) -> None:
        """Ask etcd for a progress notification; asked again on the next stream if this one
        breaks before the answer."""
        self._progress_wanted = True
        call = self.call
        if call is None:
            return
        async with self._write_lock:
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError,
                                     asyncio.InvalidStateError):
                await call.write(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))

    def _cancel_call(self) -> None:
        if self.call is not None:
            self.call.cancel()
            self.call = None

    def close(self) -> None:
        """The consumer stopped, or the store closes: end the queue and the stream."""
        self.queue.finish()
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self._cancel_call()
