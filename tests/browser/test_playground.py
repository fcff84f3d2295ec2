"""The playground in headless Chromium against a real `codemode serve --demo` with an API key, offline.

Each test drives the page as a person would (pick an example, Run, answer, approve) and reads what the
page shows through its ``data-testid`` parts; every test also checks that the page reached no other
origin and threw no error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.conftest import OfflinePage, open_offline, screenshot
from tests.support.demo_server import demo_serve
from tests.support.live_server import ROOT

pytestmark = pytest.mark.slow

API_KEY = "ck_playground_0123456789"
CONFIG = f"""
[[api_keys]]
key = "{API_KEY}"
tenant = "playground"
"""
KEY_STORAGE = "codemode.apiKey"
FINAL = re.compile(r"^(completed|failed)")
LONG_MS = 60000


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with demo_serve(tmp_path_factory.mktemp("playground"), config=CONFIG) as url:
        yield url


@pytest.fixture
def tab(browser: Any, base: str) -> Iterator[OfflinePage]:
    """The playground with the API key already in sessionStorage."""
    offline = open_offline(browser, base, storage={KEY_STORAGE: API_KEY})
    offline.page.goto(base + "/playground")
    yield offline
    assert offline.outside == [], offline.outside
    assert offline.errors == [], offline.errors
    offline.page.context.close()


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def example(tab: OfflinePage, label: str, language: str = "javascript") -> None:
    tab.page.get_by_test_id("language").select_option(value=language)
    tab.page.get_by_test_id("examples").select_option(label=label)
    if language == "python":  # the editor holds the example's Python spelling
        expect()(tab.page.get_by_test_id("code")).not_to_have_value(re.compile(r"\breturn\b|\bconst\b"))


def run_to_the_end(tab: OfflinePage) -> dict[str, Any]:
    """Click Run and return the final envelope the page shows."""
    tab.page.get_by_test_id("run").click()
    return final_envelope(tab)


def final_envelope(tab: OfflinePage) -> dict[str, Any]:
    expect()(tab.page.get_by_test_id("status")).to_have_text(FINAL, timeout=LONG_MS)
    return json.loads(tab.page.get_by_test_id("envelope").inner_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_run_a_cell_that_calls_a_demo_tool_and_an_mcp_tool(tab, tmp_path, language):
    """The demo example quotes a parcel (plugin) and reads a forecast (MCP), in either language: the value
    and the text output show."""
    example(tab, "Demo tools (shipping plugin and travel MCP server)", language)
    env = run_to_the_end(tab)
    assert env["status"] == "completed", env
    assert env["value"]["quote"]["currency"] == "USD" and len(env["value"]["sky"]) == 2
    assert json.loads(tab.page.get_by_test_id("value").inner_text()) == env["value"]
    assert "USD" in tab.page.get_by_test_id("output").inner_text()
    timeline = tab.page.get_by_test_id("timeline").inner_text()
    assert "exec → completed" in timeline and "calls 2" in timeline
    # Every nested call is listed with its target, sizes, duration and outcome (the exec asks for its call log).
    assert "tool quote_shipping" in timeline and "mcp.call MCP.travel.forecast" in timeline, timeline
    assert timeline.count(" ms · ok") >= 2, timeline
    screenshot(tab.page, tmp_path, f"playground-demo-{language}")


def test_the_editor_highlights_numbers_lines_and_completes_tools_mcp_and_the_guest_api(tab, tmp_path):
    """The vendored CodeMirror editor (no request leaves the server) replaces the textarea: line numbers,
    highlighting, and completion of the key's tools, MCP.<server>.<tool> and the guest API from the page's
    declaration files; what is typed is what runs."""
    editor = tab.page.get_by_test_id("code-editor")
    expect()(editor.locator(".cm-lineNumbers")).to_be_visible()
    # CodeMirror's own styles apply (its <style> elements carry the page's CSP nonce): text keeps its spaces.
    expect()(editor.locator(".cm-content")).to_have_css("white-space", re.compile("pre"))
    expect()(editor.locator(".cm-content")).to_contain_text("hello from a cell")  # the first example
    assert editor.locator(".cm-line span[class]").count() > 0  # highlighted tokens
    expect()(tab.page.get_by_test_id("api-file-link").first).to_be_visible(timeout=LONG_MS)
    content = editor.locator(".cm-content")
    content.click()
    tab.page.keyboard.press("Control+a")
    tab.page.keyboard.press("Delete")
    for typed, offered in (
        ("quote_sh", "quote_shipping"),
        ("MCP.travel.fo", "MCP.travel.forecast"),
        ("catalog.se", "catalog.search"),
    ):
        tab.page.keyboard.type(typed)
        expect()(tab.page.locator(".cm-tooltip-autocomplete")).to_contain_text(offered, timeout=LONG_MS)
        tab.page.keyboard.press("Escape")
        tab.page.keyboard.press("Control+a")
        tab.page.keyboard.press("Delete")
    tab.page.keyboard.type("const n: number = 6 * 7")  # a typed space is a space (Chromium may report U+00A0)
    tab.page.keyboard.press("Enter")
    tab.page.keyboard.type("return n")
    assert tab.page.get_by_test_id("code").input_value() == "const n: number = 6 * 7\nreturn n"
    env = run_to_the_end(tab)
    assert (env["status"], env["value"]) == ("completed", 42), env
    screenshot(tab.page, tmp_path, "playground-editor")


def test_the_run_history_keeps_the_tabs_cells_and_restores_one(tab):
    """Each finished run is listed, newest first, with its language and status; a click puts its code back."""
    example(tab, "Demo tools (shipping plugin and travel MCP server)")
    first = tab.page.get_by_test_id("code").input_value()
    assert run_to_the_end(tab)["status"] == "completed"
    content = tab.page.get_by_test_id("code-editor").locator(".cm-content")
    content.click()
    tab.page.keyboard.press("Control+a")
    tab.page.keyboard.press("Delete")
    tab.page.keyboard.type("missingFn()")
    assert run_to_the_end(tab)["status"] == "failed"
    entries = tab.page.get_by_test_id("history-entry")
    expect()(entries).to_have_count(2)
    tab.page.locator("#history-box summary").click()
    assert "failed uncaught_error" in entries.nth(0).inner_text() and "completed" in entries.nth(1).inner_text()
    entries.nth(1).get_by_role("button").click()
    assert tab.page.get_by_test_id("code").input_value() == first
    expect()(content).to_contain_text("quote_shipping")


def test_choosing_another_example_clears_the_last_cells_panes(tab):
    """The value, output, timeline and envelope of a run are gone once another example is chosen."""
    example(tab, "Demo tools (shipping plugin and travel MCP server)")
    assert run_to_the_end(tab)["status"] == "completed"
    assert tab.page.get_by_test_id("output").inner_text().strip()
    tab.page.get_by_test_id("examples").select_option(index=0)
    for pane in ("output", "timeline", "value", "envelope"):
        expect()(tab.page.get_by_test_id(pane)).to_have_text("")
    expect()(tab.page.get_by_test_id("status")).to_have_text("idle")
    expect()(tab.page.get_by_test_id("wait")).to_be_disabled()


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_answer_a_client_tool(tab, tmp_path, language):
    """A client tool call shows a form with its input; the result typed there reaches the cell (either language)."""
    example(tab, "A client tool (you answer it)", language)
    tab.page.get_by_test_id("run").click()
    card = tab.page.get_by_test_id("client-tool")
    expect()(card).to_contain_text('"order_id": "A-17"', timeout=LONG_MS)
    screenshot(tab.page, tmp_path, "playground-client-tool")
    card.get_by_test_id("tool-result").fill('{"destination": "FR"}')
    card.get_by_test_id("send-result").click()
    env = final_envelope(tab)
    assert env["status"] == "completed" and env["value"] == {"destination": "FR"}, env
    assert "answered req_" in tab.page.get_by_test_id("timeline").inner_text()


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_approve_or_deny_a_call(tab, tmp_path, decision):
    """An approval shows the call with Approve/Deny: approved, the tool runs; denied, the call rejects."""
    example(tab, "An approval (approve or deny the call)")
    tab.page.get_by_test_id("run").click()
    card = tab.page.get_by_test_id("approval")
    expect()(card).to_contain_text("quote_shipping", timeout=LONG_MS)
    if decision == "approve":
        screenshot(tab.page, tmp_path, "playground-approval")
    card.get_by_test_id(decision).click()
    env = final_envelope(tab)
    if decision == "approve":
        assert env["status"] == "completed" and env["value"] > 0, env
    else:
        assert env["status"] == "failed" and "its approval was denied" in env["error"], env


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_follow_a_background_cell(tab, tmp_path, language):
    """A background cell answers running at once; its output arrives on the live event stream, then its
    envelope (either language)."""
    example(tab, "A background cell (live events)", language)
    env = run_to_the_end(tab)
    assert env["status"] == "completed" and env["value"] == "done", env
    output = tab.page.get_by_test_id("output").inner_text()
    assert output.index("step 1") < output.index("step 2") < output.index("step 3")
    events = tab.page.get_by_test_id("events").inner_text()
    assert events.count(" output ") == 3 and " envelope " in events, events
    assert "exec → running" in tab.page.get_by_test_id("timeline").inner_text()
    screenshot(tab.page, tmp_path, f"playground-background-{language}")


def test_search_the_catalog_and_read_a_declaration(tab):
    """Catalog search finds the MCP forecast tool for "weather"; a declaration file opens from the list."""
    tab.page.get_by_test_id("search-query").fill("weather")
    tab.page.get_by_test_id("search").click()
    expect()(tab.page.get_by_test_id("search-hit").first).to_contain_text("forecast", timeout=LONG_MS)
    for hit in tab.page.get_by_test_id("search-hit").all():  # a hit with no declared output shows no "→ ?"
        assert "→ ?" not in hit.inner_text(), hit.inner_text()
    tab.page.set_viewport_size({"width": 1000, "height": 400})  # a small window: the file opens below the fold
    tab.page.get_by_test_id("api-file-link").filter(has_text="tools/quote_shipping.d.ts").click()
    expect()(tab.page.get_by_test_id("api-file")).to_contain_text("declare function quote_shipping", timeout=LONG_MS)
    expect()(tab.page.get_by_test_id("api-file")).to_be_in_viewport()  # scrolled to


def test_python_cells_see_the_python_declarations(tab):
    """With Python chosen, the declarations pane lists a cell's `.pyi` stubs and opens one as a Python cell reads it."""
    tab.page.get_by_test_id("language").select_option(value="python")
    link = tab.page.get_by_test_id("api-file-link").filter(has_text="tools/quote_shipping.pyi")
    expect()(link).to_have_count(1, timeout=LONG_MS)
    link.click()
    expect()(tab.page.get_by_test_id("api-file")).to_contain_text("async def quote_shipping(", timeout=LONG_MS)
    tab.page.get_by_test_id("language").select_option(value="javascript")
    expect()(tab.page.get_by_test_id("api-file-link").filter(has_text=".pyi")).to_have_count(0, timeout=LONG_MS)


def test_switching_languages_quickly_lists_each_declaration_once(tab):
    """Loads of the declarations list overlap when the language changes before an answer arrives: only the
    last one's answer is shown, each file once (an earlier load's answer used to be appended to it)."""
    select = tab.page.get_by_test_id("language")
    for language in ("python", "javascript", "python", "javascript", "python"):
        select.select_option(value=language)
    links = tab.page.get_by_test_id("api-file-link")
    expect()(links.filter(has_text="tools/quote_shipping.pyi")).to_have_count(1, timeout=LONG_MS)
    tab.page.wait_for_load_state("networkidle")
    paths = links.all_inner_texts()
    assert len(paths) == len(set(paths)) and "tools/quote_shipping.pyi" in paths, paths
    select.select_option(value="javascript")


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_copy_as_python_runs_the_same_cell(tab, base, language):
    """The "Copy as Python" snippet, run as a script with the key in CODEMODE_API_KEY, completes the same cell
    (in the language chosen); the curl snippet names the key by its variable, never by its value."""
    example(tab, "Hello", language)
    tab.page.get_by_test_id("copy-python").click()
    snippet = tab.page.get_by_test_id("snippet").inner_text()
    env = {**os.environ, "CODEMODE_API_KEY": API_KEY, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "completed 2"
    assert ('language="python"' in snippet) == (language == "python"), snippet
    tab.page.get_by_test_id("copy-curl").click()
    curl = tab.page.get_by_test_id("snippet").inner_text()
    assert "$CODEMODE_API_KEY" in curl and API_KEY not in curl and base + "/v1/exec" in curl


def test_the_page_asks_for_a_key_and_keeps_it_in_session_storage(browser, base):
    """Without a key the page says the server needs one; the key typed in is kept in sessionStorage and used."""
    tab = open_offline(browser, base)
    page = tab.page
    page.goto(base + "/playground")
    expect()(page.get_by_test_id("key-note")).to_have_text("this server needs an API key", timeout=LONG_MS)
    page.get_by_test_id("run").click()
    expect()(page.get_by_test_id("status")).to_have_text("refused (401)", timeout=LONG_MS)
    page.get_by_test_id("api-key").fill(API_KEY)
    page.get_by_test_id("save-key").click()
    expect()(page.get_by_test_id("key-note")).to_have_text("key accepted", timeout=LONG_MS)
    assert page.evaluate(f"sessionStorage.getItem({KEY_STORAGE!r})") == API_KEY
    env = run_to_the_end(tab)
    assert env["status"] == "completed" and env["value"] == 2
    assert tab.outside == [] and tab.errors == []
    page.context.close()


def test_the_servers_address_leads_to_the_playground(base):
    """`GET /` redirects to the playground (a browser pointed at the server lands somewhere useful)."""
    r = httpx.get(base + "/", timeout=30)
    assert r.status_code == 307 and r.headers["location"] == "/playground"


def test_the_page_is_served_with_a_same_origin_policy(base):
    """The page and its files come from the package with a CSP allowing this origin only; other names are 404."""
    r = httpx.get(base + "/playground", timeout=30)
    assert r.status_code == 200 and 'data-testid="run"' in r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "default-src 'none'" in csp
    for name in ("playground.js", "playground.css"):
        assert httpx.get(f"{base}/playground/{name}", timeout=30).status_code == 200
    for name in ("route.py", "..%2Froute.py", "static"):
        assert httpx.get(f"{base}/playground/{name}", timeout=30).status_code == 404
