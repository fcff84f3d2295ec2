"""The caps the guest prelude enforces, enforced again where guest requests reach the host.

The prelude refuses excess requests before they leave the guest, but it runs inside the guest's
engine; a guest that gets around it (an engine bug, a prelude it managed to reconfigure) meets
the same caps here, as the same kind of catchable rejection, so no cap rests on code the guest
can reach.  Pending requests in flight are capped in ``HostRequests.dispatch``; output sizes by
``bridge.output``; a burst larger than one frame never arrives (the frame cap).
"""

from __future__ import annotations

from typing import Any

from bridge import jsoncodec

from .dispatch import GuestError


def measure_request(args: Any, max_request_bytes: int) -> tuple[int, GuestError | None]:
    """The UTF-8 size of a guest request's JSON arguments, and why the host refuses them (None: within caps)."""
    try:
        size = len(jsoncodec.dumps(args))
    except jsoncodec.JSONEncodeError:
        return 0, GuestError(
            f"request arguments are nested too deep or are not JSON; values may nest at most "
            f"{jsoncodec.MAX_NESTING} levels of arrays/objects",
            code="invalid_input",
            name="TypeError",
        )
    if size > max_request_bytes:
        return size, GuestError(
            f"request arguments are {size} bytes of JSON, over the {max_request_bytes}-byte "
            "max_request_bytes cap; pass less data per call",
            code="invalid_input",
            name="RangeError",
        )
    return size, None
