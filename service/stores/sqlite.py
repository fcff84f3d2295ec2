"""SQLite session store: one file, WAL journal, fsync on every commit."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .errors import StoreConfigError, StoreError, StoreUnavailableError
from .limits import StoreLimits, check_pending, check_total

__all__ = ["SqliteSessionStore"]

_T = TypeVar("_T")

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_entries (
    tenant        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    value         TEXT    NOT NULL,
    value_bytes   INTEGER NOT NULL,
    charged_bytes INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, key)
) WITHOUT ROWID
"""
# How long a commit waits for another process holding the write lock.
_BUSY_TIMEOUT_SECONDS = 5.0


class SqliteSessionStore:
    """Session store in one SQLite file, driven from a single dedicated thread.

    One thread owns the connection, so calls run in the order they were made (this is the
    "commit order" limits are re-checked in) and the event loop never waits on disk.
    """

    def __init__(self, path: Path, limits: StoreLimits) -> None:
        self._path = path
        self._limits = limits
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="codemode-sqlite-store")
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    async def get_all(self, tenant: str, session_id: str) -> dict[str, str]:
        """Return the committed entries of one session."""

        def run(conn: sqlite3.Connection) -> dict[str, str]:
            rows = conn.execute(
                "SELECT key, value FROM session_entries WHERE tenant = ? AND session_id = ?",
                (tenant, session_id),
            )
            return dict(rows.fetchall())

        return await self._run(run)

    async def commit(
        self, tenant: str, session_id: str, sets: Mapping[str, str], deletes: Collection[str]
    ) -> None:
        """Apply deletes then sets in one transaction, or nothing if a limit is exceeded."""
        if not sets and not deletes:
            return
        sets = dict(sets)
        deletes = tuple(deletes)
        costs = check_pending(sets, deletes, self._limits)

        def run(conn: sqlite3.Connection) -> None:
            # IMMEDIATE takes the write lock before reading, so the total cannot change under us.
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = dict(
                    conn.execute(
                        "SELECT key, charged_bytes FROM session_entries WHERE tenant = ? AND session_id = ?",
                        (tenant, session_id),
                    ).fetchall()
                )
                for key in deletes:
                    current.pop(key, None)
                for key, (_, charged) in costs.items():
                    current[key] = charged
                check_total(sum(current.values()), self._limits)
                conn.executemany(
                    "DELETE FROM session_entries WHERE tenant = ? AND session_id = ? AND key = ?",
                    [(tenant, session_id, key) for key in deletes],
                )
                conn.executemany(
                    "INSERT INTO session_entries"
                    " (tenant, session_id, key, value, value_bytes, charged_bytes)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (tenant, session_id, key) DO UPDATE SET"
                    " value = excluded.value, value_bytes = excluded.value_bytes,"
                    " charged_bytes = excluded.charged_bytes",
                    [
                        (tenant, session_id, key, sets[key], size, charged)
                        for key, (size, charged) in costs.items()
                    ],
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        await self._run(run)

    async def sizes(self, tenant: str, session_id: str) -> dict[str, int]:
        """Return key -> UTF-8 bytes of its JSON value."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT key, value_bytes FROM session_entries WHERE tenant = ? AND session_id = ?",
                (tenant, session_id),
            )
            return dict(rows.fetchall())

        return await self._run(run)

    async def delete_session(self, tenant: str, session_id: str) -> bool:
        """Drop every entry of one session; return whether it had any."""

        def run(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM session_entries WHERE tenant = ? AND session_id = ?", (tenant, session_id)
            )
            return cursor.rowcount > 0

        return await self._run(run)

    async def ping(self) -> None:
        """Open the file if needed and run a trivial query."""
        await self._run(lambda conn: conn.execute("SELECT 1").fetchone())

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

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise StoreUnavailableError("the SQLite session store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        conn = self._connection()
        try:
            return fn(conn)
        except StoreError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"SQLite session store at {self._path} failed: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        try:
            # Autocommit mode: transactions are only the explicit BEGIN/COMMIT in commit().
            conn = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreConfigError(f"cannot open the SQLite session store at {self._path}: {exc}") from exc
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreConfigError(
                    f"SQLite session store at {self._path} cannot use WAL journaling (got {mode!r})"
                )
            # FULL fsyncs the WAL at every commit: a completed cell's writes survive a crash.
            conn.execute("PRAGMA synchronous=FULL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise StoreConfigError(
                    f"SQLite session store at {self._path} has schema version {version}, "
                    f"newer than this service understands ({_SCHEMA_VERSION})"
                )
            conn.execute(_SCHEMA)
            if version < _SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise StoreConfigError(f"cannot open the SQLite session store at {self._path}: {exc}") from exc
        return conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
