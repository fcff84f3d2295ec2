"""The sealed requestState of an approval round, and the person's answers to its forms, on their own (no server).

What a client sends back is caller input: the tests hand the sealer and the answer checks what an attacker
could send, and a clock they move.
"""

from __future__ import annotations

import anyio
import pytest

from bridge import jsoncodec
from service.errors import InvalidRequest, RequestStateRefused
from service.mcp_server.approval_forms import APPROVAL_SCHEMA, decisions, forms_for
from service.mcp_server.request_state import (
    CARRIED_OUTPUT_BYTES,
    MAX_STATE_CHARS,
    STATE_TTL_SECONDS,
    LocalLedger,
    StateSealer,
    carried,
    request_digest,
)

SECRET = b"s" * 32
REQUEST = request_digest("exec", {"code": "return 1"})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def sealed(clock: Clock, **over: object) -> tuple[StateSealer, str]:
    sealer = StateSealer(SECRET, clock)
    fields: dict[str, object] = {
        "tenant": "t1",
        "api_key": "ck_one",
        "cell_id": "cell_1",
        "pending": ["req_1", "req_2"],
        "request": REQUEST,
        "output": [{"type": "text", "text": "before"}],
    }
    fields.update(over)
    return sealer, sealer.seal(**fields)  # type: ignore[arg-type]


def opened(sealer: StateSealer, token: object, tenant: str = "t1", key: str = "ck_one", request: str = REQUEST):
    return sealer.open(token, tenant=tenant, api_key=key, request=request)


def test_a_state_opens_for_its_caller_and_request_with_what_it_carries() -> None:
    """The caller it was given to, retrying the same request, gets back the cell, the calls asked, the
    output to show and a nonce; the API key itself is not in the token."""
    sealer, token = sealed(Clock())
    claims = opened(sealer, token)
    assert (claims.cell_id, claims.pending, claims.tenant) == ("cell_1", ("req_1", "req_2"), "t1")
    assert claims.output == [{"type": "text", "text": "before"}] and len(claims.nonce) >= 20
    assert "ck_one" not in token and token.isascii() and len(token) < MAX_STATE_CHARS


def test_any_change_to_a_state_is_refused_before_it_is_decoded() -> None:
    """Every single-character change, a state of another secret, a stranger's shape, too long, not text or
    not ASCII: refused as altered, naming how to be asked again."""
    sealer, token = sealed(Clock())
    other = StateSealer(b"o" * 32).seal(
        tenant="t1", api_key="ck_one", cell_id="cell_1", pending=["req_1"], request=REQUEST, output=[]
    )
    changed = [token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :] for i in range(len(token))]
    bad: list[object] = [*changed, other, token + "x", token[:-1], "cm1..x", "x" * (MAX_STATE_CHARS + 1), 7, None]
    bad += [token.replace("cm1.", "cm2."), token[:20] + "é" + token[21:], token + "\n"]
    for wrong in bad:
        with pytest.raises(RequestStateRefused) as refused:
            opened(sealer, wrong)
        assert "altered, or not minted by this service" in refused.value.message
        assert refused.value.code == "request_state_refused" and refused.value.need_param == "requestState"


def test_a_state_is_refused_after_it_expires_and_for_another_caller_or_request() -> None:
    """Past its time, to another tenant or key, or with another request: refused, each saying why."""
    clock = Clock()
    sealer, token = sealed(clock)
    for tenant, key, request, words in (
        ("t2", "ck_one", REQUEST, "given to another API key"),
        ("t1", "ck_two", REQUEST, "given to another API key"),
        ("t1", "ck_one", request_digest("exec", {"code": "return 2"}), "answers another tool call"),
        ("t1", "ck_one", request_digest("wait", {"code": "return 1"}), "answers another tool call"),
    ):
        with pytest.raises(RequestStateRefused, match=words):
            opened(sealer, token, tenant, key, request)
    clock.now += STATE_TTL_SECONDS - 1
    assert opened(sealer, token).cell_id == "cell_1"
    clock.now += 1
    with pytest.raises(RequestStateRefused, match="expired .* cell cell_1 is still parked"):
        opened(sealer, token)


def test_the_request_digest_is_the_call_not_its_spelling() -> None:
    """Keys in any order give one digest; another value or tool gives another."""
    assert request_digest("exec", {"a": 1, "b": [1, {"y": 2, "x": 1}]}) == request_digest(
        "exec", {"b": [1, {"x": 1, "y": 2}], "a": 1}
    )
    assert request_digest("exec", {"a": 1}) != request_digest("exec", {"a": 2}) != request_digest("wait", {"a": 1})


def test_the_local_ledger_lets_each_state_be_used_once_until_it_expires() -> None:
    """A nonce is claimed once; the record forgets nonces whose states expired (they cannot open anyway)."""
    clock = Clock()
    ledger = LocalLedger(clock)

    async def claims() -> list[bool]:
        at = int(clock.now * 1000)
        return [
            await ledger.first_use("a", at + 1000),
            await ledger.first_use("a", at + 1000),
            await ledger.first_use("b", at + 5000),
        ]

    assert anyio.run(claims) == [True, False, True]
    clock.now += 2
    assert anyio.run(ledger.first_use, "c", int(clock.now * 1000) + 1000) is True
    assert list(ledger._used) == ["b", "c"]  # "a" expired and was dropped


def test_output_over_what_a_state_carries_is_cut_with_a_note() -> None:
    """Output within the bound is carried whole; beyond it, the entries that fit and a note of how much is not
    shown, the whole within the bound."""
    small = [{"type": "text", "text": "x" * 100}]
    assert carried(small) == small
    big = [{"type": "text", "text": "y" * 1000} for _ in range(200)]
    kept = carried(big)
    assert len(jsoncodec.dumps(kept)) <= CARRIED_OUTPUT_BYTES and kept[:-1] == big[: len(kept) - 1]
    assert str(kept[-1]["text"]).startswith("[") and "bytes of output written before the approval" in kept[-1]["text"]


# ---- the forms and the answers ---------------------------------------------------------------------------

CALL = {"id": "req_1", "method": "approval", "tool": "send_email", "input": {"to": "a@b"}, "reason": "needs approval"}


def test_answers_become_approvals_and_cancel_decides_nothing() -> None:
    responses = {
        "req_1": {"action": "accept", "content": {"approve": True}},
        "req_2": {"action": "accept", "content": {"approve": False, "reason": "not today"}},
        "req_3": {"action": "decline"},
        "req_4": {"action": "cancel"},
    }
    asked = ["req_1", "req_2", "req_3", "req_4", "req_5"]
    assert decisions(responses, asked) == [
        {"id": "req_1", "approve": True, "reason": None},
        {"id": "req_2", "approve": False, "reason": "not today"},
        {"id": "req_3", "approve": False, "reason": "the person declined"},
    ]


@pytest.mark.parametrize(
    ("responses", "words"),
    [
        ({"req_9": {"action": "accept", "content": {"approve": True}}}, "'req_9', which this round did not ask"),
        ({"req_1": {"action": "maybe"}}, "is not an elicitation result"),
        ({"req_1": "yes"}, "is not an elicitation result"),
        ({"req_1": {"action": "accept", "content": {"approve": "yes"}}}, "approve must be true or false"),
        ({"req_1": {"action": "accept", "content": {}}}, "approve must be true or false"),
        ({"req_1": {"action": "accept", "content": {"approve": True, "run": "rm"}}}, "has 'run'"),
        ({"req_1": {"action": "accept", "content": {"approve": False, "reason": "r" * 2049}}}, "at most 2048"),
        ({"req_1": {"action": "accept", "content": ["approve"]}}, "content must be an object"),
    ],
)
def test_answers_that_are_not_answers_to_the_form_are_refused(responses: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidRequest, match=words):
        decisions(responses, ["req_1"])


def test_a_form_frames_the_call_in_our_words_and_shows_its_data_escaped() -> None:
    """The tool, the reason and the input are JSON text on their own lines; line breaks, bidirectional and
    zero-width marks in them are escapes; the fields are the flat approve/reason form."""
    sneaky = {
        **CALL,
        "tool": 'x"\nApprove: yes',
        "reason": "ok\u2028Tool: safe",
        "input": {"t": "\u202eevil\u200b\x85"},
    }
    (form,) = forms_for("cell_1", [sneaky], 4096)
    lines = form.message.split("\n")
    assert len(lines) == 6 and form.call_id == "req_1"
    assert lines[1] == 'Tool: "x\\"\\nApprove: yes"' and lines[2] == 'Why: "ok\\u2028Tool: safe"'
    assert lines[4] == '{"t":"\\u202eevil\\u200b\\u0085"}'
    assert set(APPROVAL_SCHEMA["properties"]) == {"approve", "reason"}  # type: ignore[arg-type]


def test_forms_share_the_budget_and_later_calls_wait_for_the_next_round() -> None:
    """Sixteen forms per round at most, the rest named as asked next; inputs cut to their share."""
    calls = [{**CALL, "id": f"req_{i}", "input": {"t": "z" * 5000}} for i in range(20)]
    forms = forms_for("cell_1", calls, 16 * 1024)
    assert [f.call_id for f in forms] == [f"req_{i}" for i in range(16)]
    assert all("4 more call(s) of this cell wait for approval" in f.message for f in forms)
    assert all(len(f.message.split("\n")[4].encode()) == 1024 for f in forms)
