"""A large value leaving a JavaScript cell: the plain-data check and writer in C against the prelude's walk.

``python -m bench large_values [--rounds N] [--rows N]``.  In the bench process, no service and no pipes:
the peers table's 1 MiB workload (``bench/peer_workloads.py``: rows of objects, ~120k JSON values) runs in
a fresh engine with the C check installed and in one without (the prelude's ``isPlain`` alone, as where the
extension was not built), alternating, and each prints

* **cell**: the CPU of running the cell to its end (building the rows);
* **value**: the CPU of the prelude's ``value`` operation and the worker's text check, what the worker
  spends to turn the finished cell's value into the JSON text it ships (with the C extension: its walk,
  which proves the value plain data and writes its text; without it: the prelude's proof and the engine's
  ``JSON.stringify``; then the copy out of the engine);
* **service check**: the CPU of checking that text is one JSON value as the service's helper does
  (``bridge.output.check_json_bytes``): by a parse (``parse_json``, as without the C scan) and by the C
  syntax scan (``bridge/json_syntax.c``).

as medians over rounds, with the C figure over the other's in the same round.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bridge import jsoncodec
from bridge.output import check_json_bytes
from bridge.truncation import parse_json
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
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, text


def _check_ms(data: bytes, scan: bool) -> float:
    """CPU ms of the service's check of ``data``: the C scan, or the parse it replaces."""
    t0 = time.process_time()
    if scan:
        check_json_bytes(data)
    else:
        parse_json(data.decode("utf-8"))
    return (time.process_time() - t0) * 1e3


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
    checks: dict[bool, list[float]] = {True: [], False: []}
    ratios: list[float] = []
    check_ratios: list[float] = []
    text = ""
    for _ in range(args.rounds):
        for native in (False, True):
            cell_ms, value_ms, text = _one(code, native)
            cells[native].append(cell_ms)
            values[native].append(value_ms)
            checks[native].append(_check_ms(text.encode("utf-8"), native))
        ratios.append(values[True][-1] / values[False][-1])
        check_ratios.append(checks[True][-1] / checks[False][-1])
    size = len(text)
    print(f"a {size:,}-character value ({args.rows:,} rows), {args.rounds} alternating rounds, CPU ms (median)")
    print(f"{'':28}{'prelude walk':>14}{'C':>10}{'C / prelude':>13}")
    print(
        f"{'cell (building the rows)':28}{statistics.median(cells[False]):>14.1f}{statistics.median(cells[True]):>10.1f}"
    )
    print(
        f"{'value (proof, text)':28}{statistics.median(values[False]):>14.1f}"
        f"{statistics.median(values[True]):>10.1f}{statistics.median(ratios):>13.2f}"
    )
    print(
        f"{'service check (parse, scan)':28}{statistics.median(checks[False]):>14.1f}"
        f"{statistics.median(checks[True]):>10.1f}{statistics.median(check_ratios):>13.2f}"
    )
    return 0
