"""Load tool plugins from module paths (settings) and the `codemode.plugins` entry-point group."""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

from service.tools.errors import ToolConfigError
from service.tools.hooks import Hook
from service.tools.plugin import ToolRegistry, ToolSpec

__all__ = ["ENTRY_POINT_GROUP", "LoadedPlugins", "load_plugins"]

ENTRY_POINT_GROUP = "codemode.plugins"


@dataclass(frozen=True)
class LoadedPlugins:
    """Everything the configured plugins registered, in load order."""

    tools: tuple[ToolSpec, ...]
    hooks: tuple[Hook, ...]
    plugin_ids: tuple[str, ...]


def load_plugins(
    module_paths: Sequence[str] = (), *, entry_points: bool = True, group: str = ENTRY_POINT_GROUP
) -> LoadedPlugins:
    """Import each plugin and call its register(registry); errors name the plugin and the fix.

    A module path is `package.module` (its `register` function is used) or `package.module:function`.
    Entry points in `group` may point at a module or at a register function; the entry-point name is
    the plugin id unless the module sets PLUGIN_ID. A module listed both ways is loaded once.
    """
    if isinstance(module_paths, str):
        raise ToolConfigError("tools.plugins must be a list of module paths, not a single string")
    registries: list[ToolRegistry] = []
    loaded: set[str] = set()
    owners: dict[str, str] = {}
    for index, path in enumerate(module_paths):
        if not isinstance(path, str) or not path.strip():
            raise ToolConfigError(f'tools.plugins[{index}]: must be a module path like "service.demo.shipping"')
        module_name, _, attr = path.strip().partition(":")
        module = _import(module_name, f"tools.plugins[{index}] ({path!r})")
        register = _register_fn(module, attr, f"plugin module {path!r}")
        plugin_id = _plugin_id(module, default=module_name.rsplit(".", 1)[-1])
        _record_owner(owners, plugin_id, path)
        loaded.add(f"{module_name}:{attr or 'register'}")
        registries.append(_run(register, plugin_id, f"plugin {path!r}"))
    if entry_points:
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: (e.name, e.value)):
            where = f"entry point {ep.name!r} = {ep.value!r} (group {group})"
            module_name, _, attr = ep.value.partition(":")
            key = f"{module_name.strip()}:{attr.strip() or 'register'}"
            if key in loaded:
                continue
            try:
                target = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure becomes a config error
                raise ToolConfigError(
                    f"{where}: cannot load it ({type(exc).__name__}: {exc}); fix or uninstall that package"
                ) from None
            if isinstance(target, ModuleType):
                register = _register_fn(target, "", where)
                plugin_id = _plugin_id(target, default=ep.name)
            elif callable(target):
                register = target
                plugin_id = _plugin_id(importlib.import_module(module_name.strip()), default=ep.name)
            else:
                raise ToolConfigError(f"{where}: must point at a module or a register(registry) function")
            _record_owner(owners, plugin_id, where)
            loaded.add(key)
            registries.append(_run(register, plugin_id, where))
    return LoadedPlugins(
        tools=tuple(t for r in registries for t in r.tools),
        hooks=tuple(h for r in registries for h in r.hooks),
        plugin_ids=tuple(r.plugin_id for r in registries),
    )


def _import(module_name: str, where: str) -> ModuleType:
    try:
        return importlib.import_module(module_name.strip())
    except ModuleNotFoundError as exc:
        raise ToolConfigError(
            f"{where}: module {exc.name!r} not found; check the spelling and that its package is installed "
            "(or on PYTHONPATH)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - the plugin's own import-time error
        raise ToolConfigError(f"{where}: importing it failed with {type(exc).__name__}: {exc}") from None


def _register_fn(module: ModuleType, attr: str, where: str) -> Callable[[ToolRegistry], object]:
    name = attr.strip() or "register"
    fn: object = getattr(module, name, None)
    if not callable(fn):
        raise ToolConfigError(
            f"{where}: has no {name}(registry) function; define one that calls registry.add_tool(...)"
        )
    return fn


def _plugin_id(module: ModuleType, *, default: str) -> str:
    value = getattr(module, "PLUGIN_ID", None)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ToolConfigError(f"plugin module {module.__name__!r}: PLUGIN_ID must be a string")
    return value


def _record_owner(owners: dict[str, str], plugin_id: str, where: str) -> None:
    if plugin_id in owners:
        raise ToolConfigError(
            f"plugin id {plugin_id!r} is used by both {owners[plugin_id]} and {where}; "
            "set a distinct PLUGIN_ID in one of them"
        )
    owners[plugin_id] = where


def _run(register: Callable[[ToolRegistry], object], plugin_id: str, where: str) -> ToolRegistry:
    try:
        registry = ToolRegistry(plugin_id)
        register(registry)
    except ToolConfigError as exc:
        raise ToolConfigError(f"{where}: {exc.message}") from None
    except Exception as exc:  # noqa: BLE001 - report the plugin's bug at start-up, naming it
        raise ToolConfigError(f"{where}: register() failed with {type(exc).__name__}: {exc}") from None
    return registry
