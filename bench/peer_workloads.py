"""The workloads of ``python -m bench peers``: one definition, every column fed the same code.

Each workload is a piece of guest code in a dialect (a JavaScript function body, or Python whose last
expression is the value) and what its value must summarise to (a number, or an array's length), so a
driver that answers something else fails the run instead of timing the wrong thing.  JavaScript code
names the host function through ``{call}``: each peer spells it its own way (``nop`` as a global,
``tools.nop`` as a host-function group); every host function is an async no-op answering 1.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The guest builds this many rows: their compact JSON text is just under 1 MiB (``bench.tools.rows_for``,
#: whose rows these are; a test checks the two agree).
BIG_ROWS = 13_658
JS_BIG = (
    "const rows = [];\n"
    "for (let i = 0; i < {rows}; i++) rows.push({{id: i, name: 'item-' + i, tags: ['alpha', 'beta'], "
    "score: i % 100, ok: i % 2 === 0}});\n"
    "return rows;"
)
PY_BIG = (
    "[{{'id': i, 'name': f'item-{{i}}', 'tags': ['alpha', 'beta'], 'score': i % 100, 'ok': i % 2 == 0}} "
    "for i in range({rows})]"
)


@dataclass(frozen=True)
class Workload:
    """One figure's code in both dialects; ``expect`` is the value's summary (a number, or a list's length)."""

    key: str
    javascript: str
    python: str
    expect: int

    def code(self, dialect: str, call: str) -> str:
        return self.python if dialect == "python" else self.javascript.replace("{call}", call)


def workloads(calls: int, rows: int = BIG_ROWS) -> dict[str, Workload]:
    """The table's workloads: ``calls`` host calls per call figure, ``rows`` rows in the large value."""
    return {
        "fresh": Workload("fresh", "return 1", "1", 1),
        "one_call": Workload("one_call", "return await {call}({i: 0})", "await nop(i=0)", 1),
        "seq_calls": Workload(
            "seq_calls",
            f"let t = 0;\nfor (let i = 0; i < {calls}; i++) t += await {{call}}({{i}});\nreturn t;",
            f"t = 0\nfor i in range({calls}):\n    t += await nop(i=i)\nt",
            calls,
        ),
        "par_calls": Workload(
            "par_calls",
            f"const r = await Promise.all(Array.from({{length: {calls}}}, (_, i) => {{call}}({{i}})));\n"
            "return r.reduce((a, b) => a + b, 0);",
            f"import asyncio\nr = await asyncio.gather(*[nop(i=i) for i in range({calls})])\nsum(r)",
            calls,
        ),
        "big": Workload("big", JS_BIG.format(rows=rows), PY_BIG.format(rows=rows), rows),
    }
