"""Plugin loading from module paths and the `codemode.plugins` entry-point group."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from service.tools.errors import ToolConfigError
from service.tools.loader import load_plugins

PLUGIN_SOURCE = """
from service.tools import ToolResult

{extra}

def register(registry):
    @registry.tool(name="{tool}", description="demo tool", input_schema={{"type": "object"}})
    async def run(call_id, params, ctx):
        return ToolResult(details={{"plugin": registry.plugin_id}})
    registry.add_hook(after=lambda call, result: None)
"""


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write plugin modules into a fresh sys.path entry; returns a writer giving unique module names."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(tool: str = "hello", *, extra: str = "", source: str | None = None) -> str:
        name = f"cm_plugin_{uuid.uuid4().hex[:10]}"
        text = source if source is not None else PLUGIN_SOURCE.format(tool=tool, extra=extra)
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def _dist_info(root: Path, entry_points: dict[str, str]) -> None:
    dist = root / f"cm_demo_{uuid.uuid4().hex[:8]}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.name.split('-')[0]}\nVersion: 0.1\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[codemode.plugins]\n{lines}\n")


def test_load_by_module_path(plugin_dir) -> None:
    """A module path is imported, its register() called; plugin id = last module name part."""
    name = plugin_dir("hello")
    loaded = load_plugins([name], entry_points=False)
    assert [t.name for t in loaded.tools] == ["hello"]
    assert loaded.plugin_ids == (name,)
    assert loaded.tools[0].tool_id == f"{name}.hello" and loaded.tools[0].source == "plugin"
    assert len(loaded.hooks) == 1 and loaded.hooks[0].plugin_id == name


def test_plugin_id_from_module_attribute(plugin_dir) -> None:
    """PLUGIN_ID in the module overrides the derived id."""
    name = plugin_dir("hello", extra='PLUGIN_ID = "greeter"')
    loaded = load_plugins([name], entry_points=False)
    assert loaded.plugin_ids == ("greeter",) and loaded.tools[0].tool_id == "greeter.hello"


def test_module_colon_function(plugin_dir) -> None:
    """`module:function` calls that function instead of register()."""
    name = plugin_dir(
        source="""
        def setup(registry):
            registry.add_tool(name="other", description="", execute=lambda c, p, x: 1)
    """
    )
    assert [t.name for t in load_plugins([f"{name}:setup"], entry_points=False).tools] == ["other"]


def test_load_by_entry_point(plugin_dir, tmp_path) -> None:
    """Entry points in `codemode.plugins` load; the entry-point name is the plugin id."""
    module_ep = plugin_dir("from_module")
    function_ep = plugin_dir("from_function")
    _dist_info(tmp_path, {"modplug": module_ep, "fnplug": f"{function_ep}:register"})
    loaded = load_plugins([])
    ids = dict(zip(loaded.plugin_ids, [t.name for t in loaded.tools], strict=True))
    assert ids["modplug"] == "from_module" and ids["fnplug"] == "from_function"


def test_module_listed_twice_loads_once(plugin_dir, tmp_path) -> None:
    """A plugin named in settings and as an entry point is loaded once."""
    name = plugin_dir("once")
    _dist_info(tmp_path, {"dupe": name})
    loaded = load_plugins([name])
    assert [t.name for t in loaded.tools].count("once") == 1


def test_example_plugin_loads() -> None:
    """The shipped example plugin loads by module path with its five tools."""
    loaded = load_plugins(["service.demo.shipping"], entry_points=False)
    assert loaded.plugin_ids == ("shipping",)
    assert {t.name for t in loaded.tools} == {
        "quote_shipping",
        "track_package",
        "list_carriers",
        "shipments",
        "cancel_shipment",
    }


def test_missing_module_names_it(plugin_dir) -> None:
    """An unknown module path says which entry failed and what to check."""
    with pytest.raises(ToolConfigError, match=r"tools.plugins\[0\] .*module 'no_such_plugin_xyz' not found"):
        load_plugins(["no_such_plugin_xyz"], entry_points=False)


def test_module_without_register(plugin_dir) -> None:
    """A module with no register() is a config error explaining what to define."""
    name = plugin_dir(source="X = 1\n")
    with pytest.raises(ToolConfigError, match=r"has no register\(registry\) function"):
        load_plugins([name], entry_points=False)


def test_register_failure_names_plugin(plugin_dir) -> None:
    """An exception in register() is reported with the plugin and the exception."""
    name = plugin_dir(source="def register(registry):\n    raise RuntimeError('boom')\n")
    with pytest.raises(ToolConfigError, match=rf"plugin '{name}': register\(\) failed with RuntimeError: boom"):
        load_plugins([name], entry_points=False)


def test_bad_tool_definition_names_plugin_and_tool(plugin_dir) -> None:
    """A bad ToolSpec field is reported with the plugin and tool names."""
    name = plugin_dir(
        source="""
        def register(registry):
            registry.add_tool(name="bad", description="", execute=lambda c, p, x: 1, input_schema="nope")
    """
    )
    with pytest.raises(ToolConfigError, match=r'tool "bad": input_schema must be a JSON Schema dict'):
        load_plugins([name], entry_points=False)


def test_import_error_in_plugin(plugin_dir) -> None:
    """A plugin whose import raises is reported, not crashing start-up with a traceback."""
    name = plugin_dir(source="raise ValueError('bad config')\n")
    with pytest.raises(ToolConfigError, match="importing it failed with ValueError: bad config"):
        load_plugins([name], entry_points=False)


def test_duplicate_plugin_ids(plugin_dir) -> None:
    """Two modules claiming the same plugin id are refused."""
    a = plugin_dir("a", extra='PLUGIN_ID = "same"')
    b = plugin_dir("b", extra='PLUGIN_ID = "same"')
    with pytest.raises(ToolConfigError, match="plugin id 'same' is used by both"):
        load_plugins([a, b], entry_points=False)


def test_broken_entry_point(tmp_path, monkeypatch) -> None:
    """An entry point that cannot be imported names the entry point and the fix."""
    monkeypatch.syspath_prepend(str(tmp_path))
    _dist_info(tmp_path, {"ghost": "cm_missing_module_xyz"})
    with pytest.raises(ToolConfigError, match=r"entry point 'ghost' .*cannot load it"):
        load_plugins([])
