"""Size rules for the packages: no function over 60 lines (as formatted); classes over 20 methods reported.

A longer function does several steps: split it by step.  Nested functions count toward the function
that holds them: a closure factory is as long as its closures.  The number of a class's methods is a
guide, not a goal (a class bent to stay under a number is worse than one that says what it is): run
``python -m tests.test_sizes`` (``scripts/check`` does) to see the classes over it, and split those that
do several jobs.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bridge", "guest_runtime", "service", "codemode_client")
MAX_METHODS = 20
MAX_FUNCTION_LINES = 60


def _over() -> tuple[list[str], list[str]]:
    """Functions over the line cap and classes over the method guide, as ``path::name``."""
    long: list[str] = []
    wide: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            functions, classes = _over_in(ast.parse(path.read_text(encoding="utf-8")))
            long += [f"{rel}::{name}" for name in functions]
            wide += [f"{rel}::{name} ({count} methods)" for name, count in classes]
    return long, wide


def _over_in(tree: ast.Module) -> tuple[list[str], list[tuple[str, int]]]:
    """Functions (``Class.method`` or ``function``) over the line cap, and classes over the method guide."""
    long: list[str] = []
    wide: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                methods = [n for n in child.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                if len(methods) > MAX_METHODS:
                    wide.append((prefix + child.name, len(methods)))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert child.end_lineno is not None
                if child.end_lineno - child.lineno + 1 > MAX_FUNCTION_LINES:
                    long.append(prefix + child.name)
                # nested functions are counted in their holder's lines, not again on their own

    visit(tree, "")
    return long, wide


def test_no_function_over_60_lines():
    """Every function in the packages has at most 60 lines (classes over 20 methods are only reported)."""
    long, _ = _over()
    assert not long, f"over {MAX_FUNCTION_LINES} lines (split by step): {long}"


def test_the_rules_see_a_long_function_and_a_wide_class():
    """The checker itself: a 61-line function and a 21-method class are found, nested ones by their path."""
    body = "\n".join(["    x = 1"] * 60)
    wide = "\n".join(f"    def m{i}(self): pass" for i in range(21))
    at_limit = "\n".join(["        x = 1"] * 59)  # with its def line: exactly 60
    tree = ast.parse(f"def long():\n{body}\n\nclass Wide:\n{wide}\n\nclass Ok:\n    def fine(self):\n{at_limit}\n")
    assert _over_in(tree) == (["long"], [("Wide", 21)])


if __name__ == "__main__":
    for name in _over()[1]:
        print(f"over the {MAX_METHODS}-method guide: {name}")
