"""How many legs a cell may run and how long it may live (``max_legs_per_cell``, ``max_cell_lifetime_seconds``).

Both end cells that never finish: one a caller resumes again and again (a client loop answering a
``yield_control`` that comes straight back), or one kept alive, leg after leg, for days.  An honest
cell meets neither default.  The bounds are checked when a leg would start (a wait, or a background
cell's own next leg): a cell over one ends failed there instead, with a stable code and a message
naming the setting.  A parked cell nobody resumes ends by its idle expiry (``cell_ttl_seconds``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ending import Failed

LEGS_CODE = "leg_limit_exceeded"
LIFETIME_CODE = "lifetime_exceeded"


@dataclass(frozen=True)
class LifeBounds:
    """The legs a cell may run and the seconds it may live, from its exec."""

    max_legs: int
    max_lifetime_s: float

    def over(self, legs: int, age_s: float) -> Failed | None:
        """Why a cell that ran ``legs`` legs and started ``age_s`` seconds ago may not run another (None: it may)."""
        if legs >= self.max_legs:
            return Failed(
                f"cell leg limit exceeded: this cell already ran {legs} legs (its exec, then each wait or "
                f"background leg), the max_legs_per_cell cap, so it was ended. A cell resumed this often is "
                "stuck in a loop (a yield_control answered again and again?): finish in fewer round trips, "
                "or start a new cell",
                "host",
                LEGS_CODE,
            )
        if age_s >= self.max_lifetime_s:
            return Failed(
                f"cell lifetime exceeded: this cell started {age_s:.0f} s ago, past the "
                f"max_cell_lifetime_seconds cap ({self.max_lifetime_s:.0f} s), so it was ended. Start a new "
                "cell (keep what it needs in the session store or saved results)",
                "host",
                LIFETIME_CODE,
            )
        return None


#: Bounds no cell meets (a cell built outside a registry, in tests).
UNBOUNDED = LifeBounds(max_legs=1 << 62, max_lifetime_s=float("inf"))
