"""SQLite session store: one file, WAL journal, fsync on every commit."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .base import RunFailures
from .errors import StoreConfigError, StoreError, StoreUnavailableError
from .limits import StoreLimits, check_pending, check_tenant, check_total

__all__ = ["SqliteSessionStore"]

_T = TypeVar("_T")

_SCHEMA_VERSION = 3
_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_entries (
    tenant        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    value         TEXT    NOT NULL,
    value_bytes   INTEGER NOT NULL,
    charged_bytes INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    tenant        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    total_bytes   INTEGER NOT NULL,
    expires_at    REAL    NOT NULL,
    PRIMARY KEY (tenant, session_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_at);
CREATE TABLE IF NOT EXISTS run_failures (
    tenant        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    run_id        TEXT    NOT NULL,
    tool          TEXT    NOT NULL,
    failures      INTEGER NOT NULL,
    block_reason  TEXT,
    expires_at    REAL    NOT NULL,
    PRIMARY KEY (tenant, session_id, run_id, tool)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS run_failures_by_expiry ON run_failures (expires_at);
"""
# Version 1 files have entries but no session rows: give each session a full TTL from now.
_MIGRATE_1_TO_2 = """
INSERT OR IGNORE INTO sessions (tenant, session_id, total_bytes, expires_at)
SELECT tenant, session_id, SUM(charged_bytes), ? FROM session_entries GROUP BY tenant, session_id
"""
_LIVE = "EXISTS (SELECT 1 FROM sessions s WHERE s.tenant = ? AND s.session_id = ? AND s.expires_at > ?)"
# Expired sessions are removed in batches so one sweep never holds the write lock for long.
_EXPIRE_BATCH = 500
# How long a commit waits for another process holding the write lock.
_BUSY_TIMEOUT_SECONDS = 5.0


class SqliteSessionStore:
    """Session store in one SQLite file, driven from a single dedicated thread.

    One thread owns the connection, so calls run in the order they were made (this is the
    "commit order" limits are re-checked in) and the event loop never waits on disk.
    """

    def __init__(self, path: Path, limits: StoreLimits, clock: Callable[[], float] = time.time) -> None:
        self._path = path
        self._limits = limits
        self._clock = clock
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
                f"SELECT key, value FROM session_entries WHERE tenant = ? AND session_id = ? AND {_LIVE}",
                (tenant, session_id, tenant, session_id, self._clock()),
            )
            return dict(rows.fetchall())

        return await self._run(run)

    async def commit(self, tenant: str, session_id: str, sets: Mapping[str, str], deletes: Collection[str]) -> None:
        """Apply deletes then sets in one transaction, or nothing if a limit is exceeded."""
        if not sets and not deletes:
            return
        sets = dict(sets)
        deletes = tuple(deletes)
        costs = check_pending(sets, deletes, self._limits)

        def run(conn: sqlite3.Connection) -> None:
            with _write_transaction(conn):
                now = self._clock()
                _drop_expired(conn, "tenant = ? AND expires_at <= ?", (tenant, now))
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
                new_total = sum(current.values())
                check_total(new_total, self._limits)
                row = conn.execute(
                    "SELECT total_bytes FROM sessions WHERE tenant = ? AND session_id = ?", (tenant, session_id)
                ).fetchone()
                tenant_bytes, tenant_sessions = conn.execute(
                    "SELECT COALESCE(SUM(total_bytes), 0), COUNT(*) FROM sessions WHERE tenant = ?", (tenant,)
                ).fetchone()
                check_tenant(row[0] if row else 0, new_total, tenant_bytes, tenant_sessions, self._limits)
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
                    [(tenant, session_id, key, sets[key], size, charged) for key, (size, charged) in costs.items()],
                )
                if current:
                    conn.execute(
                        "INSERT INTO sessions (tenant, session_id, total_bytes, expires_at) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (tenant, session_id) DO UPDATE SET"
                        " total_bytes = excluded.total_bytes, expires_at = excluded.expires_at",
                        (tenant, session_id, new_total, now + self._limits.session_ttl_seconds),
                    )
                else:
                    conn.execute("DELETE FROM sessions WHERE tenant = ? AND session_id = ?", (tenant, session_id))

        await self._run(run)

    async def sizes(self, tenant: str, session_id: str) -> dict[str, int]:
        """Return key -> UTF-8 bytes of its JSON value."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                f"SELECT key, value_bytes FROM session_entries WHERE tenant = ? AND session_id = ? AND {_LIVE}",
                (tenant, session_id, tenant, session_id, self._clock()),
            )
            return dict(rows.fetchall())

        return await self._run(run)

    async def delete_session(self, tenant: str, session_id: str) -> bool:
        """Drop every entry of one session; return whether it had any."""

        def run(conn: sqlite3.Connection) -> bool:
            with _write_transaction(conn):
                live = conn.execute(
                    "SELECT 1 FROM sessions WHERE tenant = ? AND session_id = ? AND expires_at > ?",
                    (tenant, session_id, self._clock()),
                ).fetchone()
                conn.execute("DELETE FROM session_entries WHERE tenant = ? AND session_id = ?", (tenant, session_id))
                conn.execute("DELETE FROM sessions WHERE tenant = ? AND session_id = ?", (tenant, session_id))
            return live is not None

        return await self._run(run)

    async def usage(self, tenant: str) -> tuple[int, int]:
        """Return ``(bytes, sessions)`` of the tenant's live sessions."""

        def run(conn: sqlite3.Connection) -> tuple[int, int]:
            row = conn.execute(
                "SELECT COALESCE(SUM(total_bytes), 0), COUNT(*) FROM sessions WHERE tenant = ? AND expires_at > ?",
                (tenant, self._clock()),
            ).fetchone()
            return int(row[0]), int(row[1])

        return await self._run(run)

    async def expire(self) -> int:
        """Delete the entries and rows of every session past its TTL."""
        removed = 0
        while True:
            batch = await self._run(self._expire_batch)
            removed += batch
            if batch < _EXPIRE_BATCH:
                return removed

    def _expire_batch(self, conn: sqlite3.Connection) -> int:
        with _write_transaction(conn):
            count = _drop_expired(
                conn,
                "expires_at <= ? LIMIT ?",
                (self._clock(), _EXPIRE_BATCH),
            )
            # Left-over expired counters go at the next sweep; reads ignore them meanwhile.
            conn.execute(
                "DELETE FROM run_failures WHERE (tenant, session_id, run_id, tool) IN"
                " (SELECT tenant, session_id, run_id, tool FROM run_failures WHERE expires_at <= ? LIMIT ?)",
                (self._clock(), _EXPIRE_BATCH),
            )
        return count

    async def add_run_failure(
        self, tenant: str, session_id: str, run_id: str, tool: str, block_reason: str | None = None
    ) -> RunFailures:
        """Count one failure of ``tool`` (blocking it with ``block_reason``) in one transaction."""
        run_key = (tenant, session_id, run_id)

        def run(conn: sqlite3.Connection) -> RunFailures:
            with _write_transaction(conn):
                now = self._clock()
                expires = now + self._limits.session_ttl_seconds
                conn.execute(
                    "DELETE FROM run_failures WHERE tenant = ? AND session_id = ? AND run_id = ? AND expires_at <= ?",
                    (*run_key, now),
                )
                conn.execute(
                    "INSERT INTO run_failures (tenant, session_id, run_id, tool, failures, block_reason, expires_at)"
                    " VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (tenant, session_id, run_id, tool) DO UPDATE SET"
                    " failures = failures + 1, block_reason = COALESCE(block_reason, excluded.block_reason)",
                    (*run_key, tool, block_reason, expires),
                )
                # The whole run lives on from its latest failure.
                conn.execute(
                    "UPDATE run_failures SET expires_at = ? WHERE tenant = ? AND session_id = ? AND run_id = ?",
                    (expires, *run_key),
                )
                found = _run_failures(conn, run_key, now)
            return found

        return await self._run(run)

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures:
        """Return the run's live failure counters."""
        return await self._run(lambda conn: _run_failures(conn, (tenant, session_id, run_id), self._clock()))

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None:
        """Forget the run's failure counters."""
        await self._run(
            lambda conn: conn.execute(
                "DELETE FROM run_failures WHERE tenant = ? AND session_id = ? AND run_id = ?",
                (tenant, session_id, run_id),
            )
        )

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
                raise StoreConfigError(f"SQLite session store at {self._path} cannot use WAL journaling (got {mode!r})")
            # FULL fsyncs the WAL at every commit: a completed cell's writes survive a crash.
            conn.execute("PRAGMA synchronous=FULL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise StoreConfigError(
                    f"SQLite session store at {self._path} has schema version {version}, "
                    f"newer than this service understands ({_SCHEMA_VERSION})"
                )
            conn.executescript(_SCHEMA)
            if version == 1:
                conn.execute(_MIGRATE_1_TO_2, (self._clock() + self._limits.session_ttl_seconds,))
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


def _run_failures(conn: sqlite3.Connection, run_key: tuple[str, str, str], now: float) -> RunFailures:
    rows = conn.execute(
        "SELECT tool, failures, block_reason FROM run_failures WHERE tenant = ? AND session_id = ?"
        " AND run_id = ? AND expires_at > ?",
        (*run_key, now),
    ).fetchall()
    return RunFailures(
        failures={tool: int(n) for tool, n, _ in rows},
        blocked={tool: reason for tool, _, reason in rows if reason is not None},
    )


@contextlib.contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: IMMEDIATE takes the write lock before anything is read, so totals cannot
    change under the checks; committed at the end, rolled back on any failure."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _drop_expired(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> int:
    """Delete the sessions matching ``where`` (on ``sessions``) with their entries; return how many."""
    doomed = conn.execute(f"SELECT tenant, session_id FROM sessions WHERE {where}", params).fetchall()
    conn.executemany("DELETE FROM session_entries WHERE tenant = ? AND session_id = ?", doomed)
    conn.executemany("DELETE FROM sessions WHERE tenant = ? AND session_id = ?", doomed)
    return len(doomed)
