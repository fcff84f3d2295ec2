"""The prelude loader: source files joined line for line into one closure, compiled once to bytecode."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bridge import jsoncodec
from guest_runtime.errors import EngineFault
from guest_runtime.quickjs import prelude_source
from guest_runtime.quickjs.engine import GuestEngine, compile_prelude

#: Each of these broke under the old loader, which squeezed the prelude onto one line by cutting
#: everything after " // " and joining lines with spaces: the string holding " // " lost its end,
#: and the statement without a semicolon ran on into the next file's parenthesis.
FIRST = """\
// A whole-line comment first.
const spaced = "a // b"; // a comment after a string that holds " // "
const url = 'https://example.com//x' // no semicolon, and the next file opens with a parenthesis
"""
SECOND = """\
/* a block comment // with slashes */
(function () { return url; })();
const template = `t // ${spaced}`;
function codemodeHostHook(op) { return JSON.stringify([op, spaced, url, template]); }
// the last line is a comment and the file has no final newline"""


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_files_keep_comments_and_strings_with_double_slashes(tmp_path: Path):
    """Line comments and strings holding "//" survive; a file's statements cannot run into the next file."""
    source = prelude_source.load(_write(tmp_path, {"first.js": FIRST, "second.js": SECOND}), ("first.js", "second.js"))
    engine = GuestEngine(prelude=compile_prelude(source))
    engine.configure("{}", 8 * 1024 * 1024)
    # The stand-in hook answers every operation with its arguments' texts: "args" hands its JSON text over.
    assert jsoncodec.loads(engine.request_args(0)) == ["args", "a // b", "https://example.com//x", "t // a // b"]


def test_a_syntax_error_names_the_file_and_its_line(tmp_path: Path):
    """A broken prelude fails at compile time, naming the file and line to fix."""
    folder = _write(tmp_path, {"first.js": FIRST, "broken.js": "// fine\nconst ok = 1;\nconst = 2;\n"})
    with pytest.raises(EngineFault, match=r"SyntaxError.* at broken\.js:3:"):
        compile_prelude(prelude_source.load(folder, ("first.js", "broken.js")))


def test_a_block_cannot_straddle_two_files(tmp_path: Path):
    """A brace opened in one file and closed in the next parses only joined, so the per-file check finds it."""
    folder = _write(tmp_path, {"open.js": "if (true) {\n", "close.js": "}\nfunction codemodeHostHook() {}\n"})
    compile_prelude(prelude_source.load(folder, ("open.js", "close.js")))  # joined, the pair parses...
    with pytest.raises(EngineFault, match=r"open\.js"):
        compile_prelude(prelude_source.load(folder, ("open.js",)))  # ...alone, the first does not


@pytest.mark.parametrize("name", prelude_source.FILES)
def test_each_shipped_file_compiles_on_its_own(name: str):
    """Every prelude file is a complete list of statements, so no construct spans a file boundary."""
    assert compile_prelude(prelude_source.load(names=(name,)))


def test_the_file_list_is_the_folder():
    """No prelude file is left out of the closure, and none is listed twice or missing."""
    shipped = sorted(p.name for p in prelude_source.folder().iterdir() if p.name.endswith(".js"))
    assert sorted(prelude_source.FILES) == shipped
    assert len(set(prelude_source.FILES)) == len(prelude_source.FILES)


def test_each_file_stays_small():
    """Split by concern: no prelude file grows past 400 lines."""
    for name in prelude_source.FILES:
        lines = prelude_source.folder().joinpath(name).read_text(encoding="utf-8").count("\n")
        assert lines < 400, (name, lines)


def test_locate_maps_closure_lines_to_files():
    """Line numbers of the joined text map back to each file's own lines."""
    source = prelude_source.PreludeSource("", ((3, "a.js"), (10, "b.js")))
    assert [source.locate(n) for n in (1, 3, 9, 10, 12)] == [
        "<prelude closure>:1",
        "a.js:1",
        "a.js:7",
        "b.js:1",
        "b.js:3",
    ]


def test_loading_the_precompiled_prelude_stays_cheap():
    """A fresh engine loads the prelude's bytecode (~0.25 ms measured) instead of parsing its source (~2 ms)."""
    GuestEngine()
    best = float("inf")
    for _ in range(20):
        start = time.process_time()
        GuestEngine()
        best = min(best, time.process_time() - start)
    assert best < 0.001, best
