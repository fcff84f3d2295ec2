"""The guest prelude's checks: its generated caps file is current, and it type-checks as the engine runs it.

* ``guest_runtime/quickjs/prelude/guest_config.js`` is generated from ``guest_runtime/guest_config.py`` (the
  guest config's caps and their defaults); ``--write-config`` rewrites it, otherwise a stale file fails.
* ``tsc`` (installed in ``tests/node`` by ``scripts/test``) checks the prelude as
  ``guest_runtime.quickjs.prelude_source`` joins it: the one function body the driver compiles, with the
  compiler options of ``guest_runtime/quickjs/prelude/jsconfig.json`` and the declarations of
  ``prelude/scope.d.ts``.  In that one scope a name used before the file declaring it has run, or one
  nothing uses, is an error like a type error.  Errors are reported at the prelude file and line
  (``PreludeSource.locate``), not at the joined text's.

Editors read the same ``jsconfig.json`` and check each file as a script of one shared scope (which
cannot see the order the files run in).  ``scripts/check`` runs this script;
``tests/guest_runtime/quickjs/test_prelude_types.py`` runs ``type_errors`` on the shipped prelude and on copies
with planted mistakes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from guest_runtime import guest_config
from guest_runtime.quickjs import prelude_source  # noqa: E402  (after the path is set)

PRELUDE = Path(str(prelude_source.folder()))
TSC = ROOT / "tests" / "node" / "node_modules" / ".bin" / "tsc"
#: One error of tsc's plain output: ``file(line,col): error TSnnnn: message``.
_ERROR = re.compile(r"^(?P<file>[^(\s]+)\((?P<line>\d+),(?P<col>\d+)\): (?P<message>.*)$")


def stale_config() -> str | None:
    """Why the generated ``guest_config.js`` differs from what ``guest_config.py`` makes now, or None."""
    if guest_config.PRELUDE_FILE.read_text(encoding="utf-8") == guest_config.prelude_file():
        return None
    return f"{guest_config.PRELUDE_FILE.relative_to(ROOT)} is stale: run {guest_config.REGENERATE}"


def type_errors(folder: Path = PRELUDE) -> list[str]:
    """tsc's errors for the prelude in ``folder`` as it is joined, at ``file.js:line:col``; empty when it checks."""
    if not TSC.exists():
        raise FileNotFoundError(f"TypeScript compiler not found at {TSC}; run `npm ci --prefix tests/node` first")
    source = prelude_source.load(folder)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "prelude.js").write_text(source.text + ";\n", encoding="utf-8")  # the driver's one expression
        shutil.copy(folder / "scope.d.ts", work / "scope.d.ts")
        config = {"extends": str(folder / "jsconfig.json"), "files": ["scope.d.ts", "prelude.js"]}
        (work / "tsconfig.json").write_text(json.dumps(config), encoding="utf-8")
        result = subprocess.run(
            [str(TSC), "-p", str(work / "tsconfig.json"), "--pretty", "false"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=work,
        )
    errors = [_located(line, source) for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 and not errors:
        errors = [f"tsc failed ({result.returncode}) without naming an error: {result.stderr.strip()}"]
    return errors


def _located(line: str, source: prelude_source.PreludeSource) -> str:
    """A line of tsc's output with a place in the joined text moved to its prelude file's line."""
    found = _ERROR.match(line)
    if found is None or found["file"] != "prelude.js":
        return line  # a message's continuation, or an error in scope.d.ts
    return f"{source.locate(int(found['line']))}:{found['col']}: {found['message']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--write-config", action="store_true", help="rewrite guest_config.js from guest_config.py")
    args = parser.parse_args()
    if args.write_config:
        guest_config.PRELUDE_FILE.write_text(guest_config.prelude_file(), encoding="utf-8")
    problems = [stale] if (stale := stale_config()) else []
    problems += type_errors()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
