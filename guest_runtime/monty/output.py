"""What a Python cell emits: ``text()``/``json()`` entries and ``print()`` lines, in the order made.

Each entry is JSON text, as the JavaScript prelude hands it over; ``bridge/output.py`` re-checks the
counts and budgets on the way out.  Each printed line is one text entry, and print output in total is
bounded (console.log's cap), past which one marker says the rest was dropped.
"""

from __future__ import annotations

from bridge.jsoncodec import dumps_text
from bridge.output import MAX_OUTPUT_ENTRIES

from ..guest_config import CONSOLE_TOTAL
from .values import to_json_text, to_json_value


class CellOutput:
    """One cell's output entries, kept until the worker loop takes them."""

    def __init__(self) -> None:
        self._entries: list[str] = []
        self._emitted = 0
        self._printed = 0
        self._print_line = ""  # a printed line not yet ended by a newline

    def text(self, value: object) -> None:
        self.flush_print()
        self._emit({"type": "text", "text": value if isinstance(value, str) else to_json_text(value)})

    def json(self, value: object) -> None:
        self.flush_print()
        data, _ = to_json_value(value)
        self._emit({"type": "json", "value": data})

    def on_print(self, _stream: str, text: str) -> None:
        """Monty's print callback."""
        if self._printed > CONSOLE_TOTAL:
            return
        self._printed += len(text)
        if self._printed > CONSOLE_TOTAL:
            self._print_line = ""
            self._entries.append(dumps_text({"type": "text", "text": "[print output truncated]"}))
            return
        lines = (self._print_line + text).split("\n")
        self._print_line = lines.pop()
        for line in lines:
            if self._emitted < MAX_OUTPUT_ENTRIES:
                self._emitted += 1
                self._entries.append(dumps_text({"type": "text", "text": line}))

    def flush_print(self) -> None:
        """End a printed line that has no newline yet (before other output, and when the cell ends)."""
        if self._print_line:
            line, self._print_line = self._print_line, ""
            self.on_print("stdout", line + "\n")

    def take(self) -> list[str]:
        entries, self._entries = self._entries, []
        return entries

    def _emit(self, entry: dict[str, object]) -> None:
        if self._emitted >= MAX_OUTPUT_ENTRIES:
            raise ValueError(
                f"too many output entries (limit {MAX_OUTPUT_ENTRIES} per cell): "
                "join text into one string and emit it with fewer text()/json() calls"
            )
        self._emitted += 1
        self._entries.append(dumps_text(entry))
