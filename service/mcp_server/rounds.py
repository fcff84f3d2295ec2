"""Approval rounds: a person approves a parked cell's calls through the MCP client's elicitation forms.

A round starts when ``exec`` or ``wait`` finds the cell waiting on approvals and the calling client shows
forms to a person (it declared form elicitation).  On the 2026-07-28 protocol the tool call answers
``input_required`` with the forms and a sealed ``requestState`` (``request_state``); the client retries the
same tool call with the person's answers, which resume the live parked cell (nothing runs again).  On a
2025-11-25 connection that can carry a server request (stdio), the forms are sent as ``elicitation/create``
requests while the tool call waits.  Either way the answers are checked (``approval_forms.decisions``) and
applied as the HTTP API's ``wait`` applies ``approvals``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from service.errors import StoreUnavailable
from service.settings import ApiKey
from service.stores.errors import StoreError
from service.tracing import TraceParent

from .approval_forms import ApprovalForm, approval_calls, decisions, forms_for
from .request_state import SECRET_NAME, LocalLedger, RoundClaims, SharedLedger, StateSealer, carried, replayed


@dataclass(frozen=True)
class Caller:
    """Who calls a tool, whether its client shows approval forms to a person, and whether it takes tasks
    (it declared the ``io.modelcontextprotocol/tasks`` extension on this request)."""

    key: ApiKey
    asks_person: bool = False
    trace_parent: TraceParent = None
    uses_tasks: bool = False


@dataclass(frozen=True)
class RoundReply:
    """A retried tool call's answers to a round: the state as sent back, and the responses as plain JSON."""

    state: object
    responses: Mapping[str, object]


@dataclass(frozen=True)
class InputNeeded:
    """A tool call's answer that asks a person first: the forms, and the state that brings the answers back."""

    forms: tuple[ApprovalForm, ...]
    state: str
    cell_id: str
    request: str  # digest of the tool call the round belongs to
    output: list[object]  # what the cell wrote before it parked, for the round's answer (the state carries it too)

    @property
    def asked(self) -> tuple[str, ...]:
        return tuple(form.call_id for form in self.forms)


class ApprovalRounds:
    """Starts rounds (forms and sealed state) and opens their answers, under the ledger's shared secret."""

    def __init__(self, ledger: SharedLedger | LocalLedger, budget_bytes: int) -> None:
        self._ledger = ledger
        self._budget_bytes = budget_bytes  # what the forms of one round may show of the calls' inputs
        self._sealer: StateSealer | None = None
        self._sealing = asyncio.Lock()

    async def ask(self, caller: Caller, request: str, envelope: Mapping[str, object]) -> InputNeeded | None:
        """The round to start for a (plain) envelope, or None: no approval pending, or nobody to show forms."""
        calls = approval_calls(envelope) if caller.asks_person else []
        if not calls:
            return None
        cell_id = str(envelope["cell_id"])
        forms = forms_for(cell_id, calls, self._budget_bytes)
        output = envelope.get("output")
        output = carried(output) if isinstance(output, list) else []
        sealer = await self._sealer_now()
        state = sealer.seal(
            tenant=caller.key.tenant,
            api_key=caller.key.key,
            cell_id=cell_id,
            pending=[form.call_id for form in forms],
            request=request,
            output=output,
        )
        return InputNeeded(forms, state, cell_id, request, output)

    async def opened(
        self, caller: Caller, request: str, reply: RoundReply
    ) -> tuple[RoundClaims, list[dict[str, object]]]:
        """The round a retry answers and the approval answers it gives, once the state holds (sealed by us,
        this caller's, for this request, unexpired), the answers are well formed, and the state is unused."""
        sealer = await self._sealer_now()
        claims = sealer.open(reply.state, tenant=caller.key.tenant, api_key=caller.key.key, request=request)
        answers = decisions(reply.responses, claims.pending)
        try:
            first = await self._ledger.first_use(claims.nonce, claims.expires_at_ms)
        except StoreError as exc:
            raise _unavailable(exc) from None
        if not first:
            raise replayed(claims.cell_id)
        return claims, answers

    async def _sealer_now(self) -> StateSealer:
        if self._sealer is None:
            async with self._sealing:  # one read of the shared secret, however many first rounds arrive at once
                if self._sealer is None:
                    try:
                        secret = await self._ledger.shared_secret(SECRET_NAME)
                    except StoreError as exc:
                        raise _unavailable(exc) from None
                    self._sealer = StateSealer(secret)
        return self._sealer


def _unavailable(exc: StoreError) -> StoreUnavailable:
    return StoreUnavailable(
        f"the shared store that keeps approval rounds answers nothing usable: {exc}; retry shortly", retry_after=1
    )


def answers_of(needed: InputNeeded, responses: Mapping[str, object]) -> list[dict[str, object]]:
    """The approval answers a legacy round's responses give (the round never left this process)."""
    return decisions(responses, needed.asked)
