"""Source pre-checks: what they refuse, what they let through, and that they run in linear time."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.runtime.source_checks import (
    MODULE_HINT,
    SHELL_HINT,
    blank_literals,
    check_source,
    looks_like_shell,
    source_problem,
    uses_modules,
)

MiB = 1024 * 1024


@pytest.mark.parametrize(
    "code",
    [
        "ls -la",
        "pwd",
        "bash -c 'echo hi'",
        "cat notes.txt | grep todo",
        "$ git status",
        "sudo apt-get install jq",
        "ls\npwd",
        "# list files\nls -la",
        "  git log --oneline  ",
    ],
)
def test_shell_like_text_is_shell(code):
    """Commands, pipelines, `$ ` prompts, `sudo` and `bash -c` read as shell."""
    assert looks_like_shell(code)
    assert check_source(code) == SHELL_HINT


@pytest.mark.parametrize(
    "code",
    [
        "const ls = [1, 2];\nconst pwd = 'x';\nreturn ls.length + pwd.length",
        "ls()",
        "return 1",
        "x = 1",
        "lsx -la",
        "ls " + "a " * 27 + ";",
        "ls\npwd\ncd\nls\npwd\nls",
        "# only a comment",
    ],
)
def test_javascript_and_long_scripts_are_not_shell(code):
    """JavaScript punctuation or keywords, unknown commands and more than five lines are not shell."""
    assert not looks_like_shell(code)


@pytest.mark.parametrize(
    "code",
    [
        'const fs = require("fs"); return 1',
        'const m = await import("fs"); return 1',
        'import fs from "fs";\nreturn 1',
        "export const a = 1;",
        'const fs = requ\\u0069re("fs"); return 1',
        'requ\\u{69}re("x")',
        '`${require("fs")}`',
        'x = `a${`b${import("q")}`}`',
        "x = 1;\n  import {a} from 'b'",
        "/* note */ require('x')",
        "x = /re/; require('x')",
        "x = a / b / require('q')",
        "require  (1)",
    ],
)
def test_module_access_is_found_in_code(code):
    """require()/import() calls and import/export statements in code, also unicode-escaped."""
    assert uses_modules(code)
    assert check_source(code) == MODULE_HINT


@pytest.mark.parametrize(
    "code",
    [
        '// require("fs")\nreturn "call require(x) or import(y)"',
        "x = 'require(\"fs\")'",
        "x = /require(/",
        "/* import x from 'y' */",
        "`require(`",
        "obj.require('x')",
        "x.import('y')",
        "const important = 1",
        "`${ '{' } require(`",
        "x = `${a}` + 'import(b)'",
        "const s = /[/]import(/g",
    ],
)
def test_module_words_in_literals_or_members_are_not_module_access(code):
    """Strings, templates, comments, regex literals and member names do not count."""
    assert not uses_modules(code)
    assert check_source(code) is None


def test_blank_literals_keeps_code_and_substitutions():
    """Literals become separators (newlines kept); code in `${...}` stays, to any nesting depth."""
    assert blank_literals("a = 'x' + \"y\";").split() == ["a", "=", "+", ";"]
    assert blank_literals("/* one\ntwo */ b") == "\n b"
    assert blank_literals("t = `p${ f({k: `q${g()}`}) }s`").split() == ["t", "=", "f({k:", "g()", "})"]
    assert blank_literals("x = a / b; y = /re/g").split() == ["x", "=", "a", "/", "b;", "y", "=", "g"]


def test_unclosed_regex_keeps_the_slash_and_scans_on():
    """A `/` that opens no regex literal on its line stays code; the next line is scanned normally."""
    assert blank_literals("x = [/a\ny = /b/").split() == ["x", "=", "[/a", "y", "="]
    assert blank_literals("x = [/a\\\n[/b\ny = /c/").split() == ["x", "=", "[/a\\", "[/b", "y", "="]


def test_long_source_is_checked_off_the_event_loop():
    """`source_problem` answers like `check_source` for short and long sources."""
    long_shellish = "ls -la\n" + "# " + "a" * (64 * 1024)
    long_module = "x = 1;\n" * 10_000 + "require('fs')"
    assert asyncio.run(source_problem("ls -la")) == SHELL_HINT
    assert asyncio.run(source_problem(long_shellish)) == SHELL_HINT
    assert asyncio.run(source_problem(long_module)) == MODULE_HINT


def test_a_shell_line_longer_than_any_pasted_command_is_left_to_the_engine():
    """A 1 MiB "command" line is not matched by the shell regexes (one such call would hold the
    interpreter for a long time); the engine refuses it as a SyntaxError instead."""
    assert looks_like_shell("ls " + "a " * 2000)
    assert not looks_like_shell("ls " + "a " * 500_000)


@pytest.mark.slow
def test_event_loop_keeps_running_while_a_long_source_is_checked():
    """Checking 1 MiB of hostile code leaves the loop free: a 1 ms ticker is never held for long."""
    code = _fill("[/", MiB)

    async def scenario() -> tuple[float, str | None]:
        longest = 0.0
        done = asyncio.Event()
        ticking = asyncio.Event()

        async def ticker() -> None:
            nonlocal longest
            last = time.perf_counter()
            ticking.set()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now

        tick = asyncio.create_task(ticker())
        await ticking.wait()
        problem = await source_problem(code)
        done.set()
        await tick
        return longest, problem

    longest, problem = asyncio.run(scenario())
    assert problem is None
    assert longest < 0.2, longest  # checked on the loop, this input holds it for ~0.5 s


# ---- linear time -----------------------------------------------------------------------------

# The reproductions that froze the event loop, plus fragments that stress each scanner state.
ISSUE_FRAGMENTS = ["ls a ", "\n", "[/"]
HOSTILE_FRAGMENTS = ISSUE_FRAGMENTS + [
    "a ",
    "''",
    "``",
    "`${",
    "`${{}",
    "{}",
    "/*",
    "//\n",
    "\\u0069",
    "\\u{",
    "import\n",
    ";import ",
    "(/",
    "/[",
    "$ ",
    "bash -c ",
    "require (",
    "'\\\n",
    "\\",
    "{}'\\\n[/",  # escaped newlines let a failing regex literal scan on to the end (found by hypothesis)
]
_fragments = (
    st.lists(
        st.one_of(st.sampled_from(HOSTILE_FRAGMENTS), st.text(alphabet="[]{}()/\\'\"`$;=\n *ux0-9a-z", max_size=6)),
        min_size=1,
        max_size=6,
    )
    .map("".join)
    .filter(bool)
)


def _fill(fragment: str, size: int, prefix: str = "require;") -> str:
    """``prefix`` (it defeats the no-module-word fast path) then ``fragment`` repeated to ``size``."""
    body = fragment * (size // len(fragment) + 1)
    return (prefix + body)[:size]


def _seconds(code: str, repeat: int = 3) -> float:
    """Best CPU time of this process for one check: other processes on a busy machine do not count."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        check_source(code)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize(
    "code",
    [
        "ls " + "a " * 27 + ";",
        "x=1" + "\n" * 20000 + ";return 2",
        "x=1;" + "[/" * 8000,
    ],
    ids=["shell-words", "blank-lines", "unclosed-regex"],
)
def test_issue_reproductions_are_fast(code):
    """The reported inputs (10-12 s each before) take milliseconds."""
    assert _seconds(code, repeat=1) < 0.2


@pytest.mark.slow
@pytest.mark.parametrize("fragment", ISSUE_FRAGMENTS)
def test_one_mib_of_reported_fragments_is_bounded(fragment):
    """1 MiB (the code cap) of each reported fragment is checked well under a second's order."""
    assert _seconds(_fill(fragment, MiB), repeat=1) < 3.0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fragments)
def test_one_mib_of_generated_fragments_is_bounded(fragment):
    """1 MiB of any repeated hostile fragment stays within an absolute bound."""
    assert _seconds(_fill(fragment, MiB), repeat=1) < 3.0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fragments, st.sampled_from(["", "require;", "`${", "x = 1;\n"]))
def test_checks_run_in_linear_time(fragment, prefix):
    """Eight times the input costs about eight times the time (quadratic would be 64 times)."""
    small = _seconds(_fill(fragment, 32 * 1024, prefix))
    large = _seconds(_fill(fragment, 256 * 1024, prefix))
    assert large <= 24 * small + 0.02, (small, large, fragment, prefix)


@pytest.mark.parametrize("fragment", HOSTILE_FRAGMENTS)
def test_each_hostile_fragment_scales_linearly(fragment):
    """Every listed fragment, repeated behind a module word, costs linear time."""
    small = _seconds(_fill(fragment, 16 * 1024))
    large = _seconds(_fill(fragment, 128 * 1024))
    assert large <= 24 * small + 0.02, (small, large)
