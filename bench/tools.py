"""Tools the in-process figures register: a no-op, a large reply and fixed-size pages."""

from __future__ import annotations

from typing import Any

import orjson

from service.tools import ToolSpec

BIG_TARGET_BYTES = 10 * 1024 * 1024
PAGE_BYTES = 512 * 1024

# The guest rebuilds this exact structure, so both sides parse the same compact JSON text.
BIG_JS_BUILDER = """
function makeBig(n) {
  const rows = [];
  for (let i = 0; i < n; i++) rows.push({id: i, name: "item-" + i, tags: ["alpha", "beta"], score: i % 100, ok: i % 2 === 0});
  return rows;
}
"""


def big_rows(n: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "name": f"item-{i}", "tags": ["alpha", "beta"], "score": i % 100, "ok": i % 2 == 0} for i in range(n)
    ]


def rows_for(target_bytes: int) -> int:
    """How many rows make at most ``target_bytes`` of compact JSON (brackets and commas included)."""
    total, n = 1, 0
    for row in big_rows(target_bytes // 40):  # rows are > 40 bytes, so this list is long enough
        size = len(orjson.dumps(row)) + 1
        if total + size > target_bytes:
            break
        total += size
        n += 1
    return n


class BenchTools:
    """Tool specs plus the precomputed big reply (built once, outside every timing)."""

    def __init__(self, big_target_bytes: int = BIG_TARGET_BYTES) -> None:
        self.big_count = rows_for(big_target_bytes)
        self.big_value = big_rows(self.big_count)
        self.big_bytes = len(orjson.dumps(self.big_value))
        self.page_data = "x" * PAGE_BYTES

    def specs(self) -> list[ToolSpec]:
        async def nop(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
            return {"ok": True}

        async def big(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
            return self.big_value

        async def page(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
            return {"page": params.get("page", 0), "data": self.page_data}

        open_schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return [
            ToolSpec(name="nop", description="Returns {ok: true}.", execute=nop, input_schema=open_schema),
            ToolSpec(
                name="big", description="Returns a fixed ~10 MiB array of rows.", execute=big, input_schema=open_schema
            ),
            ToolSpec(name="page", description="Returns one 512 KiB page.", execute=page, input_schema=open_schema),
        ]
