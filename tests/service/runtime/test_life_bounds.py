"""Cells that never finish are ended: a cell runs at most ``max_legs_per_cell`` legs and starts none
``max_cell_lifetime_seconds`` after its exec; over either it ends failed with a stable code and a
message naming the setting, through HTTP, interactive or in the background."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import make_client, run, wait
from tests.support.polling import poll_until

YIELDING = "for (;;) await yield_control('again')"


def test_a_cell_over_max_legs_per_cell_ends_failed_naming_it(tmp_path):
    """A yield loop answered again and again runs three legs; the wait that would start a fourth ends it
    with leg_limit_exceeded, and the cell is gone (its status says how it ended)."""
    with make_client(tmp_path, max_legs_per_cell=3) as c:
        env = run(c, YIELDING)
        for _ in range(2):
            assert env["status"] == "waiting" and env["reason"] == "yield", env
            env = wait(c, env["cell_id"])
        assert env["status"] == "waiting" and env["telemetry"]["legs"] == 3, env
        final = wait(c, env["cell_id"])
        assert final["status"] == "failed" and final["code"] == "leg_limit_exceeded", final
        assert "max_legs_per_cell" in final["error"] and "already ran 3 legs" in final["error"]
        assert final["failure_phase"] == "host"
        status = c.get(f"/v1/cells/{env['cell_id']}").json()
        assert status["status"] == "failed" and status["code"] == "leg_limit_exceeded", status
        assert c.post(f"/v1/cells/{env['cell_id']}/wait", json={}).status_code == 404


def test_a_cell_past_max_cell_lifetime_seconds_ends_failed_at_its_next_leg(tmp_path):
    """However few legs it ran, a cell resumed after max_cell_lifetime_seconds since its exec (by the
    service's clock) ends with lifetime_exceeded naming the setting."""
    now = [0.0]
    with make_client(tmp_path, max_cell_lifetime_seconds=100, cells_clock=lambda: now[0]) as c:
        env = run(c, YIELDING)
        now[0] += 99
        env = wait(c, env["cell_id"])
        assert env["status"] == "waiting", env
        now[0] += 2  # 101 s after its exec
        final = wait(c, env["cell_id"])
        assert final["status"] == "failed" and final["code"] == "lifetime_exceeded", final
        assert "max_cell_lifetime_seconds" in final["error"] and "(100 s)" in final["error"]


@pytest.mark.slow
def test_a_background_cell_running_leg_after_leg_is_bounded_too(tmp_path):
    """A background timer loop runs a leg per timer on its own; it ends at max_legs_per_cell like any cell."""
    with make_client(tmp_path, max_legs_per_cell=5) as c:
        started = run(c, "for (;;) await new Promise(r => setTimeout(r, 1))", background=True)
        assert started["status"] == "running", started

        def ended() -> dict[str, Any] | None:
            status: dict[str, Any] = c.get(f"/v1/cells/{started['cell_id']}").json()
            return status if status["status"] != "running" else None

        status = poll_until(ended, "the background cell ends")
        assert status["status"] == "failed" and status["code"] == "leg_limit_exceeded", status
        final = wait(c, started["cell_id"])
        assert final["code"] == "leg_limit_exceeded" and "max_legs_per_cell" in final["error"], final
