"""The stock pydantic-monty 1.x pool (``AsyncMonty``, its defaults: workers up to the CPU count, reused).

Each run a checkout (a fresh REPL session on a pooled ``monty`` worker) and one ``feed_run`` of the code,
``nop`` an async external function; ``max_suspensions`` (1,000 by default: calls, name lookups and future
resolutions together) raised so the 1,000-call workloads fit, as codemode's call limits are for the run.  The ``monty`` binary is the one the ``pip install --target`` copy
ships (found on ``PATH``, which the bench sets).
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

import pydantic_monty

from .harness import serve

LIMITS: pydantic_monty.ResourceLimits = {"max_suspensions": 100_000}


async def nop(i: int = 0) -> int:
    return 1


async def main() -> None:
    async with pydantic_monty.AsyncMonty() as pool:

        async def run(code: str) -> Any:
            async with pool.checkout(limits=LIMITS) as session:
                return await session.feed_run(code, external_lookup={"nop": nop})

        await serve({"pydantic-monty": version("pydantic-monty")}, run)


if __name__ == "__main__":
    asyncio.run(main())
