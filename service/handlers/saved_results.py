"""Saved results: ``results.save``, ``results.load``, ``results.delete`` and a final value kept by reference.

Results are kept per (tenant, session, run) for ``results_ttl_seconds``, charged to the cell's inbox
allowance, and carry their network provenance: loading a network-derived result marks the cell.
Restart-safe cells cannot use them (a replay could not see them).
"""

from __future__ import annotations

from typing import Any

from bridge import jsoncodec
from bridge.output import NotRetained, RetainResult
from bridge.refs import describe_reference
from service.cells.dispatch import CellContext, Dispatcher, GuestError, HostCall, RawJson
from service.settings import Settings
from service.stores.errors import ResultsError
from service.stores.saved_results import ResultScope, ResultsStore

DEFAULT_RUN = "default"


def result_scope(cell: CellContext) -> ResultScope:
    return ResultScope(cell.spec.tenant, cell.spec.session_id or "", cell.spec.run_id or DEFAULT_RUN)


class SavedResults:
    """The guest's saved-results methods, and the retainer a cell keeps an oversized final value with."""

    def __init__(self, settings: Settings, results: ResultsStore) -> None:
        self.settings = settings
        self.results = results

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register("results.save", self._save_request)
        dispatcher.register("results.load", self._load_request, side_effects=False)
        dispatcher.register("results.delete", self._delete_request)

    def retain(self, cell: CellContext, json_text: str) -> RetainResult:
        """Keep an oversized final value as a saved result, or say why not."""
        try:
            ref = self._save(cell, json_text)
        except ResultsError as exc:
            reason = {"results_capacity": "result-store capacity",
                      "results_quota": "saved-results quota"}.get(exc.code, "result data allowance")
            return NotRetained(f"{reason}: {exc}")
        return describe_reference(ref, json_text)

    def release(self, cell: CellContext, ref_id: str) -> None:
        """Free a result kept by ``retain`` that the envelope did not show (nobody can load it)."""
        self.results.delete(result_scope(cell), ref_id)

    def _save(self, cell: CellContext, json_text: str) -> str:
        """Keep JSON for the cell's run (inbox-sized allowance, TTL, network provenance)."""
        return self.results.save(result_scope(cell), json_text, cell.spec.limits.inbox_bytes,
                                 self.settings.results_ttl_seconds, network=cell.network_content)

    @staticmethod
    def _allowed(call: HostCall) -> None:
        if call.cell.spec.restart_safe:
            raise GuestError("results are not available in restart-safe cells: a replay could not see them",
                             "results_unavailable")

    async def _save_request(self, call: HostCall) -> Any:
        self._allowed(call)
        text = jsoncodec.dumps_text(call.args[0] if call.args else None)
        try:
            ref = self._save(call.cell, text)
        except ResultsError as exc:
            raise GuestError(str(exc), exc.code, name="RangeError") from None
        return describe_reference(ref, text)

    async def _load_request(self, call: HostCall) -> Any:
        self._allowed(call)
        try:
            text, network = self.results.load_entry(result_scope(call.cell), call.args[0] if call.args else None)
        except ResultsError as exc:
            raise GuestError(str(exc), exc.code) from None
        if network:
            call.cell.network_content = True  # provenance travels with the saved data
        return RawJson(text.encode("utf-8"))

    async def _delete_request(self, call: HostCall) -> Any:
        self._allowed(call)
        return self.results.delete(result_scope(call.cell), call.args[0] if call.args else None)
