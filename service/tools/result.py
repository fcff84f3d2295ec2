"""What a tool returns: the one value both the authoring API and the after-hooks speak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ToolResult"]


@dataclass(frozen=True)
class ToolResult:
    """A tool's result: `details` reach the guest; `text` is the model-facing summary."""

    details: object = None  # a JSON value (checked when the call encodes it)
    text: str | None = None
    is_error: bool = False

    def __post_init__(self) -> None:
        if self.text is not None and not isinstance(self.text, str):
            raise TypeError(f"ToolResult.text must be a string or None, got {type(self.text).__name__}")
        if self.is_error and self.text is not None:
            # A failure must carry its reason in the structured value too (reference §b).
            if isinstance(self.details, Mapping):
                if "message" not in self.details and "error" not in self.details:
                    object.__setattr__(self, "details", {**self.details, "message": self.text})
            elif self.details is None:
                object.__setattr__(self, "details", {"message": self.text})
