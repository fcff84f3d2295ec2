"""A cell's own faults have guest-side codes; internal_error is the service's.

The same faults in both languages are one table: ``test_language_contract.py``.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import run


def test_an_unhandled_rejection_of_the_cells_own_is_uncaught(client: TestClient):
    """A promise the cell rejected and never handled is its own uncaught error."""
    env = run(
        client, 'void Promise.reject(new RangeError("lost")); await new Promise((r) => setTimeout(r, 1)); return 1'
    )
    assert (env["code"], env["failure_phase"]) == ("uncaught_error", "guest"), env
    assert env["error"].startswith("Unhandled promise rejection: RangeError: lost"), env["error"]


def test_a_cell_that_can_never_settle_is_stalled(client: TestClient):
    """Awaiting a promise nothing can settle is the cell's fault: code stalled, phase guest."""
    env = run(client, "await new Promise(() => {})")
    assert (env["code"], env["failure_phase"]) == ("stalled", "guest"), env


def test_an_uncaught_input_contract_rejection_keeps_invalid_input(client: TestClient):
    """Arguments a tool's schema refuses, uncaught, still end the cell as invalid_input (phase bridge)."""
    env = run(client, "await echo({x: 1, delay: 'not a number'})")
    assert (env["code"], env["failure_phase"]) == ("invalid_input", "bridge"), env
