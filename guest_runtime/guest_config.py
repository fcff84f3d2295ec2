"""The guest config's caps: their defaults, and the one rule by which both engines read them; and the
guest's fixed limits both engines hold a cell to.

Each run frame carries the cell's ``GuestConfig`` (``bridge.messages``): the tools and MCP servers
the guest's globals are built from, and its ``GuestCaps``, which both engines hold the cell's requests
to before a request exists (the host checks them again).  This module is the one source of the
caps' defaults and of how a config is read:

* the service sends every cap (``MAX_QUEUED_REQUESTS`` as it is; its settings ``max_pending_requests``
  and ``max_request_values`` default to the values here);
* the Monty engine reads a config with ``read_caps``;
* the QuickJS prelude reads it by the same rule (``prelude/state.js``, ``readCaps``), with the keys and
  defaults of ``prelude/guest_config.js``, which is generated from here (``prelude_file``):
  ``REGENERATE`` rewrites it, and the prelude check (``scripts/check_prelude.py``, also run by the
  suite) fails while it is stale.  ``tsc`` then checks the prelude against that generated type.

The rule: ``maxRequestBytes`` must be given; a cap left out takes its default (``maxQueuedBytes``:
``maxRequestBytes``, a burst may carry what one request may); a cap given must be a positive integer.
Engines are driven by the host, so a config outside the rule is the host's bug: EngineFault.

The fixed limits (``LIMITS``: value nesting, output entries, console output) are no setting; the host
re-checks the first two (``bridge``).  The Monty engine imports them from here, and the prelude reads
them from the same generated file, so no number is spelled in both languages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from bridge.jsoncodec import MAX_NESTING
from bridge.messages import GuestCaps
from bridge.output import MAX_OUTPUT_ENTRIES

from .errors import EngineFault

#: Host requests one synchronous burst of guest code may queue (not a setting: the bridge's control
#: frame is sized for it, ``bridge.messages.CONTROL_FRAME_BYTES``).
MAX_QUEUED_REQUESTS: Final = 1024
#: Host requests (tool calls, timers, yields) one cell may have pending at once.
MAX_PENDING_REQUESTS: Final = 128
#: JSON values one request's arguments may hold.
MAX_REQUEST_VALUES: Final = 1_000_000

#: The caps a config may leave out that have a value of their own (``maxQueuedBytes`` takes ``maxRequestBytes``'s).
DEFAULTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "maxQueuedRequests": MAX_QUEUED_REQUESTS,
        "maxPendingRequests": MAX_PENDING_REQUESTS,
        "maxRequestValues": MAX_REQUEST_VALUES,
    }
)

#: Characters of console output (JavaScript) or print output (Python) one cell keeps; a marker says the
#: rest was dropped.
CONSOLE_TOTAL: Final = 16384

#: The guest's fixed limits, under the names the prelude reads them by.
LIMITS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "MAX_NESTING": MAX_NESTING,  # arrays/objects a value crossing the bridge may nest
        "MAX_OUTPUT_ENTRIES": MAX_OUTPUT_ENTRIES,  # text()/json() entries one cell may emit
        "CONSOLE_TOTAL": CONSOLE_TOTAL,
    }
)

#: The generated prelude file, and the command that rewrites it.
PRELUDE_FILE = Path(__file__).parent / "quickjs" / "prelude" / "guest_config.js"
REGENERATE = "python scripts/check_prelude.py --write-config"


def read_caps(cfg: Mapping[str, object]) -> GuestCaps:
    """The caps of config ``cfg`` by the rule above; EngineFault names a cap outside it."""
    request_bytes = _cap(cfg, "maxRequestBytes", None)
    return {
        "maxRequestBytes": request_bytes,
        "maxQueuedRequests": _cap(cfg, "maxQueuedRequests", MAX_QUEUED_REQUESTS),
        "maxPendingRequests": _cap(cfg, "maxPendingRequests", MAX_PENDING_REQUESTS),
        "maxQueuedBytes": _cap(cfg, "maxQueuedBytes", request_bytes),
        "maxRequestValues": _cap(cfg, "maxRequestValues", MAX_REQUEST_VALUES),
    }


def _cap(cfg: Mapping[str, object], key: str, default: int | None) -> int:
    if key not in cfg and default is not None:
        return default
    value = cfg.get(key)
    # JSON has one number type: 1e6 is the integer the prelude reads it as.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    shown = json.dumps(value) if key in cfg else "missing"
    raise EngineFault(f"guest config {key} must be a positive integer, not {shown}")


def prelude_file() -> str:
    """The text of ``prelude/guest_config.js``: the caps' type for ``tsc``, the defaults the prelude reads,
    and the guest's fixed limits."""
    fields = ", ".join(f"{key}: number" for key in GuestCaps.__annotations__)
    return (
        "// @ts-check\n"
        f"// Generated from guest_runtime/guest_config.py by `{REGENERATE}`: edit that file, not this one.\n"
        "// The guest config's caps (the keys state.js's readCaps reads) and the defaults of those a config\n"
        "// may leave out; maxQueuedBytes left out is maxRequestBytes, which must be given.  Then the\n"
        "// guest's fixed limits.\n"
        "\n"
        f"/** @typedef {{Readonly<{{{fields}}}>}} GuestCaps */\n"
        "\n"
        f"const CAP_DEFAULTS = {{ {', '.join(f'{key}: {value}' for key, value in DEFAULTS.items())} }};\n"
        + "".join(f"const {name} = {value};\n" for name, value in LIMITS.items())
    )
