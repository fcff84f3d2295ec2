"""Reading the settings: defaults < TOML file < environment < CLI flags, each source checked alone.

``load_settings`` layers the sources over ``Settings``' defaults.  Unknown keys, unknown ``CODEMODE_*``
variables and bad values raise ``ConfigError`` naming the key (with a "did you mean" hint, or the
allowed range), so a typo stops the service at start instead of being ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from pydantic.fields import FieldInfo

from .errors import ConfigError, McpConfigError
from .settings import (
    API_KEY_VARIABLE,
    CONFIG_VARIABLE,
    ENV_PREFIX,
    URL_VARIABLE,
    ApiKey,
    Settings,
    ToolSettings,
    close_hint,
    validated,
)
from .settings_mcp import McpServerConfig

# -- where each field lives ---------------------------------------------------------------------


def _toml_path(name: str, info: FieldInfo) -> tuple[str, ...]:
    extra = info.json_schema_extra
    assert isinstance(extra, dict), name
    if "table" in extra:
        return (str(extra["table"]), name)
    return tuple(str(extra["path"]).split("."))


TOML_PATHS: dict[tuple[str, ...], str] = {_toml_path(n, i): n for n, i in Settings.model_fields.items()}
# Scalars (declared with setting()) are also environment variables; structured sections are file only.
ENV_NAMES: dict[str, str] = {
    ENV_PREFIX + name.upper(): name
    for name, info in Settings.model_fields.items()
    if isinstance(info.json_schema_extra, dict) and "table" in info.json_schema_extra
}


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


# -- sources ------------------------------------------------------------------------------------


class _Environment:
    """``CODEMODE_<NAME>`` variables of the given environment; any other ``CODEMODE_*`` is a typo.

    Every variable is a scalar setting (``setting()``), handed to validation as its text: pydantic
    turns ``"8000"`` into an int and ``"true"`` into a bool, and a list is ``CommaList``'s "a,b"."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.values: dict[str, str] = {}
        for key, value in environ.items():
            upper = key.upper()
            if upper in ENV_NAMES:
                self.values[ENV_NAMES[upper]] = value
            elif upper.startswith(ENV_PREFIX) and upper not in (CONFIG_VARIABLE, API_KEY_VARIABLE, URL_VARIABLE):
                suffix = upper[len(ENV_PREFIX) :]
                hint = close_hint(suffix, {n[len(ENV_PREFIX) :]: n for n in ENV_NAMES})
                raise ConfigError(f"unknown environment variable {key}{hint}", need_param=key)

    def __call__(self) -> dict[str, object]:
        return dict(self.values)


class _ConfigFile:
    """The TOML file.  Its tables group flat settings (``[limits] timeout_ms`` is ``settings.timeout_ms``),
    a shape the library's TOML source does not map, so this source reads each field at its TOML path."""

    def __init__(self, path: str) -> None:
        self.values = _file_values(_read_toml(path))

    def __call__(self) -> dict[str, object]:
        return dict(self.values)


def _read_toml(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist", need_param="config") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}", need_param="config") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}", need_param="config") from None


def _file_values(data: Mapping[str, object]) -> dict[str, object]:
    """Field name -> raw value from the file's tables; a key no field lives at is refused with a hint."""
    values: dict[str, object] = {}

    def walk(table: Mapping[str, object], prefix: tuple[str, ...]) -> None:
        for key, value in table.items():
            path = prefix + (key,)
            if path in TOML_PATHS:
                values[TOML_PATHS[path]] = value
            elif not any(p[: len(path)] == path for p in TOML_PATHS):
                raise ConfigError(f"unknown config key {_dotted(path)}{_file_hint(path)}", need_param=_dotted(path))
            elif not isinstance(value, dict):
                raise ConfigError(
                    f"config {_dotted(path)} must be a table ([{_dotted(path)}])", need_param=_dotted(path)
                )
            else:
                walk(value, path)

    walk(data, ())
    if "tools" in values:
        values["tools"] = _table("tools", values["tools"], [f.name for f in fields(ToolSettings)])
    if "api_keys" in values:
        keys = values["api_keys"]
        if not isinstance(keys, list):
            raise ConfigError("config api_keys must be an array of tables ([[api_keys]])", need_param="api_keys")
        known = [f.name for f in fields(ApiKey)]
        values["api_keys"] = [_table(f"api_keys[{i}]", entry, known) for i, entry in enumerate(keys)]
    if "mcp_servers" in values:
        values["mcp_servers"] = _mcp_servers(values["mcp_servers"])
    return values


def _file_hint(path: tuple[str, ...]) -> str:
    """A known setting of that name in another table, else the closest key of this table, else any."""
    *prefix, key = path
    leaves = {p[-1]: _dotted(p) for p in TOML_PATHS}
    if key in leaves:
        return f"; did you mean {leaves[key]}?"
    depth = len(prefix)
    siblings = {p[depth]: _dotted(p[: depth + 1]) for p in TOML_PATHS if list(p[:depth]) == prefix and len(p) > depth}
    return close_hint(key, siblings) or close_hint(key, leaves)


def _table(where: str, value: object, known: list[str]) -> dict[str, Any]:
    # Any: the entries are a TOML table's values, checked by the dataclass they are given to.
    if not isinstance(value, dict):
        raise ConfigError(f"config {where} must be a table", need_param=where)
    for key in value:
        if key not in known:
            hint = close_hint(key, {k: f"{where}.{k}" for k in known})
            raise ConfigError(f"unknown config key {where}.{key}{hint}", need_param=f"{where}.{key}")
    return value


def _mcp_servers(servers: object) -> tuple[McpServerConfig, ...]:
    if not isinstance(servers, dict):
        raise ConfigError("config mcp.servers must hold [mcp.servers.<name>] tables", need_param="mcp.servers")
    known = [f.name for f in fields(McpServerConfig) if f.name != "name"]
    built = []
    for name, entry in servers.items():
        where = f"mcp.servers.{name}"
        try:
            built.append(McpServerConfig(name=name, **_table(where, entry, known)).validate())
        except McpConfigError as exc:
            raise ConfigError(f"config {where}: {exc.message}", need_param=where) from None
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the MCP config type raises its own error kinds
            raise ConfigError(f"config {where}: {exc}", need_param=where) from None
    return tuple(built)


# -- the layers ---------------------------------------------------------------------------------


def load_settings(
    *,
    environ: Mapping[str, str] | None = None,
    config_path: str | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Build the settings: defaults < config file < environment < ``overrides`` (CLI flags; None = unset)."""
    env = os.environ if environ is None else environ
    path = config_path or env.get(CONFIG_VARIABLE)
    paths = {name: _dotted(p) for p, name in TOML_PATHS.items()}
    layers: list[tuple[dict[str, object], Callable[[str], str]]] = [
        (_ConfigFile(path)() if path else {}, lambda name: f"config {paths[name]}"),
        (_Environment(env)(), lambda name: f"environment variable {ENV_PREFIX}{name.upper()}"),
        (
            {k: v for k, v in (overrides or {}).items() if v is not None},
            lambda name: f"flag --{name.replace('_', '-')}",
        ),
    ]
    merged: dict[str, object] = {}
    for values, where in layers:
        # Each source is validated alone, so a bad value is refused even where a higher source overrides it.
        validated(values, where)
        merged.update(values)
    return validated(merged, lambda name: f"setting {name}").check()
