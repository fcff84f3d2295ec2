"""``/docs`` renders in headless Chromium with the network cut off (no CDN)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.conftest import open_offline, screenshot
from tests.support.demo_server import demo_serve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with demo_serve(tmp_path_factory.mktemp("docs"), args=()) as url:
        yield url


def test_swagger_ui_renders_the_operations_offline(browser, base, tmp_path):
    """/docs shows the API's operations (Run a cell, the tool description) loading nothing from another origin."""
    tab = open_offline(browser, base)
    tab.page.goto(base + "/docs")
    tab.page.wait_for_selector(".opblock-summary", timeout=30000)
    summaries = tab.page.locator(".opblock-summary-description").all_inner_texts()
    assert "Run a cell" in summaries and "Model-facing tool description" in summaries, summaries
    screenshot(tab.page, tmp_path, "docs")
    assert tab.outside == [] and tab.errors == []


def test_without_keys_the_playground_asks_for_none(browser, base):
    """On a server without API keys the playground hides the key field and runs cells as they are."""
    from playwright.sync_api import expect

    tab = open_offline(browser, base)
    tab.page.goto(base + "/playground")
    tab.page.get_by_test_id("run").click()
    expect(tab.page.get_by_test_id("value")).to_have_text("2", timeout=60000)
    assert tab.page.locator("#key-box").is_hidden()
    assert tab.outside == [] and tab.errors == []
