"""The C scan for where a Python cell's last top-level line starts (``guest_runtime/monty/source_scan.c``).

The line it names must be where the source's last top-level statement starts, as CPython's parser says, or
a later clause of that statement (``else:``, which no parse of the tail takes), or it must decline (-1): a
wrong line would put the value's name inside a string or a bracket.  ``rewritten`` must then put the name
exactly in front of the last statement when it is an expression.  Checked on
the standard library's own modules (strings of every kind, f-strings with nested quotes, continuations,
decorators) and on cases written to mislead a scan.
"""

from __future__ import annotations

import ast
import re
import sysconfig
import warnings
from pathlib import Path

import pytest

from guest_runtime.monty import cell_source

scan = cell_source._source_scan
pytestmark = pytest.mark.skipif(
    scan is None, reason="guest_runtime/monty/_source_scan was not built (no C compiler at install: scripts/test)"
)


CLAUSE = re.compile(r"(?:else|elif|except|finally)\b")


def _body(source: str) -> list[ast.stmt]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source).body


def _last_statement_line(source: str) -> int:
    body = _body(source)
    return max(s.lineno for s in body) if body else 0


def _check(name: str, source: str) -> bool:
    """Whether the scan declined ``source``; it fails the test if it named a wrong line."""
    try:
        body = _body(source)
    except SyntaxError:
        return False  # a cut inside a statement
    expected = max(s.lineno for s in body) if body else 0
    line, index = scan.last_top_level_line(source)
    if line == -1:
        return True
    _starts(source, line, index)
    if line != expected:
        assert line > expected and CLAUSE.match(source.splitlines()[line - 1]), (name, line, expected)
    rewrite = cell_source.rewritten(source)
    if body and isinstance(body[-1], ast.Expr):
        last = body[-1]
        if rewrite is not None:
            text = source.splitlines()[last.lineno - 1]
            column = len(text.encode()[: last.col_offset].decode()) + 1
            assert rewrite[1] == cell_source.Rewrite(last.lineno, column), name
            assert isinstance(_body(rewrite[0])[len(body) - 1], ast.Assign), name
    else:
        assert rewrite is None, name
    return False


def _stdlib_sources() -> list[tuple[str, str]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    found = []
    # The top-level modules, and the tests of the syntax a scan could misread (f-strings, tokens, grammar).
    tricky = [root / "test" / f"test_{name}.py" for name in ("fstring", "tokenize", "grammar", "string_literals")]
    for path in sorted(root.glob("*.py")) + [p for p in tricky if p.exists()]:
        try:
            text = path.read_text("utf-8")
            _last_statement_line(text)
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue
        found.append((path.name, text))
    return found


def _starts(source: str, line: int, index: int) -> None:
    """``index`` is where ``line`` starts in ``source`` (a character index: non-ASCII text before it counts
    once per character); line 0 (none) has index 0."""
    if line <= 1:
        assert index == 0
    else:
        assert source[index - 1] == "\n" and source.count("\n", 0, index) == line - 1


def test_the_scan_is_built_where_the_suite_runs():
    assert scan is not None, "pyproject.toml builds it; scripts/test installs with a C compiler"


def test_on_the_standard_library_the_scan_names_the_last_statement_or_declines():
    sources = _stdlib_sources()
    assert len(sources) > 150
    declined = []
    for name, text in sources:
        # The module, and the module cut at a few line ends: each a cell that ends where it is cut.
        cuts = [text] + [text[: text.find("\n", i) + 1] for i in range(0, len(text), max(len(text) // 4, 1))]
        declined += [name for source in cuts if _check(name, source)]
    assert len(declined) < len(sources) // 20, sorted(set(declined))[:20]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("s = '''\n1\n'''  # '''", 1),  # a comment's quotes open nothing
        ("s = '''\n1\n'''\n'''\nx\n'''", 4),
        ("x = (\n1)\n", 1),
        ("x = [\n  1,\n]\ny", 4),
        ("x = 1 \\\n  + 2", 1),
        ("if x:\n    1\nelse:\n    2", 3),  # a clause: its tail does not parse, so the cell runs as written
        ("f'{x[\"a\"]}'\nz", 2),  # a quote inside a replacement field (Python 3.12)
        ("f'{x:>{w}}' + f\"{f'{1}'}\"\nz", 2),
        ("f'''{\nx\n}'''\nz", 4),
        ("rb'\\''\nz", 2),
        ("f\"{'''\n'''}\"\nz", 3),  # a line end in a string in a field of a one-line f-string
        ("'\\\n'\nz", 3),
        ("@dec\ndef f():\n    pass", 2),
        ("x = 1; y", 1),
        ("s = 'é€😀'\n'ü'", 2),  # the index counts characters, not UTF-8 bytes
        ("# only a comment\n\n", 0),
    ],
)
def test_the_scan_names_the_line_the_last_statement_starts_on(source: str, line: int):
    found, index = scan.last_top_level_line(source)
    assert found == line
    _starts(source, line, index)
    if line and not CLAUSE.match(source.splitlines()[line - 1]):
        assert _last_statement_line(source) == line


@pytest.mark.parametrize(
    "source",
    ["'abc", "x = ]", "x = (\n", "f'{#}'", "f'{x:'}'", "f'{x\\n}'", "a\rb", "x = 1\x00", "f'" + "{f'" * 20 + "1"],
    ids=[
        "open string",
        "closer",
        "open bracket",
        "comment in field",
        "quote in spec",
        "backslash in field",
        "lone CR",
        "NUL",
        "deep fields",
    ],
)
def test_what_the_scan_is_not_sure_of_is_declined(source: str):
    assert scan.last_top_level_line(source) == (-1, 0)


def test_a_lone_surrogate_is_declined_by_the_caller():
    assert cell_source.rewritten("'\ud800'") is None
