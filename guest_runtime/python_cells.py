"""What a worker process that runs Python cells adds to one that runs JavaScript only: Monty's client and
its one ``monty`` child (``PythonCells``), and its own confinement profile (``python_cells_confinement``).
The service starts the two kinds as separate processes (``service/runtime/workers/supply.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .confinement import Profile, confine, python_cells_profile
from .monty_launcher import environment_monty, monty_files

if TYPE_CHECKING:
    from collections.abc import Callable

    from bridge.messages import SandboxOptions, SandboxReport

    from .engine import Engine


class PythonCells:
    """What makes a Python cell's engine, and the worker's one Monty child they all run in.

    Monty's client is loaded here, when the worker starts: once confined it can open no file (but the
    ``monty`` binary), so a worker that runs Python cells loads it before, and a JavaScript one never does.
    """

    def __init__(self, binary: str | None, cpu: int | None = None) -> None:
        from .monty.engine import POOL, PythonEngine  # only in workers that run Python cells

        POOL.binary = binary
        POOL.placement.cpu = cpu  # where its child and the client's threads run (``monty/placement.py``)
        self.make: Callable[[], Engine] = PythonEngine
        #: Run by the worker whenever it has answered and waits: a finished cell's session goes back then.
        self.idle: Callable[[], None] = POOL.tidy
        self._start_child = POOL.start

    def confine(self, sandbox: SandboxOptions, keep_fds: tuple[int, ...]) -> SandboxReport:
        """Confine the worker with the Python cells' profile, then start its Monty child (confined as it is,
        reused by every Python cell of this worker)."""
        options, profile = python_cells_confinement(sandbox)
        report = confine(options, keep_fds, profile)
        self._start_child()
        return report


def python_cells_confinement(sandbox: SandboxOptions) -> tuple[SandboxOptions, Profile]:
    """How a worker that runs Python cells confines itself: its own filter (it starts the Monty child,
    which inherits it), Landlock leaving the ``monty`` binary and its libraries."""
    options: SandboxOptions = dict(sandbox)  # type: ignore[assignment]
    bpf = sandbox.get("python_seccomp_bpf")
    if bpf:
        options["seccomp_bpf"] = bpf
    else:  # the JavaScript worker's filter refuses the child: no filter, reported missing
        options.pop("seccomp_bpf", None)
        options["seccomp_missing"] = sandbox.get("seccomp_missing") or "no filter for a worker that runs Python cells"
    files = sandbox.get("monty_files")
    if not files and sandbox.get("mode", "auto") != "off":
        files = monty_files(sandbox.get("monty_binary") or environment_monty())
    return options, python_cells_profile(tuple(files or ()))
