"""Store URL parsing in open_store."""

from __future__ import annotations

import pytest

from service.stores import StoreConfigError, StoreLimits, open_store, sqlite_url
from service.stores.redis_store import RedisSessionStore
from service.stores.sqlite import SqliteSessionStore


@pytest.mark.parametrize(
    "url",
    [
        "postgres://db/x",
        "",
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:relative.db",
        "redis://",
        "redis://127.0.0.1:notaport/0",
        "redis://127.0.0.1:6379/zero",
        "redis://127.0.0.1:6379/0?timeout=1",
        "rediss://127.0.0.1:6379/0",
    ],
)
def test_bad_urls_are_config_errors(url: str) -> None:
    """Unsupported or malformed URLs raise StoreConfigError naming the accepted forms."""
    with pytest.raises(StoreConfigError) as caught:
        open_store(url, StoreLimits())
    assert caught.value.code == "store_config"
    assert "redis://HOST:PORT/DB" in str(caught.value)


def test_bad_url_message_names_url() -> None:
    """The message quotes the rejected URL."""
    with pytest.raises(StoreConfigError, match="mysql://somewhere"):
        open_store("mysql://somewhere", StoreLimits())


def test_credentials_are_redacted() -> None:
    """A password in a rejected URL never appears in the message."""
    with pytest.raises(StoreConfigError) as caught:
        open_store("redis://user:s3cret@127.0.0.1:6379/x", StoreLimits())
    assert "s3cret" not in str(caught.value)


def test_sqlite_url_round_trips_absolute_path(tmp_path) -> None:
    """sqlite_url(absolute path) opens exactly that file (four slashes)."""
    url = sqlite_url(tmp_path / "x.db")
    assert url.startswith("sqlite:////")
    store = open_store(url, StoreLimits())
    assert isinstance(store, SqliteSessionStore)
    assert store.path == tmp_path / "x.db"


def test_redis_url_selects_redis() -> None:
    """A redis:// URL gives the Redis backend without connecting yet."""
    assert isinstance(open_store("redis://127.0.0.1:6379/3", StoreLimits()), RedisSessionStore)
    assert isinstance(open_store("redis://localhost", StoreLimits()), RedisSessionStore)
