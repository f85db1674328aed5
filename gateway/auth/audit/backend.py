"""The audit log: one JSON line per event, to a file (rotated by size, kept by count and
age, as kube's lumberjack backend does) or to standard output."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from gateway.storage.codec import dumps

MEGABYTE = 1024 * 1024


class AuditLog:
    def __init__(self, path: str, *, max_size_mb: int = 0, max_backups: int = 0,
                 max_age_days: int = 0) -> None:
        self.path = None if path == "-" else Path(path)
        self.max_size = max_size_mb * MEGABYTE
        self.max_backups = max_backups
        self.max_age = max_age_days * 86400
        self._file: IO[bytes] | None = None
        self._size = 0

    def _open(self) -> IO[bytes]:
        if self._file is None:
            if self.path is None:
                self._file = sys.stdout.buffer
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self._file = os.fdopen(fd, "ab")
                self._size = self.path.stat().st_size
        return self._file

    def write(self, event: dict[str, Any]) -> None:
        line = dumps(event) + b"\n"
        if self.path is not None and self.max_size and self._size + len(line) > self.max_size \
                and self._size:
            self._rotate()
        handle = self._open()
        handle.write(line)
        handle.flush()
        self._size += len(line)

    def _rotate(self) -> None:
        assert self.path is not None
        if self._file is not None:
            self._file.close()
            self._file = None
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        backup = self.path.with_name(f"{self.path.stem}-{stamp}{self.path.suffix}")
        os.replace(self.path, backup)
        self._prune()

    def backups(self) -> list[Path]:
        assert self.path is not None
        pattern = f"{self.path.stem}-*{self.path.suffix}"
        return sorted(self.path.parent.glob(pattern))

    def _prune(self) -> None:
        backups = self.backups()
        now = time.time()
        for old in backups:
            if self.max_age and now - old.stat().st_mtime > self.max_age:
                old.unlink(missing_ok=True)
        backups = [b for b in backups if b.exists()]
        if self.max_backups and len(backups) > self.max_backups:
            for old in backups[: len(backups) - self.max_backups]:
                old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None and self.path is not None:
            self._file.close()
        self._file = None
