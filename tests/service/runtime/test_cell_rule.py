"""The cell's one rule (``step.py``) as a table, and its state machine's legal moves (``state.py``): no processes."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from service.errors import IllegalTransition
from service.runtime.state import CellState, Phase, edges
from service.runtime.step import LegView, Step, answers_in_place, next_step

PARK_AT = 100.0
#: A leg blocked on host work, holding its process, nothing ready, well before its park time.
BLOCKED = LegView(
    running=False,
    aborted=False,
    worker_alive=True,
    holding=True,
    has_ready=False,
    needs_caller=False,
    park_at_once=False,
    park_at=PARK_AT,
    due=False,
)
EARLY, AT_PARK_TIME = 10.0, PARK_AT

# (what differs from BLOCKED, now) -> the step
TABLE = [
    ({}, EARLY, Step.WAIT),
    ({"holding": False}, EARLY, Step.WAIT),
    ({"running": True}, EARLY, Step.READ),
    ({"running": True, "aborted": True, "worker_alive": False}, AT_PARK_TIME, Step.READ),  # the frame comes first
    ({"aborted": True}, EARLY, Step.ABORT),
    ({"aborted": True, "worker_alive": False, "has_ready": True}, EARLY, Step.ABORT),  # an abort wins over a loss
    ({"worker_alive": False}, EARLY, Step.LOSE),
    ({"worker_alive": False, "has_ready": True}, EARLY, Step.LOSE),
    ({"has_ready": True}, EARLY, Step.DELIVER),
    ({"has_ready": True, "holding": False}, EARLY, Step.REACQUIRE),
    ({"has_ready": True, "needs_caller": True}, EARLY, Step.DELIVER),  # ready replies go before the caller
    ({"has_ready": True}, AT_PARK_TIME, Step.PARK),  # due from its park time, the timer not run yet
    ({"has_ready": True, "due": True}, EARLY, Step.PARK),  # the timer fired (the loop's clock lags)
    ({"has_ready": True, "holding": False, "due": True}, EARLY, Step.PARK),  # no reacquire just to park
    ({"needs_caller": True}, EARLY, Step.PARK),
    ({"park_at_once": True}, EARLY, Step.PARK),
    ({}, AT_PARK_TIME, Step.PARK),
    ({"due": True}, EARLY, Step.PARK),
]


@pytest.mark.parametrize(("changes", "now", "step"), TABLE)
def test_the_rule(changes, now, step):
    assert next_step(replace(BLOCKED, **changes), now) is step


def test_the_table_covers_every_step():
    assert {step for _, _, step in TABLE} == set(Step)


@pytest.mark.parametrize(
    ("changes", "settled", "pipe_empty", "answered"),
    [
        ({"has_ready": True}, True, True, True),
        ({"has_ready": True}, False, True, False),  # a request still runs: the leg wakes for it
        ({"has_ready": True}, True, False, False),  # something written before still waits in the pipe
        ({"has_ready": True, "holding": False}, True, True, False),  # lent: only the leg takes it back
        ({"has_ready": True, "aborted": True}, True, True, False),
        ({"has_ready": True, "worker_alive": False}, True, True, False),
        ({"has_ready": True, "due": True}, True, True, False),
        ({}, True, True, False),  # nothing to deliver
    ],
)
def test_an_answer_in_place_is_the_rules_delivery_with_everything_settled(changes, settled, pipe_empty, answered):
    """The read callback answers a guest itself exactly when the leg would deliver, every request of the
    frame has settled and the pipe took all that was written before."""
    view = replace(BLOCKED, **changes)
    assert answers_in_place(view, EARLY, settled=settled, pipe_empty=pipe_empty) is answered


LEGAL = {
    (Phase.STARTING, Phase.RUNNING),
    (Phase.STARTING, Phase.ENDING),
    (Phase.RUNNING, Phase.AWAITING_HOST),
    (Phase.RUNNING, Phase.ENDING),
    (Phase.AWAITING_HOST, Phase.RUNNING),
    (Phase.AWAITING_HOST, Phase.PARKED),
    (Phase.AWAITING_HOST, Phase.ENDING),
    (Phase.PARKED, Phase.AWAITING_HOST),
    (Phase.PARKED, Phase.ENDING),
    (Phase.ENDING, Phase.DONE),
}


@pytest.mark.parametrize(("start", "to"), list(itertools.product(Phase, Phase)))
def test_a_cell_moves_only_along_the_drawn_edges(start, to):
    """Every pair of phases: a legal move happens, any other raises ``IllegalTransition`` and changes nothing."""
    state = CellState(phase=start)
    if (start, to) in LEGAL:
        state.move(to)
        assert state.phase is to
    else:
        with pytest.raises(IllegalTransition):
            state.move(to)
        assert state.phase is start


def test_the_edges_are_the_ones_the_module_draws():
    assert {(a, b) for a, targets in edges().items() for b in targets} == LEGAL


def test_a_cell_is_ended_from_the_moment_its_end_begins():
    assert [p for p in Phase if CellState(phase=p).ended] == [Phase.ENDING, Phase.DONE]
