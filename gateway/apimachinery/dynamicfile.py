"""Files read again when they change: certificates, keys and CA bundles rotated on disk while
the gateway runs (kube's dynamiccertificates: DynamicFileCAContent,
DynamicCertKeyPairContent).

A ``FileContent`` is one or more files read and parsed together (a certificate and its key
are one content: a pair is taken only when both halves match). It keeps the last content that
parsed; a change that does not parse (a half-written file, garbage) is logged and the old
content stays in use, so a bad rotation never takes the gateway down. Its users hold the
content and read ``value`` when they need it, or are told of each change (``on_change``).

One ``FileWatcher`` looks at every content: each second the files' status (modification time,
size, inode) is compared with what was read, and only a difference reads them; every minute
each content is read again whatever its status says (kube re-checks every minute beside its
file watch), which catches a rewrite that kept all three. Unchanged bytes are not parsed
again. Looking costs a few ``stat`` calls a second.

This sits at the bottom of the layers because every layer holds such files: the serving
certificate (server), the client CAs (auth, the TLS handshake, the published ConfigMap),
service-account keys (auth), the proxy client certificate (transport).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: How often the files' status is looked at.
POLL_INTERVAL = 1.0
#: How often every content is read again regardless of its files' status (kube: a minute).
RECHECK_INTERVAL = 60.0

Stamp = tuple[tuple[int, int, int], ...]


class FileContentError(Exception):
    """The files cannot be read or do not parse; the message says which and why."""


class FileContent(Generic[T]):
    """``paths`` read together and parsed by ``parse`` (which gets their bytes, in order, and
    raises ValueError, or any exception of ``errors``, when they are not good). The first read
    happens here: FileContentError when it fails, which is a start-up error."""

    def __init__(self, name: str, paths: Sequence[Path], parse: Callable[[list[bytes]], T],
                 errors: tuple[type[BaseException], ...] = ()) -> None:
        self.name = name
        self.paths = tuple(paths)
        self._parse = parse
        self._errors: tuple[type[BaseException], ...] = (ValueError, TypeError, *errors)
        self._listeners: list[Callable[[T], None]] = []
        #: how many times the content changed since start
        self.generation = 0
        #: the status and bytes of the last change that did not load (not read again)
        self._refused: tuple[Stamp, list[bytes]] | None = None
        failures: tuple[type[BaseException], ...] = (OSError, *self._errors)
        try:
            stamp, raw = self._read()
            value = parse(raw)
        except failures as err:
            raise FileContentError(f"{name}: {_describe(err)}") from None
        self.stamp = stamp
        self.raw = raw
        self.value = value

    def on_change(self, listener: Callable[[T], None]) -> None:
        """Call ``listener`` with each new value, after it is in place."""
        self._listeners.append(listener)

    def _read(self) -> tuple[Stamp, list[bytes]]:
        stamp = self._stamp()
        return stamp, [path.read_bytes() for path in self.paths]

    def _stamp(self) -> Stamp:
        stamps = []
        for path in self.paths:
            st = os.stat(path)
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamps)

    def check(self, *, reread: bool = False) -> bool:
        """Look for a change (read the files only when their status changed, or ``reread``);
        True when a new value was taken."""
        try:
            if not reread:
                stamp = self._stamp()
                if stamp == self.stamp or (self._refused and stamp == self._refused[0]):
                    return False
            stamp, raw = self._read()
        except OSError as err:  # removed while being replaced: looked at again next time
            log.warning("cannot read a changed file; keeping the last good content",
                        content=self.name, error=_describe(err))
            return False
        if raw == self.raw:
            self.stamp = stamp  # touched or rewritten with the same bytes
            self._refused = None
            return False
        if self._refused is not None and raw == self._refused[1]:
            self._refused = (stamp, raw)  # the same bad bytes: said already
            return False
        try:
            value = self._parse(raw)
        except self._errors as err:
            # the next change of status (the rest of the write, the other half of a pair)
            # reads the files again
            self._refused = (stamp, raw)
            log.error("a changed file does not load; keeping the last good content",
                      content=self.name, files=[str(p) for p in self.paths],
                      error=_describe(err))
            return False
        self.stamp, self.raw, self.value = stamp, raw, value
        self._refused = None
        self.generation += 1
        log.info("loaded new content", content=self.name, generation=self.generation)
        for listener in self._listeners:
            try:
                listener(value)
            except Exception:  # one listener's bug must not keep the others from hearing
                log.exception("a listener of a file content failed", content=self.name)
        return True


def _describe(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    return str(err) or type(err).__name__


class FileWatcher:
    """Looks at every content it watches for changes, until cancelled."""

    def __init__(self, interval: float = POLL_INTERVAL,
                 recheck: float = RECHECK_INTERVAL) -> None:
        self.interval = interval
        self.recheck = recheck
        self.contents: list[FileContent] = []

    def watch(self, *contents: FileContent | None) -> None:
        for content in contents:
            if content is not None and all(content is not c for c in self.contents):
                self.contents.append(content)

    def check_all(self, *, reread: bool = False) -> None:
        for content in self.contents:
            try:
                content.check(reread=reread)
            except Exception:  # a parser's unforeseen error must not end the watching
                log.exception("checking a file content failed; keeping the last good content",
                              content=content.name)

    async def run(self) -> None:
        last_reread = time.monotonic()
        while True:
            await asyncio.sleep(self.interval)
            now = time.monotonic()
            reread = now - last_reread >= self.recheck
            if reread:
                last_reread = now
            self.check_all(reread=reread)
