"""quickjs-rs (QuickJS in WebAssembly under wasmtime, in this process) through its public API.

Each run a new ``Runtime`` (64 MiB) and context, ``nop`` an async Python function registered on the
context, the code an async function body awaited by ``eval_async``.  The value crosses as JSON text
(``JSON.stringify`` in the guest, ``json.loads`` here): quickjs-rs's own marshal walks a value leaf by
leaf through WebAssembly calls, ~10 ms a row of the 1 MiB value on the 2-core machine (over two minutes
for the whole value), so the JSON route is the fastest its public API offers for it.  The WebAssembly module is compiled
once per process (the first ``Runtime``), which the bench's warm-up pays.
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import version
from typing import Any

from quickjs_rs import Runtime

from .harness import serve


async def nop(_args: Any) -> int:
    return 1


async def run(code: str) -> Any:
    with Runtime(memory_limit=64 * 1024 * 1024) as rt, rt.new_context(timeout=60.0) as ctx:
        ctx.register("nop", nop)
        text = await ctx.eval_async(f"JSON.stringify(await (async () => {{\n{code}\n}})())")
        return json.loads(text)


if __name__ == "__main__":
    asyncio.run(serve({"quickjs-rs": version("quickjs-rs"), "wasmtime": version("wasmtime")}, run))
