"""The caps the guest prelude enforces, enforced again where guest requests reach the host.

The prelude refuses excess requests before they leave the guest, but it runs inside the guest's
engine; a guest that gets around it (an engine bug, a prelude it managed to reconfigure) meets
the same caps here, as the same kind of catchable rejection, so no cap rests on code the guest
can reach.  Arguments are checked while still encoded (size, then values) and parsed only for
their handler.  Pending requests in flight are capped in ``HostRequests.dispatch``; output sizes by
``bridge.output``; a burst larger than one frame never arrives (the frame cap).
"""

from __future__ import annotations

import re

from bridge import jsoncodec
from bridge.json_values import count_values, over_cap_message

from .dispatch import GuestError


#: Leading string elements of an argument array (a tool's or an MCP server's name), looked for in its first bytes.
_FIRST = re.compile(rb'\s*\[\s*("(?:[^"\\]|\\.)*")')
_NEXT = re.compile(rb'\s*,\s*("(?:[^"\\]|\\.)*")')
_LEADING_BYTES = 4096


def leading_strings(raw: bytes, count: int) -> list[str]:
    """The first ``count`` elements of an encoded argument array, where they are strings (names for
    the caller's pending list and for traces), read from its first bytes without parsing the rest."""
    head = raw[:_LEADING_BYTES]
    found: list[str] = []
    pos = 0
    while len(found) < count:
        match = (_NEXT if found else _FIRST).match(head, pos)
        if match is None:
            break
        try:
            found.append(jsoncodec.loads(match.group(1)))
        except jsoncodec.JSONDecodeError:
            break
        pos = match.end()
    return found


def check_request(raw: bytes, max_request_bytes: int, max_request_values: int) -> GuestError | None:
    """Why the host refuses a guest request's JSON arguments before parsing them (None: within caps).

    Both checks cost a few passes over the bytes in C: the size, then the values they hold.
    """
    if len(raw) > max_request_bytes:
        return GuestError(
            f"request arguments are {len(raw)} bytes of JSON, over the {max_request_bytes}-byte "
            "max_request_bytes cap; pass less data per call",
            code="invalid_input",
            name="RangeError",
        )
    if count_values(raw, max_request_values) > max_request_values:
        # The same words as the prelude's refusal (guest_runtime/prelude/requests.js).
        return GuestError(over_cap_message(max_request_values, "request arguments hold"), "invalid_input", "RangeError")
    return None
