"""Redis-specific behaviour: surviving server restarts (AOF) and reporting outages."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from service.mcp_server.request_state import SharedLedger
from service.stores import StoreLimits, StoreUnavailableError, open_store

from .conftest import free_port, start_redis_server, stop_redis_server

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_survives_server_restart_and_kill(tmp_path: Path) -> None:
    """Commits survive a clean restart and a SIGKILL (appendfsync always); clients reconnect."""
    port, server = start_redis_server(tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    store = open_store(url, StoreLimits())
    try:
        await store.commit("acme", "s1", {"a": '"first"'}, ())
        stop_redis_server(server)
        port, server = start_redis_server(tmp_path, port=port)
        assert await store.get_all("acme", "s1") == {"a": '"first"'}

        await store.commit("acme", "s1", {"b": "[true]"}, ())
        stop_redis_server(server, hard=True)
        port, server = start_redis_server(tmp_path, port=port)
        fresh = open_store(url, StoreLimits())
        try:
            assert await fresh.get_all("acme", "s1") == {"a": '"first"', "b": "[true]"}
        finally:
            await fresh.close()
        assert await store.get_all("acme", "s1") == {"a": '"first"', "b": "[true]"}
    finally:
        await store.close()
        stop_redis_server(server)


async def test_unreachable_server_is_unavailable() -> None:
    """With nothing listening, ping and reads raise StoreUnavailableError (code store_unavailable)."""
    store = open_store(f"redis://127.0.0.1:{free_port()}/0", StoreLimits())
    try:
        with pytest.raises(StoreUnavailableError) as caught:
            await store.ping()
        assert caught.value.code == "store_unavailable"
        with pytest.raises(StoreUnavailableError):
            await store.commit("t", "s", {"k": "1"}, ())
    finally:
        await store.close()


async def test_database_number_separates_data(redis_url: str) -> None:
    """Different /DB numbers in the URL are different namespaces."""
    base = redis_url.rsplit("/", 1)[0]
    first = open_store(f"{base}/1", StoreLimits())
    second = open_store(f"{base}/2", StoreLimits())
    try:
        await first.delete_session("t", "db-test")
        await first.commit("t", "db-test", {"k": "1"}, ())
        assert await second.get_all("t", "db-test") == {}
    finally:
        await first.delete_session("t", "db-test")
        await first.close()
        await second.close()


async def test_replicas_share_one_secret_and_each_claim_succeeds_once(redis_url: str) -> None:
    """Two stores on one server (two replicas) read the same secret, made by the first that asks; a claim
    succeeds for one of them only, and again once it expired (the MCP facade's approval rounds)."""
    base = redis_url.rsplit("/", 1)[0]
    first, second = open_store(f"{base}/3", StoreLimits()), open_store(f"{base}/3", StoreLimits())
    try:
        assert isinstance(first, SharedLedger)
        secret = await first.shared_secret("test-secret")
        assert len(secret) == 32 and await second.shared_secret("test-secret") == secret
        assert await second.shared_secret("another-secret") != secret
        soon = int(time.time() * 1000) + 60_000
        assert [await first.first_use("n1", soon), await second.first_use("n1", soon)] == [True, False]
        assert await second.first_use("n2", int(time.time() * 1000) + 50) is True
        await anyio.sleep(0.2)
        assert await first.first_use("n2", soon) is True  # the first claim expired with its state
    finally:
        await first.close()
        await second.close()
