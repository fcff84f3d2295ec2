"""A cell's own faults have guest-side codes, the same in JavaScript and Python; internal_error is the service's."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import run

#: (JavaScript, Python, code, phase): one fault, written in each language.
FAULTS = {
    "an error the cell threw": ('throw new Error("boom")', 'raise ValueError("boom")', "uncaught_error", "guest"),
    "a name that is not defined": ("return missingFn()", "missing_fn()", "uncaught_error", "guest"),
    "a tool failure nobody caught": (
        'await fail({message: "no"})',
        'await fail(message="no")',
        "uncaught_error",
        "bridge",
    ),
    "a tool failure caught and thrown again": (
        'try { await fail({message: "no"}) } catch (e) { throw e }',
        'try:\n    await fail(message="no")\nexcept Exception as e:\n    raise e',
        "uncaught_error",
        "bridge",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("language", ["javascript", "python"])
def test_the_same_fault_has_the_same_code_and_phase_in_both_languages(client: TestClient, fault: str, language: str):
    """Each fault of the cell's own code fails it with its guest-side code and phase, never internal_error."""
    javascript, python, code, phase = FAULTS[fault]
    env = run(client, javascript if language == "javascript" else python, language=language)
    assert (env["status"], env["code"], env["failure_phase"]) == ("failed", code, phase), env
    assert ("boom" in env["error"]) or ("missing" in env["error"].lower()) or ("no" in env["error"]), env["error"]


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
