"""The documentation site builds strictly, the README stays a front page, and every link resolves."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.pages import DOCS, README, ROOT, local_links, pages

#: The README is a front page: what codemode is, the quick start, a tour, the features, links.
README_MAX_BYTES = 12 * 1024
#: A rule is named by what it is ("the tool failure contract"), never by the number of the document
#: or ticket it came from.
NUMBERED_RULE = re.compile(r"\b(seed[ -]?0\d\d|issue #?\d+|seeds?/0\d\d)", re.I)
#: Trees whose prose and comments are checked for NUMBERED_RULE (the product's own text, not vendored files).
CHECKED_TREES = (
    "bridge",
    "guest_runtime",
    "service",
    "codemode_client",
    "examples",
    "bench",
    "scripts",
    "tests",
    "deploy",
)
CHECKED_SUFFIXES = {".py", ".js", ".md", ".toml", ".yml", ".yaml", ".html", ".css", ".sh", ".ts", ""}


def _slug(heading: str) -> str:
    """The anchor MkDocs' table of contents gives a heading (Python-Markdown's default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict` succeeds: every page is in the nav, every link and anchor resolves."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs and mkdocs-material are missing: pip install -e '.[docs]' (scripts/test installs it)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").is_file()


def test_readme_is_a_front_page() -> None:
    """The README is at most 12 KiB and its quick start is exactly the two commands."""
    data = README.read_bytes()
    assert len(data) <= README_MAX_BYTES, f"README.md is {len(data)} bytes; move detail into docs/"
    text = data.decode("utf-8")
    quick = text[text.index("## Quick start") :]
    block = quick[quick.index("```sh\n") + 6 : quick.index("```", quick.index("```sh\n") + 6)]
    assert [line.split()[0] for line in block.splitlines() if line.strip()] == ["./scripts/serve", "./scripts/test"]


def test_every_docs_page_is_linked_from_the_readme() -> None:
    """Each page of the site can be reached from the front page (the README links every page)."""
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in local_links(README)}
    missing = [str(p.relative_to(ROOT)) for p in sorted(DOCS.rglob("*.md")) if p.resolve() not in linked]
    assert not missing, missing


@pytest.mark.parametrize("page", [p for p in pages() if p.parent == ROOT], ids=lambda p: p.name)
def test_links_of_root_pages_resolve(page: Path) -> None:
    """Every relative link of README.md, CONTRIBUTING.md and CHANGELOG.md names an existing file, and
    an anchor into a page names one of its headings (MkDocs checks the links inside docs/)."""
    broken = []
    for target in local_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve()
        if not file.exists() or anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, broken


def test_no_rule_is_named_by_a_number() -> None:
    """Docs, code comments and docstrings name a rule by what it is, not by a seed or issue number."""
    files = [*pages()]
    for tree in CHECKED_TREES:
        files += [
            p
            for p in (ROOT / tree).rglob("*")
            if p.is_file()
            and p.suffix in CHECKED_SUFFIXES
            and "node_modules" not in p.parts
            and "__pycache__" not in p.parts
        ]
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for m in NUMBERED_RULE.finditer(text):
            hits.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert not hits, hits
