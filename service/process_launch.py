"""How the service starts a process that will confine itself: a worker or a helper, the same way.

Such a process reads hostile bytes, so nothing of the service may reach it by accident:

* **its own pipes only**: the caller hands it stdin, stdout and stderr; every other descriptor of
  the service is closed in the child (``close_fds``, the default of ``asyncio.create_subprocess_exec``);
* **an allow-listed environment**: the locale and nothing else, never the service's secrets
  (``CONFINED_ENVIRONMENT``), plus what the caller names on purpose;
* **a fixed working directory** (``/``) and an interpreter in isolated mode (``-I``: no
  ``PYTHON*`` variables, no user site, neither the script's directory nor the working directory on
  ``sys.path``), so it imports only the installed code: a ``bridge/__init__.py`` planted in the
  service's working directory, or a ``PYTHONPATH`` of the service's, is never imported.

Then the process confines itself (``guest_runtime.confinement``) before it reads a hostile byte.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: Environment variables a confined process inherits (when the service has them): the locale only.
CONFINED_ENVIRONMENT = ("LANG", "LC_ALL", "LC_CTYPE")
#: Where a confined process starts: a directory whose contents it never imports.
WORKING_DIRECTORY = "/"


def confined_command(module: str, *arguments: str) -> list[str]:
    """The command line of ``python -m module arguments`` in isolated mode, with this interpreter."""
    return [sys.executable, "-I", "-m", module, *arguments]


def confined_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of the service's environment, and ``extra``."""
    env = {name: os.environ[name] for name in CONFINED_ENVIRONMENT if name in os.environ}
    env.update(extra or {})
    return env
