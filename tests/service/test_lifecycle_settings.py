"""Settings: loopback-only without keys, unknown keys refused by name, precedence flag > env > file."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.errors import ConfigError
from service.settings import load_settings


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "codemode.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_need_no_file_or_environment():
    """With no file and no environment the defaults load and bind loopback."""
    s = load_settings(environ={})
    assert s.host == "127.0.0.1"
    assert s.timeout_ms == 10000 and s.max_parked_cells == 64 and s.cell_ttl_seconds == 900


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_non_loopback_bind_without_keys_is_refused(host):
    """Binding a non-loopback address without API keys raises ConfigError."""
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, overrides={"host": host})
    assert "host" in str(info.value) or host in str(info.value)


def test_non_loopback_bind_with_keys_is_allowed(tmp_path):
    """Binding 0.0.0.0 is accepted once API keys are configured."""
    path = _toml(tmp_path, '[[api_keys]]\nkey = "ck_1"\ntenant = "acme"\n')
    s = load_settings(environ={}, config_path=path, overrides={"host": "0.0.0.0"})
    assert s.host == "0.0.0.0"
    assert [(k.key, k.tenant) for k in s.api_keys] == [("ck_1", "acme")]


def test_unknown_environment_variable_is_refused_by_name():
    """An unknown CODEMODE_ variable stops start-up with an error naming it."""
    with pytest.raises(ConfigError) as info:
        load_settings(environ={"CODEMODE_TIMEOUTMS": "5"})
    assert "CODEMODE_TIMEOUTMS" in str(info.value)


def test_bad_environment_value_is_refused_by_name():
    """A non-integer or out-of-range CODEMODE_TIMEOUT_MS names the variable."""
    for raw in ("abc", "5"):
        with pytest.raises(ConfigError) as info:
            load_settings(environ={"CODEMODE_TIMEOUT_MS": raw})
        assert "TIMEOUT_MS" in str(info.value).upper()


@pytest.mark.parametrize("text,name", [
    ("[limits]\ntimeout = 1000\n", "timeout"),
    ("[bogus]\nx = 1\n", "bogus"),
    ("[[api_keys]]\nkey = \"k\"\ntennant = \"a\"\n", "tennant"),
    ("[tools]\nplugin = []\n", "plugin"),
])
def test_unknown_toml_key_is_refused_by_name(tmp_path, text, name):
    """An unknown key in the TOML file stops start-up with an error naming the key."""
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_path=_toml(tmp_path, text))
    assert name in str(info.value)


def test_precedence_flag_over_environment_over_file_over_default(tmp_path):
    """timeout_ms comes from the flag, else the environment, else the file, else the default."""
    path = _toml(tmp_path, "[limits]\ntimeout_ms = 2000\ncell_ttl_seconds = 30\n")
    env = {"CODEMODE_TIMEOUT_MS": "3000"}
    assert load_settings(environ=env, config_path=path, overrides={"timeout_ms": 4000}).timeout_ms == 4000
    assert load_settings(environ=env, config_path=path).timeout_ms == 3000
    assert load_settings(environ={}, config_path=path).timeout_ms == 2000
    assert load_settings(environ={}).timeout_ms == 10000
    assert load_settings(environ=env, config_path=path).cell_ttl_seconds == 30


def test_config_path_from_environment(tmp_path):
    """CODEMODE_CONFIG names the TOML file when no path is given."""
    path = _toml(tmp_path, "[limits]\nmax_parked_cells = 3\n")
    assert load_settings(environ={"CODEMODE_CONFIG": path}).max_parked_cells == 3


def test_missing_config_file_is_refused():
    """A config path that does not exist raises ConfigError naming the file."""
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_path="/nonexistent/codemode.toml")
    assert "/nonexistent/codemode.toml" in str(info.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_bind_without_keys_is_allowed(host):
    """Loopback addresses need no API keys."""
    assert load_settings(environ={}, overrides={"host": host}).host == host
