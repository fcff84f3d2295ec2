"""Pre-checks on cell source, run before any worker is involved.

Two mistakes are common enough to deserve their own answer: shell commands sent to a
JavaScript runner (``ls -la``, ``bash -c …``), and module access (``require``, ``import``).
Both are refused as ``invalid_input`` with a message that says what to do instead.  The module
check scans code with strings, template literals, comments and regex literals blanked out, and
after decoding ``\\uXXXX`` escapes, so ``requ\\u0069re("fs")`` is caught and ``"require("`` in a
string is not.  Syntax errors are found by the engine itself in the worker.
"""

from __future__ import annotations

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

_SHELL_COMMANDS = (
    "ls|pwd|cd|cat|echo|grep|egrep|rg|find|bash|sh|zsh|git|npm|npx|pnpm|yarn|pip|pip3|python|python3|"
    "node|curl|wget|mkdir|rm|rmdir|cp|mv|touch|chmod|chown|sudo|apt|apt-get|brew|make|docker|kubectl|"
    "ps|kill|top|head|tail|less|more|which|whoami|env|export|source|sed|awk|tar|unzip|ssh|scp|cargo|go"
)
_SHELL_LINE = re.compile(
    rf"^\s*(?:\$\s+)?(?:sudo\s+)?(?:{_SHELL_COMMANDS})(?:\s+[^\s;(){{}}=]+(?:\s+[^;(){{}}=]+)*)?\s*$"
)
_SHELL_ANYWHERE = re.compile(r"^\s*(?:\$\s+)?(?:bash|sh|zsh)\s+-c\s", re.MULTILINE)
_PIPELINE = re.compile(rf"^\s*(?:{_SHELL_COMMANDS})\s[^;(){{}}=]*\|\s*(?:{_SHELL_COMMANDS})\b")
_JS_HINTS = re.compile(r"[;(){}=]|\b(?:return|await|const|let|var|function)\b")

_UNICODE_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]+)\}|\\u([0-9a-fA-F]{4})")
_MODULE_CALL = re.compile(r"(?<![\w$.])(?:require|import)\s*\(")
_MODULE_STATEMENT = re.compile(r"(?:^|[;{}\n])\s*(?:import\s*[\w${*'\"]|export\s+[\w{*])")


def looks_like_shell(code: str) -> bool:
    """True when the source reads as shell commands rather than JavaScript."""
    lines = [ln for ln in code.strip().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not lines:
        return False
    if _SHELL_ANYWHERE.search(code) and not _JS_HINTS.search(code.split("\n", 1)[0].split("-c", 1)[0]):
        return True
    if len(lines) > 5:
        return False
    return all(
        (_SHELL_LINE.match(ln) or _PIPELINE.match(ln)) and not _JS_HINTS.search(_strip_flags(ln))
        for ln in lines
    )


def _strip_flags(line: str) -> str:
    # "ls -la" has no JS punctuation, but "ls -la | grep x" would still be fine as shell.
    return line.replace("|", " ")


def blank_literals(code: str) -> str:
    """Return ``code`` with strings, templates, comments and regex literals replaced by spaces."""
    out: list[str] = []
    i = 0
    n = len(code)
    prev_significant = ""
    while i < n:
        c = code[i]
        nxt = code[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c == "/" and nxt == "*":
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", code[i:j]))
            i = j
            continue
        if c in "'\"`":
            j = i + 1
            while j < n and code[j] != c:
                if code[j] == "\\":
                    j += 1
                elif c != "`" and code[j] == "\n":
                    break
                j += 1
            j = min(j + 1, n)
            if c == "`":
                out.append(_template(code[i:j]))  # ${...} bodies hold code
            else:
                out.append(" " * (j - i))
            i = j
            prev_significant = "x"
            continue
        if c == "/" and (prev_significant in ("", "(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "+", "-", "*", "%", "<", ">", "~", "^")):
            j = i + 1
            in_class = False
            while j < n and code[j] != "\n":
                if code[j] == "\\":
                    j += 2
                    continue
                if code[j] == "[":
                    in_class = True
                elif code[j] == "]":
                    in_class = False
                elif code[j] == "/" and not in_class:
                    break
                j += 1
            if j < n and code[j] == "/":
                out.append(" " * (j + 1 - i))
                i = j + 1
                prev_significant = "x"
                continue
        out.append(c)
        if not c.isspace():
            prev_significant = c if not (c.isalnum() or c in "_$") else "x"
        i += 1
    return "".join(out)


def _template(body: str) -> str:
    """Blank a template literal but keep the code inside ``${...}``."""
    chars = [" " if ch != "\n" else "\n" for ch in body]
    depth = 0
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        if body.startswith("${", i) and depth == 0:
            depth = 1
            j = i + 2
            while j < len(body) and depth:
                if body[j] == "{":
                    depth += 1
                elif body[j] == "}":
                    depth -= 1
                if depth:
                    chars[j] = body[j]
                j += 1
            i = j
            continue
        i += 1
    return "".join(chars)


def _decode_escapes(code: str) -> str:
    def repl(m: re.Match[str]) -> str:
        try:
            return chr(int(m.group(1) or m.group(2), 16))
        except (ValueError, OverflowError):
            return m.group(0)

    return _UNICODE_ESCAPE.sub(repl, code)


def uses_modules(code: str) -> bool:
    """True when the code calls require()/import() or has import/export statements."""
    scanned = _decode_escapes(blank_literals(code))
    return bool(_MODULE_CALL.search(scanned) or _MODULE_STATEMENT.search(scanned))


def check_source(code: str) -> str | None:
    """Return the ``invalid_input`` message for source that must not run, else None."""
    if looks_like_shell(code):
        return SHELL_HINT
    if uses_modules(code):
        return MODULE_HINT
    return None
