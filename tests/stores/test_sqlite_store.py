"""SQLite-specific behaviour: crash durability, WAL, file errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from service.stores import StoreConfigError, StoreLimits, open_store, sqlite_url

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[2]

_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from service.stores import StoreLimits, open_store

    async def main():
        store = open_store(sys.argv[1], StoreLimits())
        await store.commit("acme", "s1", {"cell": '{"done":true}', "n": "42"}, ())
        print("committed", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
    """
)


@pytest.mark.slow
async def test_commit_survives_kill_9(tmp_path: Path) -> None:
    """Data committed by a process that is SIGKILLed right after the commit is found on reopen."""
    url = sqlite_url(tmp_path / "durable.db")
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, url],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = writer.stdout.readline()
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        _, stderr = writer.communicate(timeout=10)
    assert line == b"committed\n", stderr.decode(errors="replace")
    assert writer.returncode == -signal.SIGKILL
    store = open_store(url, StoreLimits())
    try:
        assert await store.get_all("acme", "s1") == {"cell": '{"done":true}', "n": "42"}
    finally:
        await store.close()


async def test_uses_wal_journal(tmp_path: Path) -> None:
    """An open store with a commit keeps a write-ahead log next to the database file."""
    path = tmp_path / "wal.db"
    store = open_store(sqlite_url(path), StoreLimits())
    try:
        await store.commit("t", "s", {"k": "1"}, ())
        assert Path(f"{path}-wal").exists()
    finally:
        await store.close()


async def test_creates_parent_directories(tmp_path: Path) -> None:
    """Opening a store under missing directories creates them and the file."""
    path = tmp_path / "a" / "b" / "store.db"
    store = open_store(sqlite_url(path), StoreLimits())
    try:
        await store.ping()
        assert path.is_file()
    finally:
        await store.close()


async def test_relative_url_resolves_against_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite:///data/s.db names data/s.db under the working directory at open time."""
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///data/s.db", StoreLimits())
    monkeypatch.chdir(REPO_ROOT)
    try:
        await store.commit("t", "s", {"k": "1"}, ())
        assert (tmp_path / "data" / "s.db").is_file()
    finally:
        await store.close()


async def test_not_a_database_is_config_error(tmp_path: Path) -> None:
    """A file that is not SQLite makes ping raise StoreConfigError naming the path."""
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database" * 100)
    store = open_store(sqlite_url(path), StoreLimits())
    try:
        with pytest.raises(StoreConfigError, match="junk.db"):
            await store.ping()
    finally:
        await store.close()


def test_directory_path_is_config_error(tmp_path: Path) -> None:
    """A URL naming a directory is refused when the store is opened."""
    with pytest.raises(StoreConfigError, match="is a directory"):
        open_store(sqlite_url(tmp_path), StoreLimits())


async def test_version_1_file_is_migrated_with_a_fresh_ttl(tmp_path: Path) -> None:
    """A store file from before session TTLs keeps its data, counts it in the tenant's usage and dates it now."""
    import sqlite3

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE session_entries (tenant TEXT NOT NULL, session_id TEXT NOT NULL, key TEXT NOT NULL,"
        " value TEXT NOT NULL, value_bytes INTEGER NOT NULL, charged_bytes INTEGER NOT NULL,"
        " PRIMARY KEY (tenant, session_id, key)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO session_entries VALUES ('acme', 's1', 'k', '42', 2, 3)")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    now = [1000.0]
    store = open_store(sqlite_url(path), StoreLimits(session_ttl_seconds=100), lambda: now[0])
    try:
        assert await store.get_all("acme", "s1") == {"k": "42"}
        assert await store.usage("acme") == (3, 1)
        now[0] += 101
        assert await store.expire() == 1
        now[0] -= 101
        assert await store.get_all("acme", "s1") == {}
    finally:
        await store.close()


async def test_version_3_counters_are_charged_after_migration(tmp_path: Path) -> None:
    """Run failure counters of a version 3 file (charged nothing then) are charged to their tenant's
    bytes as run_counter_bytes says, and keep counting."""
    import sqlite3

    from service.stores import RunIncrement
    from service.stores.limits import run_counter_bytes

    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE run_failures (tenant TEXT NOT NULL, session_id TEXT NOT NULL, run_id TEXT NOT NULL,"
        " tool TEXT NOT NULL, failures INTEGER NOT NULL, block_reason TEXT, expires_at REAL NOT NULL,"
        " PRIMARY KEY (tenant, session_id, run_id, tool)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO run_failures VALUES ('acme', 's1', 'r1', 'fetch', 2, 'gone: ü', 5000.0)")
    conn.execute("PRAGMA user_version=3")
    conn.commit()
    conn.close()
    store = open_store(sqlite_url(path), StoreLimits(session_ttl_seconds=100), lambda: 1000.0)
    try:
        assert await store.usage("acme") == (run_counter_bytes("s1", "r1", "fetch", "gone: ü"), 0)
        [after] = await store.add_run_failures([RunIncrement("acme", "s1", "r1", {"fetch": 1})])
        assert after is not None and after.failures == {"fetch": 3} and after.blocked == {"fetch": "gone: ü"}
    finally:
        await store.close()
