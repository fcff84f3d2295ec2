"""The service's side of process confinement: what it asks of workers, and what they put in force.

``sandbox_options(mode, user)`` is what every worker and the body decoder helper are started with
(the mode, the worker user's uid and gid when the service runs as root, the seccomp filter built
once here).  ``SandboxStatus`` keeps what the first workers reported when the service started:
the layers the service logs, ``/readyz`` shows and the ``codemode_sandbox_layer`` gauge reports.
The confinement itself is ``guest_runtime.confinement``.
"""

from __future__ import annotations

import logging
import os
import pwd
from typing import TypedDict

from bridge.messages import SandboxMode, SandboxOptions, SandboxReport
from guest_runtime.confinement import LAYERS, PYTHON_CELL_RULES, build_filter, seccomp_program
from guest_runtime.errors import ConfinementError
from guest_runtime.monty_launcher import environment_monty, monty_files, runnable_monty
from service.errors import ConfigError

log = logging.getLogger("codemode.workers")


class SandboxReadiness(TypedDict):
    """What ``/readyz`` shows of the confinement."""

    mode: SandboxMode
    layers: dict[str, bool]  # each layer: in force or not
    missing: dict[str, str]  # layer -> why it is not in force


OFF_WARNING = (
    'sandbox = "off": workers run WITHOUT kernel confinement. A memory bug in QuickJS would give a '
    'guest the service\'s uid, its network and its files. Use sandbox = "auto" (the default) outside '
    "of debugging."
)


def worker_user(name: str) -> tuple[int, int]:
    """``(uid, gid)`` of ``worker_user``: a user name, or a numeric uid (its primary group, else the same number)."""
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        uid, gid = entry.pw_uid, entry.pw_gid
    except KeyError:
        if not name.isdigit():
            raise ConfigError(
                f"worker_user {name!r} is not a user of this system; name an unprivileged user "
                "(e.g. nobody) or give a numeric uid",
                need_param="worker_user",
            ) from None
        uid = gid = int(name)
    if uid == 0 or gid == 0:
        raise ConfigError(f"worker_user {name!r} is root; workers must run unprivileged", need_param="worker_user")
    return uid, gid


def sandbox_options(mode: SandboxMode, user: str, *, python_cells: bool = True) -> SandboxOptions:
    """The confinement every worker and the body decoder are asked for; with ``python_cells``, also what a
    worker that runs Python cells confines itself with (its filter, and the ``monty`` it may start)."""
    options: SandboxOptions = {"mode": mode}
    if python_cells:
        options["monty_binary"] = environment_monty()
    if mode == "off":
        return options
    if python_cells:  # workers drop to the worker user before they start their Monty child
        try:
            options["monty_binary"] = runnable_monty(options["monty_binary"])
        except (ConfinementError, OSError) as exc:
            raise ConfigError(
                f"python_cells = true, but Monty's runtime cannot be run: {exc}", need_param="python_cells"
            ) from None
    if os.geteuid() == 0:
        options["uid"], options["gid"] = worker_user(user)
    bpf, why = seccomp_program()
    if bpf:
        options["seccomp_bpf"] = bpf
    else:
        options["seccomp_missing"] = why
    if python_cells:
        try:
            options["monty_files"] = monty_files(options["monty_binary"])
        except ConfinementError as exc:
            raise ConfigError(
                f"python_cells = true, but Monty's runtime cannot be run: {exc}", need_param="python_cells"
            ) from None
        python_bpf, _ = build_filter(PYTHON_CELL_RULES)
        if python_bpf:
            options["python_seccomp_bpf"] = python_bpf
    return options


class SandboxStatus:
    """The layers the service's workers run under, as their ``ready`` frames reported them."""

    def __init__(self, options: SandboxOptions) -> None:
        self.options = options  # what workers and the body decoder are started with
        self.mode: SandboxMode = options.get("mode", "auto")
        self.report: SandboxReport | None = None

    def adopt(self, report: SandboxReport | None) -> None:
        """Take a started worker's report (None: no worker started) as the service's, and log it."""
        self.report = report
        if self.mode == "off":
            log.warning(OFF_WARNING)
        elif report is not None:
            missing = "; ".join(f"{layer} ({why})" for layer, why in report["missing"].items())
            log.log(
                logging.WARNING if missing else logging.INFO,
                "worker sandbox (%s): %s in force%s",
                self.mode,
                ", ".join(report["layers"]),
                f"; missing: {missing}" if missing else "",
            )

    def layers(self) -> dict[str, bool]:
        """Each layer: in force (True) or not (False); all False until a worker reported."""
        in_force = set(self.report["layers"]) if self.report is not None else set()
        return {layer: layer in in_force for layer in LAYERS}

    def as_json(self) -> SandboxReadiness:
        """What ``/readyz`` shows."""
        return {
            "mode": self.mode,
            "layers": self.layers(),
            "missing": dict(self.report["missing"]) if self.report is not None else {},
        }
