"""Headless Chromium (Debian's, the system browser) driven by Playwright, with the network cut off.

Every page here may reach the server under test and nothing else: each request to another origin is
recorded and aborted, so a page that needs a CDN shows it (the test asserts the record is empty).
Screenshots go to ``$CODEMODE_SCREENSHOTS`` when set (to look at them), else to the test's tmp dir.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (module scope keeps Playwright's loop away from other tests)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: scripts/test installs Debian's chromium package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: the suite runs as root in a container, where Chromium's own sandbox cannot start.
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@dataclass
class OfflinePage:
    page: Any
    outside: list[str] = field(default_factory=list)  # requests to any other origin (aborted)
    errors: list[str] = field(default_factory=list)  # uncaught page errors


def open_offline(browser: Any, base: str, *, storage: dict[str, str] | None = None) -> OfflinePage:
    """A fresh page that may reach ``base`` only; ``storage`` is put in sessionStorage before any script runs."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    offline = OfflinePage(page)

    def route(r: Any) -> None:
        if r.request.url.startswith(base + "/"):
            r.continue_()
        else:
            offline.outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page.on("pageerror", lambda exc: offline.errors.append(str(exc)))
    if storage:
        script = "".join(f"sessionStorage.setItem({k!r}, {v!r});" for k, v in storage.items())
        page.add_init_script(script)
    return offline


def screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("CODEMODE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path
