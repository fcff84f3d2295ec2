"""SQLite session store: one file, WAL journal, fsync on every commit.

Every call waits at most the store's timeout (``store_timeout_ms``), a lock held by another process
included: a stalled disk or a foreign lock answers ``StoreUnavailableError`` instead of a stalled cell.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path

from .base import DEFAULT_TIMEOUT_SECONDS, RunFailures, RunIncrement
from .errors import StoreConfigError, StoreError
from .limits import RUN_COUNTER_OVERHEAD, StoreLimits, check_pending, check_tenant, check_total, run_counter_bytes
from .sqlite_thread import SqliteThread

__all__ = ["SqliteSessionStore"]


_SCHEMA_VERSION = 4
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
    charged_bytes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session_id, run_id, tool)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS run_failures_by_expiry ON run_failures (expires_at);
-- The charged bytes of each tenant's run_failures rows (live or not yet swept), kept in step with them.
CREATE TABLE IF NOT EXISTS tenant_counters (
    tenant        TEXT    PRIMARY KEY,
    bytes         INTEGER NOT NULL
) WITHOUT ROWID;
-- Parked Python cells a restarted service takes up (service/runtime/parked_cells.py), and the secret
-- that seals them.  Added without a version step: a service that predates them never reads them.
CREATE TABLE IF NOT EXISTS parked_cells (
    cell_id       TEXT    PRIMARY KEY,
    record        BLOB    NOT NULL,
    tag           TEXT    NOT NULL,
    expires_at    REAL    NOT NULL
);
CREATE TABLE IF NOT EXISTS secrets (
    name          TEXT    PRIMARY KEY,
    value         BLOB    NOT NULL
) WITHOUT ROWID;
"""
# Version 1 files have entries but no session rows: give each session a full TTL from now.
_MIGRATE_1_TO_2 = """
INSERT OR IGNORE INTO sessions (tenant, session_id, total_bytes, expires_at)
SELECT tenant, session_id, SUM(charged_bytes), ? FROM session_entries GROUP BY tenant, session_id
"""
# Version 3 counters were charged nothing: charge them as run_counter_bytes does (UTF-8 bytes + overhead).
_MIGRATE_3_TO_4 = (
    "ALTER TABLE run_failures ADD COLUMN charged_bytes INTEGER NOT NULL DEFAULT 0",
    f"UPDATE run_failures SET charged_bytes = {RUN_COUNTER_OVERHEAD} + length(CAST(session_id || run_id || tool AS BLOB))"
    " + COALESCE(length(CAST(block_reason AS BLOB)), 0)",
    "INSERT INTO tenant_counters (tenant, bytes) SELECT tenant, SUM(charged_bytes) FROM run_failures GROUP BY tenant",
)
_LIVE = "EXISTS (SELECT 1 FROM sessions s WHERE s.tenant = ? AND s.session_id = ? AND s.expires_at > ?)"
# Expired sessions are removed in batches so one sweep never holds the write lock for long.
_EXPIRE_BATCH = 500


class SqliteSessionStore:
    """Session store in one SQLite file, driven from a single dedicated thread (``SqliteThread``).

    Calls run on that thread in the order they were made: this is the "commit order" limits are
    re-checked in.  Each call is bounded by ``timeout_seconds`` (``StoreUnavailableError`` past it).
    """

    def __init__(
        self,
        path: Path,
        limits: StoreLimits,
        clock: Callable[[], float] = time.time,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self._path = path
        self._limits = limits
        self._clock = clock
        self._timeout = timeout_seconds
        self._thread = SqliteThread(path, self._open, timeout_seconds)

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

        return await self._thread.run(run)

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
                tenant_bytes += _counter_bytes(conn, tenant)
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

        await self._thread.run(run)

    async def sizes(self, tenant: str, session_id: str) -> dict[str, int]:
        """Return key -> UTF-8 bytes of its JSON value."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                f"SELECT key, value_bytes FROM session_entries WHERE tenant = ? AND session_id = ? AND {_LIVE}",
                (tenant, session_id, tenant, session_id, self._clock()),
            )
            return dict(rows.fetchall())

        return await self._thread.run(run)

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

        return await self._thread.run(run)

    async def usage(self, tenant: str) -> tuple[int, int]:
        """Return ``(bytes, sessions)`` of the tenant's live sessions."""

        def run(conn: sqlite3.Connection) -> tuple[int, int]:
            row = conn.execute(
                "SELECT COALESCE(SUM(total_bytes), 0), COUNT(*) FROM sessions WHERE tenant = ? AND expires_at > ?",
                (tenant, self._clock()),
            ).fetchone()
            return int(row[0]) + _counter_bytes(conn, tenant), int(row[1])

        return await self._thread.run(run)

    async def expire(self) -> int:
        """Delete the entries and rows of every session past its TTL, and every expired run counter."""
        removed = 0
        while True:
            sessions, counters = await self._thread.run(self._expire_batch)
            removed += sessions
            if sessions < _EXPIRE_BATCH and counters < _EXPIRE_BATCH:
                return removed

    def _expire_batch(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """Remove up to one batch of expired sessions and one of expired counters; return both counts."""
        with _write_transaction(conn):
            now = self._clock()
            count = _drop_expired(conn, "expires_at <= ? LIMIT ?", (now, _EXPIRE_BATCH))
            conn.execute("DELETE FROM parked_cells WHERE expires_at <= ?", (now,))
            doomed = conn.execute(
                "SELECT tenant, session_id, run_id, tool, charged_bytes FROM run_failures WHERE expires_at <= ? LIMIT ?",
                (now, _EXPIRE_BATCH),
            ).fetchall()
            _drop_counters(conn, doomed)
        return count, len(doomed)

    async def add_run_failures(self, increments: Sequence[RunIncrement]) -> list[RunFailures | None]:
        """Add every increment in one transaction (one fsync for the whole batch)."""
        increments = list(increments)

        def run(conn: sqlite3.Connection) -> list[RunFailures | None]:
            with _write_transaction(conn):
                now = self._clock()
                return [self._add_increment(conn, inc, now) for inc in increments]

        return await self._thread.run(run)

    def _add_increment(self, conn: sqlite3.Connection, inc: RunIncrement, now: float) -> RunFailures | None:
        run_key = (inc.tenant, inc.session_id, inc.run_id)
        _drop_counters(
            conn,
            conn.execute(
                "SELECT tenant, session_id, run_id, tool, charged_bytes FROM run_failures"
                " WHERE tenant = ? AND session_id = ? AND run_id = ? AND expires_at <= ?",
                (*run_key, now),
            ).fetchall(),
        )
        held = {
            tool: reason
            for tool, reason in conn.execute(
                "SELECT tool, block_reason FROM run_failures WHERE tenant = ? AND session_id = ? AND run_id = ?",
                run_key,
            ).fetchall()
        }
        rows = []
        added = 0
        for tool, count in inc.failures.items():
            reason = held[tool] if held.get(tool) is not None else inc.blocked.get(tool)
            charged = run_counter_bytes(inc.session_id, inc.run_id, tool, reason)
            added += charged - (run_counter_bytes(inc.session_id, inc.run_id, tool, held[tool]) if tool in held else 0)
            rows.append((*run_key, tool, count, reason, charged))
        if added > 0:
            (data,) = conn.execute(
                "SELECT COALESCE(SUM(total_bytes), 0) FROM sessions WHERE tenant = ?", (inc.tenant,)
            ).fetchone()
            if data + _counter_bytes(conn, inc.tenant) + added > self._limits.max_tenant_bytes:
                return None
        expires = now + self._limits.session_ttl_seconds
        conn.executemany(
            "INSERT INTO run_failures"
            " (tenant, session_id, run_id, tool, failures, block_reason, expires_at, charged_bytes)"
            " VALUES (?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT (tenant, session_id, run_id, tool) DO UPDATE SET"
            " failures = failures + excluded.failures, block_reason = excluded.block_reason,"
            " charged_bytes = excluded.charged_bytes",
            rows,
        )
        # The whole run lives on from its latest failure.
        conn.execute(
            "UPDATE run_failures SET expires_at = ? WHERE tenant = ? AND session_id = ? AND run_id = ?",
            (expires, *run_key),
        )
        _charge_counters(conn, inc.tenant, added)
        return _run_failures(conn, run_key, now)

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures:
        """Return the run's live failure counters."""
        return await self._thread.run(lambda conn: _run_failures(conn, (tenant, session_id, run_id), self._clock()))

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None:
        """Forget the run's failure counters (and their charge)."""

        def run(conn: sqlite3.Connection) -> None:
            with _write_transaction(conn):
                doomed = conn.execute(
                    "SELECT tenant, session_id, run_id, tool, charged_bytes FROM run_failures"
                    " WHERE tenant = ? AND session_id = ? AND run_id = ?",
                    (tenant, session_id, run_id),
                ).fetchall()
                _drop_counters(conn, doomed)

        await self._thread.run(run)

    # Parked Python cells (service/runtime/parked_cells.py): one record per cell, taken once.

    async def shared_secret(self, name: str) -> bytes:
        """The secret ``name``: 32 random bytes made the first time it is asked for, kept in the file."""

        def run(conn: sqlite3.Connection) -> bytes:
            with _write_transaction(conn):
                conn.execute(
                    "INSERT OR IGNORE INTO secrets (name, value) VALUES (?, ?)", (name, secrets.token_bytes(32))
                )
                (value,) = conn.execute("SELECT value FROM secrets WHERE name = ?", (name,)).fetchone()
            if not isinstance(value, bytes) or len(value) < 32:
                raise StoreError(
                    f"the secret {name!r} in {self._path} is not 32 bytes; delete its row to make a new one"
                )
            return value

        return await self._thread.run(run)

    async def keep_parked(self, cell_id: str, record: bytes, tag: str, expires_at: float) -> None:
        """Keep (or replace) the record of a parked cell until ``expires_at`` (the store's clock)."""
        await self._thread.run(
            lambda conn: _in_transaction(
                conn,
                "INSERT INTO parked_cells (cell_id, record, tag, expires_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (cell_id) DO UPDATE SET record = excluded.record, tag = excluded.tag,"
                " expires_at = excluded.expires_at",
                (cell_id, record, tag, expires_at),
            )
        )

    async def parked_record(self, cell_id: str) -> bytes | None:
        """The live record of a parked cell, or None."""

        def run(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(
                "SELECT record FROM parked_cells WHERE cell_id = ? AND expires_at > ?", (cell_id, self._clock())
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._thread.run(run)

    async def claim_parked(self, cell_id: str, tag: str, claimant: str, ttl_seconds: float) -> bool:
        """Take the record with this ``tag`` away (True), once: a second claim, or one of another version
        of the record, finds nothing (False).  One machine: ``claimant`` has nobody to tell."""

        def run(conn: sqlite3.Connection) -> bool:
            with _write_transaction(conn):
                cursor = conn.execute("DELETE FROM parked_cells WHERE cell_id = ? AND tag = ?", (cell_id, tag))
            return cursor.rowcount == 1

        return await self._thread.run(run)

    async def drop_parked(self, cell_id: str) -> None:
        """Forget a parked cell's record (it resumed or ended where it is)."""
        await self._thread.run(
            lambda conn: _in_transaction(conn, "DELETE FROM parked_cells WHERE cell_id = ?", (cell_id,))
        )

    async def ping(self) -> None:
        """Open the file if needed and run a trivial query."""
        await self._thread.run(lambda conn: conn.execute("SELECT 1").fetchone())

    async def close(self) -> None:
        """Close the connection and stop the thread; safe to call twice."""
        await self._thread.close()

    def _open(self) -> sqlite3.Connection:
        try:
            # Autocommit mode: transactions are only the explicit BEGIN/COMMIT in commit().
            # A lock another process holds is waited for as long as a call may take, no longer.
            conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None)
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
            if version == 3:
                conn.execute(_MIGRATE_3_TO_4[0])
            conn.executescript(_SCHEMA)
            if version == 3:
                for statement in _MIGRATE_3_TO_4[1:]:
                    conn.execute(statement)
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


def _in_transaction(conn: sqlite3.Connection, statement: str, params: tuple[object, ...]) -> None:
    with _write_transaction(conn):
        conn.execute(statement, params)


def _drop_expired(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> int:
    """Delete the sessions matching ``where`` (on ``sessions``) with their entries; return how many."""
    doomed = conn.execute(f"SELECT tenant, session_id FROM sessions WHERE {where}", params).fetchall()
    conn.executemany("DELETE FROM session_entries WHERE tenant = ? AND session_id = ?", doomed)
    conn.executemany("DELETE FROM sessions WHERE tenant = ? AND session_id = ?", doomed)
    return len(doomed)


def _counter_bytes(conn: sqlite3.Connection, tenant: str) -> int:
    row = conn.execute("SELECT bytes FROM tenant_counters WHERE tenant = ?", (tenant,)).fetchone()
    return int(row[0]) if row else 0


def _charge_counters(conn: sqlite3.Connection, tenant: str, delta: int) -> None:
    """Add ``delta`` (may be negative) to the tenant's counter bytes; a tenant left with none has no row."""
    if delta == 0:
        return
    conn.execute(
        "INSERT INTO tenant_counters (tenant, bytes) VALUES (?, ?)"
        " ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes",
        (tenant, delta),
    )
    conn.execute("DELETE FROM tenant_counters WHERE tenant = ? AND bytes <= 0", (tenant,))


def _drop_counters(conn: sqlite3.Connection, rows: list[tuple[str, str, str, str, int]]) -> None:
    """Delete these ``run_failures`` rows (tenant, session, run, tool, charged) and release their charge."""
    if not rows:
        return
    conn.executemany(
        "DELETE FROM run_failures WHERE tenant = ? AND session_id = ? AND run_id = ? AND tool = ?",
        [row[:4] for row in rows],
    )
    freed: dict[str, int] = {}
    for tenant, *_, charged in rows:
        freed[tenant] = freed.get(tenant, 0) + int(charged)
    for tenant, amount in freed.items():
        _charge_counters(conn, tenant, -amount)
