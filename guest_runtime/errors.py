"""Host-side faults of the guest runtime (guest *code* failures are data, not exceptions).

Every exception of the package derives from GuestRuntimeError and has a stable snake_case ``code``;
a subclass's code is the envelope failure code the worker reports for it (an EngineFault that is
an out-of-memory reports ``memory_limit_exceeded``).

GuestRuntimeError            base (code ``guest_runtime_error``)
 ├── GuestSyntaxError        the cell does not parse (code ``invalid_input``)
 ├── GuestTimeout            the cell ran past its wall deadline (code ``timeout``)
 ├── GuestFault              cell code broke a host hook call (a getter, setter or species that
 │                           throws); the engine is discarded, the worker stays (code ``uncaught_error``)
 ├── EngineFault             the engine or the prelude misbehaved (code ``runtime_unavailable``)
 └── ConfinementError        the process could not confine itself as its sandbox mode demands; it
                             exits before reading any guest byte (code ``sandbox_unavailable``)
"""

from __future__ import annotations


class GuestRuntimeError(Exception):
    """Raised for any failure of the guest runtime itself."""

    code = "guest_runtime_error"


class GuestSyntaxError(GuestRuntimeError):
    """Raised when the cell source fails to parse; nothing has run."""

    code = "invalid_input"


class GuestTimeout(GuestRuntimeError):
    """Raised when guest code is still running at the wall deadline."""

    code = "timeout"


class GuestFault(GuestRuntimeError):
    """Raised when cell code running inside a host hook call makes that call throw."""

    code = "uncaught_error"


# ---- the failure codes of a cell's own faults ----------------------------------------------------------
# The worker reports these in a failed cell's envelope, the same for JavaScript and Python cells; none is
# ``internal_error``, which means a fault of the service.

#: The cell's own code threw (or rejected a promise of its own) and nothing caught it: phase ``guest``; or
#: a host call's rejection (a tool error, a denied approval) reached the end of the cell uncaught: phase
#: ``bridge``.  The error text holds the error's ``Name: message`` and the cell's own frames.
UNCAUGHT_ERROR = GuestFault.code
#: The cell awaits something nothing can settle (no tool call, timer or yield_control is outstanding).
STALLED = "stalled"
#: The host requests the cell started at once do not fit one bridge frame.
REQUEST_LIMIT_EXCEEDED = "request_limit_exceeded"
#: The cell's allocations reached its memory limit: the engine's heap cap (the worker stays) or the
#: process's own limit (the worker is replaced).
MEMORY_LIMIT_EXCEEDED = "memory_limit_exceeded"


class EngineFault(GuestRuntimeError):
    """Raised when the engine cannot be driven (broken prelude, binding mismatch)."""

    code = "runtime_unavailable"


class ConfinementError(GuestRuntimeError):
    """Raised when a confinement layer the sandbox mode demands cannot be put in force."""

    code = "sandbox_unavailable"
