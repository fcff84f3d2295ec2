"""The prelude type-checks: ``tsc`` over the one function body ``prelude_source`` joins its files into.

``scripts/check_prelude.py`` runs the check (``scripts/check`` runs that script): the joined prelude
with the compiler options of ``guest_runtime/quickjs/prelude/jsconfig.json`` and the declarations of
``prelude/scope.d.ts`` (the engine's call sites, the hook's operations).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from guest_runtime.quickjs import engine, prelude_source

PRELUDE = Path(str(prelude_source.folder()))


def _checker() -> ModuleType:
    script = PRELUDE.parents[2] / "scripts" / "check_prelude.py"
    spec = importlib.util.spec_from_file_location("check_prelude", script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECKER = _checker()


def _type_errors(folder: Path) -> list[str]:
    try:
        errors: list[str] = CHECKER.type_errors(folder)
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    return errors


def test_the_prelude_type_checks():
    """The shipped prelude passes its own strict check, and its generated caps file is current."""
    assert _type_errors(PRELUDE) == []
    assert CHECKER.stale_config() is None


@pytest.mark.parametrize(
    ("name", "old", "new", "error"),
    [
        # A cap the configuration does not have: the key is one letter short.
        ("requests.js", "config.maxPendingRequests)", "config.maxPendingRequest)", "TS2551"),
        # serialise's nesting depth left out: undefined would reach enclosing().
        ("output.js", "serialise(v, false, 0)", "serialise(v, false)", "TS2554"),
        # A name used before the file that declares it has run (state.js runs after core.js).
        ("core.js", "const ObjectCreate", "const early = UNAWAITED;\nconst ObjectCreate", "TS2448"),
        # A hook operation the engine never calls.
        ("hook.js", 'case "take":', 'case "takeAll":\n    case "take":', "TS2678"),
        # A captured built-in nothing uses.
        ("core.js", "const ArrayIsArray", "const stringTrim = String.prototype.trim;\nconst ArrayIsArray", "TS6133"),
    ],
)
def test_a_planted_mistake_fails_the_check(tmp_path: Path, name: str, old: str, new: str, error: str):
    """The check is not vacuous: each planted mistake fails it, at the file and line of the mistake."""
    copy = tmp_path / "prelude"
    shutil.copytree(PRELUDE, copy)
    source = (copy / name).read_text(encoding="utf-8")
    assert old in source, f"{name} no longer holds {old!r}: plant the mistake elsewhere"
    planted = source.replace(old, new, 1)
    (copy / name).write_text(planted, encoding="utf-8")
    line = planted[: planted.index(new)].count("\n") + 1  # the mistake is on the first planted line
    errors = _type_errors(copy)
    assert any(re.match(rf"{re.escape(name)}:{line}:\d+: error {error}:", e) for e in errors), errors


def test_editors_see_the_files_in_the_order_they_run():
    """jsconfig.json, which editors read, lists every prelude file, in the loader's order."""
    config = json.loads((PRELUDE / "jsconfig.json").read_text(encoding="utf-8"))
    assert config["files"] == ["scope.d.ts", *prelude_source.FILES]


def test_the_declared_hook_operations_are_the_ones_driver_calls():
    """scope.d.ts declares the operations the engine (quickjs/engine.py) calls the hook with, and no other."""
    declared = set(re.findall(r'\| "(\w+)"', (PRELUDE / "scope.d.ts").read_text(encoding="utf-8")))
    called = set(re.findall(r'self\._(?:call|hook)\(\s*"(\w+)"', Path(engine.__file__).read_text(encoding="utf-8")))
    assert declared == called
