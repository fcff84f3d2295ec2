"""Pre-checks on cell source, run before any worker is involved.

Two mistakes are common enough to deserve their own answer: shell commands sent to a
JavaScript runner (``ls -la``, ``bash -c …``), and module access (``require``, ``import``).
Both are refused as ``invalid_input`` with a message that says what to do instead.  The module
check scans code with strings, template literals, comments and regex literals blanked out, and
after decoding ``\\uXXXX`` escapes, so ``requ\\u0069re("fs")`` is caught and ``"require("`` in a
string is not.  Syntax errors are found by the engine itself in the worker.

Every check here is linear in the size of the source: the source is caller-sized and the checks
run on the event loop.  The literal scanner is one left-to-right pass over tokens (each regex it
uses has possessive quantifiers, so a failed match never backtracks), and the line regexes
anchor on one line each without nested quantifiers.
"""

from __future__ import annotations

import asyncio
import itertools
import re

SHELL_HINT = (
    "this looks like a shell command, but cells run JavaScript (the body of an async function). "
    "There is no shell, file system or process access; call the available tools instead "
    "(see catalog.search(query) and API.list()), and `return` the value you want back."
)
MODULE_HINT = (
    "module access is disabled: require(...), import(...) and import/export statements are not "
    "available in cells. Use the tools exposed as globals (catalog.all(), catalog.search(query)) "
    "and the built-ins of the language."
)

#: A shell command someone pastes is short; a longer line is left to the engine (a SyntaxError is
#: still a clear invalid_input), so no single regex call holds the interpreter for long on 1 MiB.
MAX_SHELL_LINE = 4096

_SHELL_COMMANDS = (
    "ls|pwd|cd|cat|echo|grep|egrep|rg|find|bash|sh|zsh|git|npm|npx|pnpm|yarn|pip|pip3|python|python3|"
    "node|curl|wget|mkdir|rm|rmdir|cp|mv|touch|chmod|chown|sudo|apt|apt-get|brew|make|docker|kubectl|"
    "ps|kill|top|head|tail|less|more|which|whoami|env|export|source|sed|awk|tar|unzip|ssh|scp|cargo|go"
)
# A command, then nothing or whitespace and arguments free of JavaScript punctuation (pipelines
# such as `cat notes.txt | grep todo` included: `|` is not a JavaScript hint).
_SHELL_LINE = re.compile(rf"\s*(?:\$\s+)?(?:sudo\s+)?(?:{_SHELL_COMMANDS})(?:\s[^;(){{}}=]*)?")
# Leading blanks stop at the line end: `\s*` here would rescan every following blank line.
_SHELL_ANYWHERE = re.compile(r"^[^\S\n]*(?:\$[^\S\n]+)?(?:bash|sh|zsh)\s+-c\s", re.MULTILINE)
# A line with something other than blanks that is not a `#` comment.
_CONTENT_LINE = re.compile(r"^[^\S\n]*+[^\s#][^\n]*", re.MULTILINE)
_JS_HINTS = re.compile(r"[;(){}=]|\b(?:return|await|const|let|var|function)\b")

_UNICODE_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]+)\}|\\u([0-9a-fA-F]{4})")
#: Substring tests, not a regex alternation: ~10x faster on the event loop, same verdict.
_MODULE_WORDS = ("require", "import", "export")
_MODULE_CALL = re.compile(r"(?<![\w$.])(?:require|import)\s*+\(")
_MODULE_STATEMENT = re.compile(r"(?:^|[;{}\n])[^\S\n]*+(?:import\s*+[\w${*'\"]|export\s++[\w{*])")

# Where a `/` starts a regex literal rather than a division (after these, or at the start).
_REGEX_AFTER = frozenset(
    ("", "(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "+", "-", "*", "%", "<", ">", "~", "^")
)
_STOP_TOP = re.compile(r"[\"'`/]")
_STOP_IN_SUBSTITUTION = re.compile(r"[\"'`/{}]")  # inside `${...}` braces decide where code ends
_STRING = {
    "'": re.compile(r"'(?:[^'\\\n]++|\\.)*+'?", re.DOTALL),
    '"': re.compile(r'"(?:[^"\\\n]++|\\.)*+"?', re.DOTALL),
}
_TEMPLATE_TEXT = re.compile(r"(?:[^`\\$]++|\\.|\$(?!\{))*+", re.DOTALL)
# A regex literal up to (not including) its closing "/"; it stops early at an unescaped newline.
_REGEX_BODY = re.compile(r"/(?:[^\\/\[\n]++|\\.|\[(?:[^\\\]\n]++|\\.)*+\]?)*+", re.DOTALL)


def looks_like_shell(code: str) -> bool:
    """True when the source reads as shell commands rather than JavaScript."""
    # Only the first six lines with content matter: more than five is a script, not a command.
    lines = [m.group().rstrip() for m in itertools.islice(_CONTENT_LINE.finditer(code), 6)]
    if not lines:
        return False
    if "-c" in code and _SHELL_ANYWHERE.search(code) and not _JS_HINTS.search(code.split("\n", 1)[0].split("-c", 1)[0]):
        return True
    if len(lines) > 5 or any(len(ln) > MAX_SHELL_LINE for ln in lines):
        return False
    return all(_SHELL_LINE.fullmatch(ln) and not _JS_HINTS.search(ln) for ln in lines)


def _blank(code: str, start: int, end: int) -> str:
    """What a literal or comment leaves behind: a separator, a newline if it spans lines.

    The newline keeps a statement start after it visible to the import/export check.
    """
    return "\n" if code.find("\n", start, end) >= 0 else " "


def blank_literals(code: str) -> str:
    """Return ``code`` with each string, template, comment and regex literal replaced by a separator.

    Code inside template substitutions (``${...}``, nested to any depth) stays.  A `/` where an
    expression may start opens a regex literal; if it does not close before an unescaped newline
    the `/` is kept and no regex literal is tried again before the point where that scan stopped
    (such code is not valid JavaScript, and retrying at every later `/` would rescan the same
    text each time).
    """
    return _LiteralBlanker(code).blanked()


class _LiteralBlanker:
    """One left-to-right scan of ``blank_literals``: each step consumes from ``i`` and appends to ``out``.

    Every step moves ``i`` forward, and each character is looked at a bounded number of times (the
    regex retry rule above), so the scan is linear in the source.
    """

    def __init__(self, code: str) -> None:
        self.code = code
        self.out: list[str] = []
        self.substitutions: list[int] = []  # open `${` depths, innermost last: brace depth inside each
        self.in_template = False
        self.prev = ""  # last significant code character ("x" for a word or literal)
        self.no_regex_before = 0  # a failed regex literal scanned up to here: no new one starts before it
        self.i = 0

    def blanked(self) -> str:
        n = len(self.code)
        while self.i < n:
            if self.in_template:
                self._template_text()
                continue
            stop = (_STOP_IN_SUBSTITUTION if self.substitutions else _STOP_TOP).search(self.code, self.i)
            j = stop.start() if stop else n
            self._code(j)
            if stop is None:
                break
            self._stop(j)
        return "".join(self.out)

    def _template_text(self) -> None:
        """Template text up to its closing backtick or its next ``${``."""
        code, i = self.code, self.i
        j = _TEMPLATE_TEXT.match(code, i).end()  # type: ignore[union-attr]  # matches "" at least
        self.out.append(_blank(code, i, j))
        if j >= len(code):
            self.i = j
            return
        self.in_template = False
        if code[j] == "`":
            self.out.append(" ")
            self.prev = "x"
            self.i = j + 1
        else:  # "${"
            self.out.append("  ")
            self.substitutions.append(0)
            self.prev = "{"
            self.i = j + 2

    def _code(self, j: int) -> None:
        """Plain code up to ``j`` stays; its last significant character decides what a later `/` is."""
        if j > self.i:
            run = self.code[self.i : j]
            self.out.append(run)
            tail = run.rstrip()
            if tail:
                last = tail[-1]
                self.prev = "x" if last.isalnum() or last in "_$" else last

    def _stop(self, j: int) -> None:
        """The character at ``j`` may open or close a literal or a substitution."""
        code, c = self.code, self.code[j]
        self.i = j + 1
        if c in "{}":
            self._brace(c)
        elif c == "`":
            self.out.append(" ")
            self.in_template = True
        elif c != "/":
            self.i = _STRING[c].match(code, j).end()  # type: ignore[union-attr]  # the quote at least
            self.out.append(" ")
            self.prev = "x"
        elif code.startswith("//", j):
            end = code.find("\n", j)
            self.i = len(code) if end < 0 else end
            self.out.append(" ")
        elif code.startswith("/*", j):
            end = code.find("*/", j + 2)
            self.i = len(code) if end < 0 else end + 2
            self.out.append(_blank(code, j, self.i))
        else:
            self._slash(j)

    def _brace(self, c: str) -> None:
        """A brace inside a substitution: the one closing it goes back to template text."""
        if c == "}" and self.substitutions[-1] == 0:
            self.substitutions.pop()
            self.out.append(" ")
            self.in_template = True
            return
        self.substitutions[-1] += 1 if c == "{" else -1
        self.out.append(c)
        self.prev = c

    def _slash(self, j: int) -> None:
        """A `/` that is not a comment: a regex literal where an expression may start, else division."""
        if self.prev in _REGEX_AFTER and j >= self.no_regex_before:
            end = _REGEX_BODY.match(self.code, j).end()  # type: ignore[union-attr]  # the "/" at least
            if self.code.startswith("/", end):
                self.i = end + 1
                self.out.append(" ")
                self.prev = "x"
                return
            self.no_regex_before = end
        self.out.append("/")
        self.prev = "/"


def _decode_escapes(code: str) -> str:
    if "\\u" not in code:
        return code

    def repl(m: re.Match[str]) -> str:
        digits = m.group(1) or m.group(2)
        if len(digits) > 8:  # past U+10FFFF anyway; skip converting a huge number
            return m.group(0)
        try:
            return chr(int(digits, 16))
        except (ValueError, OverflowError):
            return m.group(0)

    return _UNICODE_ESCAPE.sub(repl, code)


def uses_modules(code: str) -> bool:
    """True when the code calls require()/import() or has import/export statements."""
    decoded = _decode_escapes(code)
    if not any(word in decoded for word in _MODULE_WORDS):
        return False  # blanking only removes text, so no module word anywhere means none in code
    scanned = _decode_escapes(blank_literals(code))
    return bool(_MODULE_CALL.search(scanned) or _MODULE_STATEMENT.search(scanned))


#: Longer sources are checked on a worker thread: linear work on 1 MiB of code still takes a
#: few hundred milliseconds, which the event loop must not spend in one piece.
OFF_LOOP_CHARS = 16 * 1024


async def source_problem(code: str) -> str | None:
    """``check_source`` for the event loop: long sources are checked off it."""
    if len(code) <= OFF_LOOP_CHARS:
        return check_source(code)
    return await asyncio.to_thread(check_source, code)


def check_source(code: str) -> str | None:
    """Return the ``invalid_input`` message for source that must not run, else None."""
    if looks_like_shell(code):
        return SHELL_HINT
    if uses_modules(code):
        return MODULE_HINT
    return None
