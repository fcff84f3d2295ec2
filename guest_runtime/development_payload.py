"""The tests' stand-in for an attacker's code in a confined process, loaded only in a development checkout.

The compromise tests start a worker or a helper with a plan in a variable of its environment; the
process then loads ``tests/support/<name>.py`` before it confines itself and, once confined, runs that
payload instead of serving.  Only a development checkout has ``tests/`` (it does not ship), and only the
tests set the variable: a process outside a checkout that is given it anyway refuses to start.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

#: The checkout the packages were imported from (``tests/`` beside them only in development).
ROOT = Path(__file__).resolve().parents[1]


def development_payload(variable: str, name: str) -> tuple[ModuleType, str] | None:
    """``tests/support/<name>.py``, loaded, and the plan ``variable`` holds; None when it is not set."""
    plan = os.environ.get(variable)
    if plan is None:
        return None
    path = ROOT / "tests" / "support" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if not path.is_file() or spec is None or spec.loader is None:
        raise SystemExit(f"{variable} is set but this is not a development checkout: refused")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, plan
