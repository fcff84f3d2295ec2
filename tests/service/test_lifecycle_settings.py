"""Settings: loopback-only without keys, unknown keys refused by name, precedence flag > env > file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from service.errors import ConfigError
from service.settings import Settings
from service.settings_load import load_settings


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "codemode.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_need_no_file_or_environment():
    """With no file and no environment the defaults load and bind loopback."""
    s = load_settings(environ={})
    assert s.host == "127.0.0.1"
    assert s.timeout_ms == 10000 and s.max_parked_cells == 1024 and s.cell_ttl_seconds == 900


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


@pytest.mark.parametrize(
    "text,name",
    [
        ("[limits]\ntimeout = 1000\n", "timeout"),
        ("[bogus]\nx = 1\n", "bogus"),
        ('[[api_keys]]\nkey = "k"\ntennant = "a"\n', "tennant"),
        ("[tools]\nplugin = []\n", "plugin"),
    ],
)
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


def test_unknown_environment_variable_gets_a_did_you_mean_hint():
    """A misspelt CODEMODE_ variable is refused with the closest real one; an unrelated one gets no guess."""
    with pytest.raises(ConfigError, match=r"CODEMODE_MAX_PARKED_CELL; did you mean CODEMODE_MAX_PARKED_CELLS\?"):
        load_settings(environ={"CODEMODE_MAX_PARKED_CELL": "5"})
    with pytest.raises(ConfigError) as info:
        load_settings(environ={"CODEMODE_NOT_A_SETTING": "1"})
    assert "CODEMODE_NOT_A_SETTING" in str(info.value) and "did you mean" not in str(info.value)


def test_structured_settings_are_not_environment_variables():
    """Keys, tools and MCP servers come from the file only; their would-be variables are refused."""
    for name in ("CODEMODE_API_KEYS", "CODEMODE_TOOLS", "CODEMODE_MCP_SERVERS"):
        with pytest.raises(ConfigError, match=name):
            load_settings(environ={name: "[]"})


@pytest.mark.parametrize(
    "text,hint",
    [
        ("[limits]\ntimeout = 1000\n", "limits.timeout; did you mean limits.timeout_ms?"),
        ("[limits]\nworkers = 2\n", "limits.workers; did you mean workers.workers?"),  # right key, wrong table
        ("timeout_ms = 2000\n", "timeout_ms; did you mean limits.timeout_ms?"),
        ("[limitz]\ntimeout_ms = 2000\n", "limitz; did you mean limits?"),
        ("[tools]\nplugin = []\n", "tools.plugin; did you mean tools.plugins?"),
        ('[[api_keys]]\nkey = "k"\ntennant = "a"\n', "api_keys[0].tennant; did you mean api_keys[0].tenant?"),
        ('[mcp.servers.lab]\ncomand = "x"\n', "mcp.servers.lab.comand; did you mean mcp.servers.lab.command?"),
    ],
)
def test_unknown_toml_key_gets_a_did_you_mean_hint(tmp_path, text, hint):
    """An unknown file key is refused naming its full path and the setting it most likely meant."""
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_path=_toml(tmp_path, text))
    assert str(info.value).endswith(f"unknown config key {hint}")


@pytest.mark.parametrize(
    "table,name,file_value,env_value,flag_value,expected",
    [
        (
            "server",
            "host",
            '"127.0.0.2"',
            "127.0.0.3",
            "127.0.0.4",
            ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"],
        ),
        ("server", "metrics_require_key", "true", "false", True, [False, True, False, True]),
        ("workers", "workers", "2", "3", 5, [4, 2, 3, 5]),
    ],
)
def test_each_source_overrides_the_ones_below(tmp_path, table, name, file_value, env_value, flag_value, expected):
    """For a string, a boolean and an integer: default, then file over it, environment over that, flag over all."""
    path = _toml(tmp_path, f"[{table}]\n{name} = {file_value}\n")
    env = {"CODEMODE_" + name.upper(): env_value}
    layered = [
        load_settings(environ={}),
        load_settings(environ={}, config_path=path),
        load_settings(environ=env, config_path=path),
        load_settings(environ=env, config_path=path, overrides={name: flag_value}),
    ]
    assert [getattr(s, name) for s in layered] == expected


def test_an_unset_flag_leaves_the_lower_sources_in_charge(tmp_path):
    """A flag passed as None (argparse's "not given") does not override the environment."""
    assert load_settings(environ={"CODEMODE_PORT": "9001"}, overrides={"port": None}).port == 9001


@pytest.mark.parametrize(
    "source,message",
    [
        (
            {"environ": {"CODEMODE_TIMEOUT_MS": "50"}},
            "environment variable CODEMODE_TIMEOUT_MS = '50' is not allowed: it must be an integer in 100..60000",
        ),
        (
            {"text": "[limits]\nmax_parked_cells = 70000\n"},
            "config limits.max_parked_cells = 70000 is not allowed: it must be an integer in 1..65536",
        ),
        (
            {"text": "[server]\nport = true\n"},
            "config server.port = True is not allowed: it must be an integer in 0..65535",
        ),
        ({"overrides": {"port": 70000}}, "flag --port = 70000 is not allowed: it must be an integer in 0..65535"),
        ({"environ": {"CODEMODE_METRICS_REQUIRE_KEY": "maybe"}}, "must be true or false"),
    ],
)
def test_bad_value_is_refused_naming_the_key_and_its_range(tmp_path, source, message):
    """An out-of-range or mistyped value names where it came from and what is allowed."""
    kwargs = {"environ": source.get("environ", {}), "overrides": source.get("overrides")}
    if "text" in source:
        kwargs["config_path"] = _toml(tmp_path, source["text"])
    with pytest.raises(ConfigError) as info:
        load_settings(**kwargs)
    assert message in str(info.value)


def test_bad_file_value_is_refused_even_when_a_higher_source_overrides_it(tmp_path):
    """Each source is checked on its own: a broken file stops start-up although the flag would win."""
    path = _toml(tmp_path, '[limits]\ntimeout_ms = "soon"\n')
    with pytest.raises(ConfigError, match=r"config limits\.timeout_ms = 'soon'"):
        load_settings(environ={}, config_path=path, overrides={"timeout_ms": 500})


def test_settings_are_immutable_and_replace_makes_a_checked_copy():
    """Assignment is refused; replace() returns a validated copy and leaves the original as it was."""
    s = load_settings(environ={})
    with pytest.raises(ValidationError, match="frozen"):
        s.timeout_ms = 500
    copy = s.replace(timeout_ms=500)
    assert (s.timeout_ms, copy.timeout_ms) == (10000, 500)
    with pytest.raises(ConfigError, match=r"timeout_ms = 5 is not allowed: it must be an integer in 100\.\.60000"):
        s.replace(timeout_ms=5)
    with pytest.raises(ConfigError, match=r"unknown setting timeout; did you mean timeout_ms\?"):
        s.replace(timeout=500)


def test_settings_built_in_code_read_no_environment(monkeypatch):
    """Only load_settings reads CODEMODE_*; Settings(...) is its arguments over the defaults."""
    monkeypatch.setenv("CODEMODE_WORKERS", "7")
    monkeypatch.setenv("CODEMODE_NOT_A_SETTING", "1")
    assert Settings(port=9000).workers == 4
    assert load_settings(environ={"CODEMODE_WORKERS": "7"}).workers == 7


@pytest.mark.slow
def test_every_scalar_is_reachable_from_its_table_and_its_variable(tmp_path):
    """Each scalar field is read from [its table] in the file and from CODEMODE_<NAME>."""
    for name, info in Settings.model_fields.items():
        extra = info.json_schema_extra
        if not (isinstance(extra, dict) and "table" in extra):
            continue
        value = info.default
        literal = ("true" if value else "false") if isinstance(value, bool) else repr(value).replace("'", '"')
        if isinstance(value, tuple):  # a list setting: a TOML array, comma-separated in the environment
            literal = "[" + ", ".join(f'"{item}"' for item in value) + "]"
        path = _toml(tmp_path, f"[{extra['table']}]\n{name} = {literal}\n")
        assert getattr(load_settings(environ={}, config_path=path), name) == value, name
        raw = str(value).lower() if isinstance(value, bool) else str(value)
        if isinstance(value, tuple):
            raw = ",".join(value)
        assert getattr(load_settings(environ={"CODEMODE_" + name.upper(): raw}), name) == value, name
