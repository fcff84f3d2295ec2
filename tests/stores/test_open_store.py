"""Store URL parsing in open_store."""

from __future__ import annotations

import pytest

from service.errors import ConfigError
from service.settings import Settings
from service.stores import RedisHA, StoreConfigError, StoreLimits, open_store, sqlite_url
from service.stores.redis_store import RedisSessionStore
from service.stores.redis_target import redis_target
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


def test_sentinel_settings_name_the_primary_and_keep_the_url_credentials() -> None:
    """With Sentinels the URL gives the credentials and database; each Sentinel is HOST[:PORT] (26379 by
    default, IPv6 in brackets); messages name the primary and the Sentinels, never the password."""
    ha = RedisHA(sentinels=("s1:26380", "[::1]:26381", "s3"), master_name="main", wait_replicas=1)
    target = redis_target("redis://:s3cret@main/2", ha)
    assert target.sentinels == (("s1", 26380), ("::1", 26381), ("s3", 26379))
    assert (target.db, target.password, target.master_name, target.wait_replicas) == (2, "s3cret", "main", 1)
    assert target.where == "the primary of 'main' (Sentinels s1:26380,[::1]:26381,s3:26379) db 2"
    assert redis_target("redis://h:7000/1").where == "redis://h:7000/1"


@pytest.mark.parametrize(
    ("ha", "named"),
    [
        (RedisHA(sentinels=("s1:port",)), "redis_sentinels"),
        (RedisHA(sentinels=("user@s1:26379",)), "redis_sentinels"),
        (RedisHA(sentinels=("s1:26379/x",)), "redis_sentinels"),
        (RedisHA(wait_replicas=17), "redis_wait_replicas"),
        (RedisHA(sentinels=("s1",), master_name=""), "redis_master_name"),
    ],
)
def test_bad_sentinel_settings_are_refused_naming_the_setting(ha: RedisHA, named: str) -> None:
    with pytest.raises(StoreConfigError, match=named):
        redis_target("redis://mymaster/0", ha)


def test_sentinels_need_a_redis_store_url(tmp_path) -> None:
    """redis_sentinels beside a SQLite store is refused at start, naming store_url."""
    with pytest.raises(ConfigError) as caught:
        Settings(redis_sentinels=("s1:26379",), data_dir=str(tmp_path)).check()
    assert caught.value.need_param == "store_url"
    Settings(redis_sentinels=("s1:26379",), store_url="redis://mymaster/0").check()
