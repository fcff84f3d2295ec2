"""Every declaration file the running service serves compiles with the real `tsc --noEmit --strict`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.settings import ToolSettings
from tests.conftest import make_client, run
from tests.support.tsc import run_tsc as tsc

pytestmark = pytest.mark.slow

SHIPPING = "service.demo.shipping"
CLIENT_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {"name": "open-ticket", "description": "Opens a ticket */ with a comment breaker."},
    {"name": "9lives"},
    {"name": "class", "description": "A reserved word as a tool name."},
]
COLLECT = """
    const out = {};
    for (const f of (await API.list()).files) out[f.path] = (await API.read(f.path)).content;
    return {files: out, names: catalog.all().map(h => h.callableName)};
"""
# Uses the declarations the way a cell would; any type error here is a declaration bug.
USAGE = """
async function usage(): Promise<void> {
  const quote = await quote_shipping({ origin: "DE", destination: "FR", weight_kg: 2 });
  const price: number = quote.price;
  const currency: "USD" = quote.currency;
  const express = await quote_shipping({ origin: "DE", destination: "FR", weight_kg: 2, service: "express" });
  const track = await track_package({ tracking_number: "AB123456" });
  const firstNote: string | undefined = track.events[0]?.note;
  const carriers = await list_carriers();
  const services: Array<"standard" | "express"> = carriers[0].services;
  const listed = await shipments({ action: "list" });
  const ids: string[] = listed.shipments;
  const one = await shipments({ action: "status", shipment_id: "SHP-1001" });
  const found: boolean = one.found;
  const either = await shipments({ action: "list" as "list" | "status" });
  const headline: string = (await news()).headline;
  const echoed: unknown = await echo({ x: 1 });
  const page: unknown = await blob({ size: 10 });
  const failed: unknown = await fail({ message: "m" });
  const weather: unknown = await get_weather({ city: "Oslo" });
  const ticket: unknown = await open_ticket({});
  const lives: unknown = await tool_9lives();
  const ref = await results.save({ price });
  const loaded: unknown = await results.load(ref.id);
  await store("k", { ids });
  const back: unknown = await load("k");
  void [price, currency, express, firstNote, services, found, either, headline, echoed, page, failed,
        weather, ticket, lives, loaded, back];
}
void usage;
"""
# Misuse the narrowed branch: if this compiles, the declarations are too loose to be useful.
MISUSE = """
async function misuse(): Promise<void> {
  const listed = await shipments({ action: "list" });
  const wrong: boolean = listed.found;
  void wrong;
}
void misuse;
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the shipping plugin and the test tools."""
    with make_client(tmp_path_factory.mktemp("tsc"), tools=ToolSettings(plugins=(SHIPPING,))) as c:
        yield c


@pytest.fixture(scope="module")
def served(shop: TestClient) -> dict:
    """Every file `API.list()` shows in a cell that also declares client tools, read with `API.read`."""
    env = run(shop, COLLECT, client_tools=CLIENT_TOOLS)
    assert env["status"] == "completed", env
    return env["value"]


def test_collected_files_cover_every_visible_tool(served):
    """The cell lists a declaration file for each callable (native and client) plus results.d.ts."""
    names = served["names"]
    assert {"get_weather", "open_ticket", "tool_9lives", "quote_shipping", "shipments", "echo"} <= set(names)
    assert any(n.startswith("class_") for n in names), names
    assert sorted(served["files"]) == sorted(["results.d.ts"] + [f"tools/{n}.d.ts" for n in names])


def test_http_served_files_equal_the_cell_files(shop, served):
    """`GET /v1/api/files/{path}` serves the same content the cell read (client tools excepted)."""
    listed = shop.get("/v1/api/files").json()["files"]
    assert listed
    for item in listed:
        body = shop.get(f"/v1/api/files/{item['path']}").json()
        assert body["content"] == served["files"][item["path"]], item["path"]


def test_every_served_declaration_compiles_with_tsc_strict(served, tmp_path):
    """All served declarations plus code using them compile with `tsc --noEmit --strict`."""
    files = {f"api/{path}": content for path, content in served["files"].items()}
    done = tsc(tmp_path / "ok", {**files, "usage.ts": USAGE})
    if done.returncode != 0:
        pytest.fail(f"tsc rejected the served declarations:\n{done.stdout}{done.stderr}")


def test_each_served_declaration_compiles_alone(served, tmp_path):
    """Each served declaration file compiles on its own (no hidden dependency between files)."""
    failures = []
    for i, (path, content) in enumerate(sorted(served["files"].items())):
        done = tsc(tmp_path / f"alone{i}", {f"api/{path}": content})
        if done.returncode != 0:
            failures.append(f"{path}:\n{done.stdout}{done.stderr}")
    if failures:
        pytest.fail("tsc rejected declaration files compiled alone:\n" + "\n".join(failures))


def test_misusing_a_narrowed_branch_does_not_compile(served, tmp_path):
    """Reading `found` from the `list` branch of shipments is a type error, so the types are real."""
    files = {f"api/{path}": content for path, content in served["files"].items()}
    done = tsc(tmp_path / "bad", {**files, "misuse.ts": MISUSE})
    assert done.returncode != 0
    assert "misuse.ts" in done.stdout and "found" in done.stdout
