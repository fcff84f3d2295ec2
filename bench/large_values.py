"""A large value leaving a JavaScript cell: the prelude's plain-data check in C against its own walk.

``python -m bench large_values [--rounds N] [--rows N]``.  In the bench process, no service and no pipes:
the peers table's 1 MiB workload (``bench/peer_workloads.py``: rows of objects, ~120k JSON values) runs in
a fresh engine with the C check installed and in one without (the prelude's ``isPlain`` alone, as where the
extension was not built), alternating, and each prints

* **cell**: the CPU of running the cell to its end (building the rows);
* **value**: the CPU of the prelude's ``value`` operation and the worker's text check, what the worker
  spends to turn the finished cell's value into the JSON text it ships (the plain-data proof, the engine's
  ``JSON.stringify``, the copy out of the engine);

as medians over rounds, with the C figure over the prelude's in the same round.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bridge import jsoncodec
from guest_runtime.quickjs import plain_check
from guest_runtime.quickjs.engine import GuestEngine

from .peer_workloads import BIG_ROWS, workloads

MiB = 1024 * 1024


def _one(code: str, native: bool) -> tuple[float, float, int]:
    """(cell CPU ms, value CPU ms, text length) of one run of ``code`` in a fresh engine."""
    engine = GuestEngine(native_plain_check=native)
    engine.configure(jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB}), 256 * MiB)
    engine.compile(code, 60.0)
    deadline = time.monotonic() + 60.0
    t0 = time.process_time()
    engine.call_cell(deadline)
    engine.pump(deadline)
    assert engine.take()["done"] == {"ok": True}
    t1 = time.process_time()
    text = engine.final_value(16 * MiB, deadline)
    t2 = time.process_time()
    engine.close()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, len(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench large_values", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--rows", type=int, default=BIG_ROWS, help="rows in the value (default: just under 1 MiB)")
    args = p.parse_args(argv)
    if not plain_check.built():
        print("the C plain-data check is not built here (no C compiler at install): nothing to compare")
        return 1
    code = workloads(1, args.rows)["big"].javascript
    cells: dict[bool, list[float]] = {True: [], False: []}
    values: dict[bool, list[float]] = {True: [], False: []}
    ratios: list[float] = []
    size = 0
    for _ in range(args.rounds):
        for native in (False, True):
            cell_ms, value_ms, size = _one(code, native)
            cells[native].append(cell_ms)
            values[native].append(value_ms)
        ratios.append(values[True][-1] / values[False][-1])
    print(f"a {size:,}-character value ({args.rows:,} rows), {args.rounds} alternating rounds, CPU ms (median)")
    print(f"{'':28}{'prelude walk':>14}{'C check':>10}{'C / prelude':>13}")
    print(
        f"{'cell (building the rows)':28}{statistics.median(cells[False]):>14.1f}{statistics.median(cells[True]):>10.1f}"
    )
    print(
        f"{'value (check, stringify)':28}{statistics.median(values[False]):>14.1f}"
        f"{statistics.median(values[True]):>10.1f}{statistics.median(ratios):>13.2f}"
    )
    return 0
