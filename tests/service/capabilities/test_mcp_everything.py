"""`@modelcontextprotocol/server-everything` from cells, and every served `mcp/*.d.ts` through the real tsc."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, run
from tests.mcp.conftest import SERVER_SCRIPT
from tests.support.tsc import run_tsc as tsc

pytestmark = pytest.mark.slow

EVERYTHING = Path(__file__).resolve().parents[2] / "node" / "node_modules" / ".bin" / "mcp-server-everything"

# Uses the MCP declarations the way a cell would; a type error here is a declaration bug.
USAGE = """
async function usage(): Promise<void> {
  const created = await MCP.docs.createIssue({ title: "x" });
  const blocks: unknown[] = created.content;
  const failed: boolean | undefined = (await MCP.docs.fail({})).isError;
  const renamed = [await MCP.docs.delete2(), await MCP.docs.constructor2({}), await MCP.docs.myTool()];
  const sum = await MCP.everything.getSum({ a: 1, b: 2 });
  const echoed = await MCP.everything.echo({ message: "hi" });
  const servers: number = (await MCP.$api()).servers.length;
  const header: string = (await MCP.docs.$api("add", { schema: true })).header;
  const listed: unknown[] = (await MCP.docs.resources.list()).resources;
  const templates = await MCP.everything.resources.templates();
  const templateList: unknown[] = templates.resourceTemplates;
  const next: string | undefined = (await MCP.everything.resources.templates({ cursor: templates.nextCursor })).nextCursor;
  const read: unknown[] = (await MCP.docs.resources.read("docs://readme")).contents;
  const readObj: unknown[] = (await MCP.docs.resources.read({ uri: "docs://readme" })).contents;
  const prompts: unknown[] = (await MCP.everything.prompts.list()).prompts;
  const got: unknown[] = (await MCP.docs.prompts.get("greet", { name: "Ann" })).messages;
  void [blocks, failed, renamed, sum, echoed, servers, header, listed, templateList, next, read, readObj, prompts, got];
}
void usage;
"""
# Leaving out a required key must not type-check, or the declarations say nothing.
MISUSE = """
async function misuse(): Promise<void> {
  await MCP.docs.createIssue({ body: "no title" });
}
void misuse;
"""


@pytest.fixture(scope="module")
def every_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the SDK test server (`docs`) and server-everything (`everything`), both over stdio."""
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing; run `npm ci --prefix tests/node`")
    servers = (
        McpServerConfig(name="docs", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), timeout_ms=10000),
        McpServerConfig(name="everything", command=str(EVERYTHING), args=("stdio",), timeout_ms=15000),
    )
    with make_client(tmp_path_factory.mktemp("every"), mcp_servers=servers) as c:
        yield c


def value(client: TestClient, code: str) -> Any:
    """Run a cell that must complete; return its value."""
    env = run(client, code)
    assert env["status"] == "completed", env
    return env["value"]


def test_api_lists_everything_tools_under_camel_case_identifiers(every_client):
    """`MCP.$api()` counts server-everything's tools; its `$api()` maps `get-sum` to `getSum`."""
    root, server = value(every_client, "return [await MCP.$api(), await MCP.everything.$api()]")
    counts = {s["identifier"]: s["toolCount"] for s in root["servers"]}
    assert counts["everything"] == len(server["tools"]) >= 2
    idents = {t["toolName"]: t["identifier"] for t in server["tools"]}
    assert idents["echo"] == "echo" and idents["get-sum"] == "getSum"
    assert all(t["callableName"] == f"MCP.everything.{t['identifier']}" for t in server["tools"])


def test_everything_echo_and_get_sum(every_client):
    """`echo` and `getSum` answer through `MCP.everything.*` with text content."""
    echo, total = value(
        every_client,
        """
        return await Promise.all([MCP.everything.echo({message: "hello"}), MCP.everything.getSum({a: 2, b: 40})]);
    """,
    )
    assert echo["content"] == [{"type": "text", "text": "Echo: hello"}]
    assert "42" in total["content"][0]["text"] and "isError" not in total


def test_everything_reads_a_listed_resource(every_client):
    """A resource taken from `resources.list()` reads back in the MCP shape."""
    got = value(
        every_client,
        """
        const listing = await MCP.everything.resources.list();
        const first = listing.resources[0];
        return {first, read: await MCP.everything.resources.read(first.uri)};
    """,
    )
    content = got["read"]["contents"][0]
    assert content["uri"] == got["first"]["uri"]
    assert content.get("text") or content.get("blob")


def test_everything_lists_resource_templates(every_client):
    """`resources.templates()` lists server-everything's URI templates in the MCP shape."""
    got = value(every_client, "return await MCP.everything.resources.templates()")
    assert got["resourceTemplates"], got
    assert all("uriTemplate" in t and "name" in t for t in got["resourceTemplates"]), got


def test_everything_gets_a_listed_prompt(every_client):
    """A prompt from `prompts.list()` (`args-prompt`) renders with its argument."""
    got = value(
        every_client,
        """
        const names = (await MCP.everything.prompts.list()).prompts.map(p => p.name);
        const simple = await MCP.everything.prompts.get(names.find(n => n === "simple-prompt"));
        const args = await MCP.everything.prompts.get({name: "args-prompt", arguments: {city: "Lisbon"}});
        return {names, simple, args};
    """,
    )
    assert {"simple-prompt", "args-prompt"} <= set(got["names"])
    assert got["simple"]["messages"]
    assert "Lisbon" in json.dumps(got["args"]["messages"])


@pytest.fixture(scope="module")
def served_mcp_files(every_client: TestClient) -> dict[str, str]:
    """Every `mcp/*` file the running service lists, read with `API.read` in a cell."""
    files = value(
        every_client,
        """
        const out = {};
        for (const f of (await API.list("mcp")).files) out[f.path] = (await API.read(f.path)).content;
        return out;
    """,
    )
    assert sorted(files) == ["mcp/docs.d.ts", "mcp/everything.d.ts", "mcp/index.d.ts"]
    return files  # type: ignore[no-any-return]


def test_served_mcp_declarations_compile_with_tsc_strict(served_mcp_files, tmp_path):
    """All served `mcp/*.d.ts` plus code calling `MCP.docs.createIssue({title: "x"})` pass `tsc --noEmit --strict`."""
    done = tsc(tmp_path, {**served_mcp_files, "usage.ts": USAGE})
    if done.returncode != 0:
        pytest.fail(f"tsc rejected the served MCP declarations:\n{done.stdout}{done.stderr}")


def test_missing_required_mcp_argument_does_not_compile(served_mcp_files, tmp_path):
    """Calling `createIssue` without `title` is a type error, so the MCP declarations are real types."""
    done = tsc(tmp_path, {**served_mcp_files, "misuse.ts": MISUSE})
    assert done.returncode != 0
    assert "misuse.ts" in done.stdout and "title" in done.stdout, done.stdout


def test_each_served_server_file_compiles_alone(served_mcp_files, tmp_path):
    """Each `mcp/<server>.d.ts` compiles on its own under `tsc --strict` (no hidden dependency)."""
    failures = []
    for i, (path, content) in enumerate(sorted(served_mcp_files.items())):
        if path == "mcp/index.d.ts":
            continue
        done = tsc(tmp_path / f"alone{i}", {path: content})
        if done.returncode != 0:
            failures.append(f"{path}:\n{done.stdout}{done.stderr}")
    if failures:
        pytest.fail("tsc rejected MCP declaration files compiled alone:\n" + "\n".join(failures))
