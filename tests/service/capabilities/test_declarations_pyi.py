"""The Python declarations a Python cell reads (`tools/<name>.pyi`) type-check with the real mypy, strictly.

A Python cell lists a `.pyi` stub beside each tool's `.d.ts`; the stubs are written out as modules and
code that uses them the way a cell would must pass `mypy --strict`, while misuse (an unknown keyword, a
wrong literal, a missing required argument, a key the output does not have) must be rejected.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api_files.mcp_pyi import render_mcp_index_stub, render_mcp_server_stub
from service.api_files.model import McpServerDecl, McpToolDecl
from service.settings import ToolSettings
from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, run
from tests.mcp.conftest import SERVER_SCRIPT

#: A Python cell that lists the files under a prefix and reads every `.pyi` among them.
COLLECT = """
files = (await API.list('{prefix}'))['files']
out = {{}}
for f in files:
    if f['path'].endswith('.pyi'):
        out[f['path']] = (await API.read(f['path']))['content']
[[f['path'] for f in files], out]
"""
USAGE = """
from echo import echo
from list_carriers import list_carriers
from quote_shipping import quote_shipping
from shipments import shipments


async def usage() -> float:
    quote = await quote_shipping(origin="DE", destination="FR", weight_kg=2)
    price: float = quote["price"]
    echoed = await echo(x=1)
    carriers = await list_carriers()
    listed = await shipments(action="list")
    ids: list[str] = listed["shipments"]
    one = await shipments(action="status", shipment_id="S-1")
    found: bool = one["found"]
    return price + len([echoed, carriers, ids, found])
"""
MISUSE = """
from echo import echo
from quote_shipping import quote_shipping
from shipments import shipments


async def misuse() -> None:
    await echo(y=1)
    await quote_shipping(origin="DE", destination="FR")
    quote = await quote_shipping(origin="DE", destination="FR", weight_kg="2")
    quote["no_such_key"]
    (await shipments(action="list"))["found"]
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the shipping plugin and the test tools."""
    with make_client(tmp_path_factory.mktemp("pyi"), tools=ToolSettings(plugins=("service.demo.shipping",))) as c:
        yield c


@pytest.fixture(scope="module")
def stubs(shop: TestClient) -> tuple[list[str], dict[str, str]]:
    env = run(shop, COLLECT.format(prefix="tools"), language="python")
    assert env["status"] == "completed", env
    paths, files = env["value"]
    return paths, files


def mypy(directory: Path, source: str) -> subprocess.CompletedProcess[str]:
    (directory / "usage.py").write_text(source)
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", "/dev/null", "usage.py"]
    return subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=300)


def write_stubs(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir()
    for path, content in files.items():
        (directory / path.removeprefix("tools/")).write_text(content)


def test_python_cells_list_a_stub_beside_each_declaration(stubs, shop):
    """Each tools/<name>.d.ts has a tools/<name>.pyi in a Python cell; a JavaScript cell lists no stubs."""
    paths, files = stubs
    declarations = {p.removesuffix(".d.ts") for p in paths if p.endswith(".d.ts")}
    assert declarations and declarations == {p.removesuffix(".pyi") for p in paths if p.endswith(".pyi")}
    assert set(files) == {p for p in paths if p.endswith(".pyi")}
    js = run(shop, "return (await API.list('tools')).files.map(f => f.path)")["value"]
    assert js and not [p for p in js if p.endswith(".pyi")]


def test_the_stubs_type_check_a_cells_use_of_its_tools(stubs, tmp_path):
    """Code that calls the tools as a cell would (keyword arguments, typed output, an output narrowed by its
    input's selector) passes mypy --strict."""
    write_stubs(tmp_path / "ok", stubs[1])
    done = mypy(tmp_path / "ok", USAGE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_stubs_reject_misuse(stubs, tmp_path):
    """An unknown keyword, a missing required argument, a wrong type and an unknown output key are errors."""
    write_stubs(tmp_path / "bad", stubs[1])
    done = mypy(tmp_path / "bad", MISUSE)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert 'Unexpected keyword argument "y" for "echo"' in out
    assert 'Missing named argument "weight_kg" for "quote_shipping"' in out
    assert 'Argument "weight_kg" to "quote_shipping" has incompatible type "str"' in out
    assert 'has no key "no_such_key"' in out
    # The input-discriminated output: action="list" answers the list branch, which has no "found".
    assert 'TypedDict "ShipmentsOutput0" has no key "found"' in out


# ---- MCP servers: mcp/index.pyi and mcp/<server>.pyi ----------------------------------------------

MCP_USAGE = """
from index import MCP


async def usage() -> int:
    added = await MCP.docs.add(a=1, b=2.5)
    total: float = added["structuredContent"]["sum"]
    issue = await MCP.docs.createIssue(title="t", labels=["bug"])
    readme = await MCP.docs.resources.read("docs://readme")
    pages = await MCP.docs.resources.templates(cursor=None)
    greeting = await MCP.docs.prompts.get("greet", {"name": "Ann"})
    failed: bool = added.get("isError", False)
    return len(added["content"]) + len(issue["content"]) + len(readme["contents"]) + len(
        pages["resourceTemplates"]
    ) + len(greeting["messages"]) + int(failed) + int(total)
"""
MCP_MISUSE = """
from index import MCP


async def misuse() -> None:
    await MCP.docs.add(a="1", b=2)
    await MCP.docs.add(a=1)
    await MCP.docs.no_such_tool()
    await MCP.docs.resources.read(1)
    (await MCP.docs.echo(text="x"))["no_such_key"]
    (await MCP.docs.add(a=1, b=2))["structuredContent"]["no_such_key"]
"""


@pytest.fixture(scope="module")
def mcp_stubs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, str]]:
    """What a Python cell lists and reads under `mcp/` with our test MCP server over stdio as `docs`."""
    server = McpServerConfig(name="docs", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), timeout_ms=10000)
    with make_client(tmp_path_factory.mktemp("mcp-pyi"), mcp_servers=(server,)) as c:
        env = run(c, COLLECT.format(prefix="mcp"), language="python")
        javascript = run(c, "return (await API.list('mcp')).files.map(f => f.path)")
    assert env["status"] == "completed", env
    assert javascript["value"] == ["mcp/index.d.ts", "mcp/docs.d.ts"], javascript  # stubs are Python's only
    paths, files = env["value"]
    return paths, files


def test_python_cells_list_an_mcp_index_stub_and_one_per_server(mcp_stubs):
    """A Python cell lists `mcp/index.pyi` and `mcp/<server>.pyi` beside the `.d.ts` files."""
    paths, files = mcp_stubs
    assert paths == ["mcp/index.d.ts", "mcp/docs.d.ts", "mcp/index.pyi", "mcp/docs.pyi"]
    assert "class Mcp:\n    docs: DocsServer" in files["mcp/index.pyi"]
    docs = files["mcp/docs.pyi"]
    # An outputSchema types the result's structuredContent; without one it stays Any.
    assert "async def add(self, **input: Unpack[DocsAddInput]) -> McpResult[DocsAddOutput]: ..." in docs
    assert "async def echo(self, **input: Unpack[DocsEchoInput]) -> McpToolResult: ..." in docs
    assert "# MCP tool name: create-issue" in docs  # the identifier differs from the MCP name
    assert "resources: DocsResources" in docs and "prompts: DocsPrompts" in docs


def write_mcp_stubs(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir()
    for path, content in files.items():
        (directory / path.removeprefix("mcp/")).write_text(content)


def test_the_mcp_stubs_type_check_a_cells_use_of_its_servers(mcp_stubs, tmp_path):
    """Tools, resources and prompts used as a Python cell would pass `mypy --strict` against the MCP stubs."""
    write_mcp_stubs(tmp_path / "stubs", mcp_stubs[1])
    result = mypy(tmp_path / "stubs", MCP_USAGE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_mcp_stubs_reject_misuse(mcp_stubs, tmp_path):
    """A wrong input type, a missing required input, an unknown tool, a wrong resource argument and a key the
    result does not have are each a mypy error."""
    write_mcp_stubs(tmp_path / "stubs", mcp_stubs[1])
    result = mypy(tmp_path / "stubs", MCP_MISUSE)
    lines = [line for line in result.stdout.splitlines() if "usage.py" in line and "error" in line]
    for line_no in (6, 7, 8, 9, 10, 11):
        assert any(f"usage.py:{line_no}:" in line for line in lines), (line_no, result.stdout)


#: An MCP tool whose outputSchema is input-discriminated (as the shipping demo's ``shipments`` tool).
SHIPMENTS = McpToolDecl(
    "shipments",
    "shipments",
    "List shipments or read one.",
    {
        "type": "object",
        "properties": {"action": {"enum": ["list", "status"]}, "shipment_id": {"type": "string"}},
        "required": ["action"],
    },
    {
        "anyOf": [
            {
                "type": "object",
                "properties": {"ids": {"type": "array", "items": {"type": "string"}}},
                "required": ["ids"],
            },
            {"type": "object", "properties": {"found": {"type": "boolean"}}, "required": ["found"]},
        ],
        "x-openclaw-input-discriminator": {
            "version": 1,
            "inputProperty": "action",
            "mapping": {"list": 0, "status": 1},
        },
    },
)
OVERLOAD_USAGE = """
from index import MCP


async def usage() -> int:
    listed = await MCP.shop.shipments(action="list")
    ids: list[str] = listed["structuredContent"]["ids"]
    one = await MCP.shop.shipments(action="status", shipment_id="S-1")
    found: bool = one["structuredContent"]["found"]
    return len(ids) + int(found)
"""
OVERLOAD_MISUSE = """
from index import MCP


async def misuse() -> None:
    (await MCP.shop.shipments(action="list"))["structuredContent"]["found"]
    (await MCP.shop.shipments(action="status"))["structuredContent"]["ids"]
"""


def test_an_input_discriminated_mcp_output_gets_overloads_mypy_narrows(tmp_path):
    """An MCP tool's outputSchema annotated with its input discriminator gets one overload per selector
    value: mypy --strict narrows the result's structuredContent by the literal passed."""
    shop = McpServerDecl("shop", "shop", (SHIPMENTS,), False, False)
    files = {"mcp/index.pyi": render_mcp_index_stub([shop]), "mcp/shop.pyi": render_mcp_server_stub(shop)}
    assert files["mcp/shop.pyi"].count("@overload") == 3, files["mcp/shop.pyi"]
    write_mcp_stubs(tmp_path / "ok", files)
    done = mypy(tmp_path / "ok", OVERLOAD_USAGE)
    assert done.returncode == 0, done.stdout + done.stderr
    write_mcp_stubs(tmp_path / "bad", files)
    done = mypy(tmp_path / "bad", OVERLOAD_MISUSE)
    assert 'TypedDict "ShopShipmentsOutput0" has no key "found"' in done.stdout, done.stdout
    assert 'TypedDict "ShopShipmentsOutput1" has no key "ids"' in done.stdout, done.stdout


# ---- error_info: errors.pyi -----------------------------------------------------------------------

ERRORS_USAGE = """
from errors import HostError, error_info


async def usage(call: object) -> str:
    try:
        raise RuntimeError("x")
    except Exception as e:
        info: HostError | None = error_info(e)
        if info is None:
            raise
        if info["code"] == "tool_blocked" and info.get("nonRetriable", False):
            return info.get("tool", "") + info["message"]
        return info["code"]
"""
ERRORS_MISUSE = """
from errors import error_info


def misuse(e: Exception) -> None:
    error_info(e)["code"]
    info = error_info("not an exception")
    if info is not None:
        info["cod"]
        n: int = info["message"]
"""


def test_error_info_is_declared_in_errors_pyi_and_type_checks(shop, tmp_path):
    """A Python cell lists `errors.pyi`; using `error_info` as a cell would passes mypy --strict, while
    forgetting its None, passing a non-exception, an unknown key or a wrong type is rejected."""
    env = run(shop, "[f['path'] for f in (await API.list())['files']][:2]", language="python")
    assert env["value"] == ["results.d.ts", "errors.pyi"], env
    content = run(shop, "(await API.read('errors.pyi'))['content']", language="python")["value"]
    directory = tmp_path / "errors"
    directory.mkdir()
    (directory / "errors.pyi").write_text(content)
    done = mypy(directory, ERRORS_USAGE)
    assert done.returncode == 0, done.stdout + done.stderr
    done = mypy(directory, ERRORS_MISUSE)
    lines = [line for line in done.stdout.splitlines() if "usage.py" in line and "error" in line]
    for line_no in (6, 7, 9, 10):
        assert any(f"usage.py:{line_no}:" in line for line in lines), (line_no, done.stdout)
    js = run(shop, "return (await API.list()).files.map(f => f.path)")["value"]
    assert "errors.pyi" not in js
