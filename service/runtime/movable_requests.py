"""A cell's host requests written out with the cell when it parks, and taken up in another process.

``MovableRequests`` is the ``HostRequests`` of every cell: beside what a cell's requests do in their own
process (``host_requests.py``) it says what another process needs to hold the requests again
(``carried``), and holds them again there (``take_up``), for ``parked_cells.py``.  Only requests that wait
for the API caller move; an approval's call runs its handler from the start where it is answered, since its
handler's task cannot move.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from bridge import jsoncodec
from bridge.json_cost import parsed_cost

from .clocks import UNTIMED_METHODS
from .dispatch import NeedsCaller
from .host_requests import LABELLED, LEADING_BYTES, HostRequests, Pending


class MovableRequests(HostRequests):
    """``HostRequests`` that can be written out with their parked cell and taken up elsewhere."""

    def carried(self) -> list[dict[str, object]] | None:
        """What another process needs to take up these requests, if every one waits for the API caller (a
        client tool's result, an approval, a yield) and no reply waits for the guest; else None (host work
        under way cannot move: its outcome would be lost or repeated)."""
        if self._ready:
            return None
        out: list[dict[str, object]] = []
        for p in self._pending.values():
            caller = p.caller
            if caller is None or (caller.kind == "approval" and not p.raw):
                return None
            entry: dict[str, object] = {"id": p.request_id, "method": p.method, "kind": caller.kind}
            for name, value in (("tool", caller.tool), ("name", caller.name), ("reason", caller.reason)):
                if value is not None:
                    entry[name] = value
            if caller.input is not None:
                entry["input"] = caller.input  # an encoded fragment: embedded as it is
            if caller.kind == "approval":
                entry["args"] = jsoncodec.fragment(p.raw)
            out.append(entry)
        return out

    def take_up(self, carried: Sequence[Mapping[str, object]], effects_started: bool) -> None:
        """Hold the requests ``carried`` wrote, as they were: each waits for the API caller again.  An approved
        call runs its handler from the start here, its approval asked for answered with the caller's answer."""
        self._effects_started = effects_started
        for entry in carried:
            request_id, method, kind = int(str(entry["id"])), str(entry["method"]), str(entry["kind"])
            tool, name, reason = (entry.get(k) for k in ("tool", "name", "reason"))
            held = None if entry.get("input") is None else jsoncodec.dumps_kept(entry["input"])
            p = Pending(request_id, method, head=b"")
            p.caller = NeedsCaller(
                kind,
                tool=None if tool is None else str(tool),
                input=None if held is None else jsoncodec.fragment(held),
                reason=None if reason is None else str(reason),
                name=None if name is None else str(name),
            )
            self._pending[request_id] = p
            self.count += 1
            p.held = len(held or b"")
            if kind == "approval":
                p.raw = jsoncodec.dumps_kept(entry.get("args"))
                p.head = p.raw[:LEADING_BYTES] if method in LABELLED else b""
                p.held += len(p.raw)
                p.decision = self._loop.create_future()
                self.in_flight.add(request_id)
                p.task = self._loop.create_task(self._rerun_when_answered(p))
            self.inbox.charge(p.held)

    async def _rerun_when_answered(self, p: Pending) -> None:
        """An approval taken up from another process: once answered, run the call's handler from the start
        (it asks for the approval again and gets this answer)."""
        assert p.decision is not None
        try:
            approved, why = await p.decision
        finally:
            p.caller, p.decision = None, None
        raw, p.raw = p.raw, b""
        route = self.dispatcher.route(p.method)
        if route is None or self._pending.get(p.request_id) is not p:
            self.in_flight.discard(p.request_id)
            return
        self.inbox.release(p.held)
        p.held = parsed_cost(raw)
        self.inbox.charge(p.held)
        call = self.make_call(p.request_id, p.method, raw)

        async def answered(tool: str, input: object, reason: str) -> tuple[bool, str | None]:
            return approved, why

        call.ask_approval = answered
        call.abandon = functools.partial(self._abandon, p.request_id)
        if p.method not in UNTIMED_METHODS:
            self.waiting.start(p.request_id)
        await self._handle(route.handler, call)
