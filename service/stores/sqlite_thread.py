"""One SQLite connection on one dedicated thread, each call bounded by a deadline.

One thread owns the connection, so calls run in the order they were made and the event loop never
waits on disk.  A call not done within ``timeout_seconds`` raises ``StoreUnavailableError``: the
thread skips a call whose deadline passed while it queued and stops waiting for a lock at the
deadline, so such a call almost always did nothing (only one stuck in the disk past the deadline
may still land).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .errors import StoreError, StoreUnavailableError

_T = TypeVar("_T")

#: A caller waits this much past the store's timeout for the thread's own "gave up" answer.
_ANSWER_GRACE_SECONDS = 0.25


class SqliteThread:
    """Runs functions of the connection on its thread; ``open`` makes the connection on first use."""

    def __init__(self, path: Path, open_connection: Callable[[], sqlite3.Connection], timeout_seconds: float) -> None:
        self.path = path
        self.timeout = timeout_seconds
        self._open = open_connection  # runs on the thread, at the first call
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="codemode-sqlite-store")
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    async def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(connection)`` on the thread, within the timeout (``StoreUnavailableError`` past it)."""
        if self._closed:
            raise StoreUnavailableError("the SQLite session store is closed")
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.timeout
        try:
            # The thread gives up at the deadline itself (a lock wait ends there too), so an answer
            # lost to this timeout is almost always "not done"; the grace covers the hand-over.
            async with asyncio.timeout(self.timeout + _ANSWER_GRACE_SECONDS):
                return await loop.run_in_executor(self._executor, self._call, fn, deadline)
        except TimeoutError:
            raise self._late() from None

    async def close(self) -> None:
        """Close the connection and stop the thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_connection)
        finally:
            self._executor.shutdown(wait=False)

    def _late(self) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"SQLite session store at {self.path} did not answer within {self.timeout:g} s (store_timeout_ms)"
        )

    def _call(self, fn: Callable[[sqlite3.Connection], _T], deadline: float) -> _T:
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._late()  # waited its turn behind other calls until its caller gave up
        if self._conn is None:
            self._conn = self._open()
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {max(1, int(left * 1000))}")
            return fn(self._conn)
        except StoreError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"SQLite session store at {self.path} failed: {exc}") from exc

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
