"""Static type checks: mypy over the three packages and the client, all strict; `Any` kept rare.

Two runs, each with its own configuration and cache: the service's (pyproject.toml) over bridge/,
guest_runtime/, service/ and the client without its framework adapters, and the client's own
(client/pyproject.toml, every --strict flag) over the whole client, the frameworks' types followed.
The frameworks' types are most of a cold run's cost (about 30 of 45 s of CPU), so the service's
run, the one every change needs, stays at about 13 s cold; an incremental re-run takes a few seconds.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The installed packages are this interpreter's, whatever python_version the checks target.
MYPY = [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "--python-executable", sys.executable]


@pytest.mark.slow
def test_mypy_finds_no_type_errors():
    """`mypy` (configured in pyproject.toml) reports no error in bridge/, guest_runtime/, service/ or
    client/codemode_client/ (its framework adapters aside: the next test checks them)."""
    result = subprocess.run(
        [*MYPY, "bridge", "guest_runtime", "service", "client/codemode_client"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_checks_the_client_and_its_adapters_against_the_frameworks():
    """The client's own run (client/pyproject.toml, strict) reports no error in any client module, the
    framework adapters included, with pydantic-ai's, LangChain's and the Agents SDK's types followed."""
    result = subprocess.run(MYPY, cwd=ROOT / "client", capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every module was checked, the adapters among them: mypy names the count of files it checked.
    modules = len(list((ROOT / "client" / "codemode_client").rglob("*.py")))
    assert f"no issues found in {modules} source files" in result.stdout, result.stdout


#: Uses of ``Any`` as a type in service/ (``Any`` or ``typing.Any`` in the code, not in strings or
#: comments): each is at a library's boundary (jsonschema's validators, re2, pydantic's Field, ASGI
#: scopes, raw TOML tables) or a ``**kwargs`` pass-through.  The ceiling only goes down: where a real
#: type exists, name it (a class, a Protocol, a TypedDict, ``JsonValue``, ``object``).
ANY_IN_SERVICE_CEILING = 40


def _any_uses(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any")
        for node in ast.walk(tree)
    )


def test_any_is_rare_in_service():
    """service/ uses ``Any`` as a type at most ANY_IN_SERVICE_CEILING times (its real types are named)."""
    uses = {p: n for p in sorted((ROOT / "service").rglob("*.py")) if (n := _any_uses(p))}
    total = sum(uses.values())
    by_file = ", ".join(f"{p.relative_to(ROOT)} {n}" for p, n in sorted(uses.items(), key=lambda kv: -kv[1]))
    assert total <= ANY_IN_SERVICE_CEILING, f"{total} uses of Any in service/: {by_file}"


def test_the_any_count_sees_every_spelling():
    """The count finds ``Any`` in annotations, subscripts and ``typing.Any``, and not in strings or comments."""
    source = 'import typing\nfrom typing import Any\nx: Any = 1\ny: dict[str, typing.Any] = {}\nz = "Any"  # Any\n'
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.py"
        path.write_text(source)
        assert _any_uses(path) == 2
