"""Reading the documentation as the tests see it: the pages, their links, and their marked samples.

A sample that claims to run is marked by an HTML comment on the line before its fence (invisible on
the rendered page): ``<!-- sample: shell -->`` (a ``curl`` command line), ``<!-- sample: python -->``
(a script), ``<!-- sample: cell -->`` (a JavaScript cell) or ``<!-- sample: python-cell -->`` (a Python
cell). tests/docs/test_samples.py runs each one
against a live ``codemode serve --demo``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SAMPLE = re.compile(
    r"^<!-- sample: (?P<kind>shell|python|cell|python-cell) -->\n```(?P<lang>\w+)\n(?P<body>.*?)^```$", re.M | re.S
)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Sample:
    page: str
    line: int
    kind: str
    body: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.kind})"


def pages() -> list[Path]:
    """README.md, CONTRIBUTING.md, CHANGELOG.md and every page under docs/."""
    return [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]


def samples() -> list[Sample]:
    found = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        for m in SAMPLE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(Sample(str(path.relative_to(ROOT)), line, m.group("kind"), m.group("body")))
    return found


def local_links(path: Path) -> list[str]:
    """Relative link targets of a page (no URLs, no in-page anchors), code blocks left out."""
    text = re.sub(r"^```.*?^```$", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [
        m.group("target")
        for m in LINK.finditer(text)
        if not re.match(r"[a-z]+:", m.group("target")) and not m.group("target").startswith("#")
    ]
