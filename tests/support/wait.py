"""Waiting on an event, never on the clock: poll a condition until it holds or a deadline.

A deadline here is only how long to wait before calling the test failed; a test never asserts
that something happened *within* a time (the machines are shared and noisy).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Generous: a slow CI machine should never fail a test for waiting too little.
DEFAULT_TIMEOUT = 30.0


def eventually(check: Callable[[], T], *, timeout: float = DEFAULT_TIMEOUT,
               interval: float = 0.05, what: str = "the condition") -> T:
    """Call ``check`` until it returns something truthy and return that; AssertionError with
    the last value (or the last AssertionError ``check`` raised) when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            last: Any = result
        except AssertionError as err:
            result, last = None, err
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold after {timeout}s; last: {last!r}")
        time.sleep(interval)


async def eventually_async(check: Callable[[], T | Awaitable[T]], *,
                           timeout: float = DEFAULT_TIMEOUT, interval: float = 0.02,
                           what: str = "the condition") -> T:
    """``eventually`` for asyncio tests: ``check`` may be a plain or an async callable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            last: Any = result
        except AssertionError as err:
            result, last = None, err
        if result:
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold after {timeout}s; last: {last!r}")
        await asyncio.sleep(interval)
