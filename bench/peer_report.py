"""What ``python -m bench peers`` prints: per-round figures reduced to medians, spreads and same-round ratios.

Pure functions over plain data, so the table and the ratio arithmetic are tested without installing a
peer (``tests/bench/test_peer_report.py``).  A round is ``{column key: {figure key: value}}``; a column
missing from a round (its peer could not be installed, or failed) is simply absent.  A peer's ratio is
taken **within each round** (peer ÷ its codemode column, both measured minutes apart at most), then the
median and the range of those ratios are reported: the machine's drift moves both sides of a ratio
alike, while it moves a figure taken alone by tens of percent.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    """One column of the table: codemode in one language, or a peer measured against one of them."""

    key: str
    title: str
    dialect: str  # "javascript" (a function body) or "python" (the last expression is the value)
    call: str  # how the guest names the async no-op host function
    versus: str | None = None  # the codemode column its ratios are taken against; None for codemode's own


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    digits: int  # significant digits printed


FIGURES = (
    Figure("fresh_ms", "fresh guest + `return 1`, ms", 3),
    Figure("one_call_ms", "one host call, ms", 3),
    Figure("seq_call_us", "per sequential host call, µs", 3),
    Figure("par_call_us", "per call, 1,000 in parallel, µs", 3),
    Figure("big_ms", "a 1 MiB JSON value returned, ms", 3),
    Figure("runs_per_s", "runs/s at 16 concurrent", 3),
    Figure("cpu_ms_per_run", "CPU ms per run (at 16 concurrent)", 3),
    Figure("cpu_us_per_seq_call", "CPU µs per sequential host call", 3),
)


def fmt(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, thousands separated, no exponent (1,304; 86.7; 0.692)."""
    if value != value:  # NaN
        return "n/a"
    if value == 0:
        return "0"
    magnitude = len(str(int(abs(value)))) if abs(value) >= 1 else 0
    decimals = max(0, digits - magnitude)
    if abs(value) < 1:  # count the zeros after the point too: 0.0123 -> 0.0123
        text = f"{abs(value):.12f}".split(".")[1]
        decimals = digits + len(text) - len(text.lstrip("0"))
    out = f"{value:,.{decimals}f}"
    return out


@dataclass(frozen=True)
class Spread:
    """The median and the range of one figure over rounds, and how many rounds it had."""

    median: float
    low: float
    high: float
    rounds: int

    @staticmethod
    def of(values: list[float]) -> Spread | None:
        return Spread(statistics.median(values), min(values), max(values), len(values)) if values else None

    def text(self, digits: int = 3) -> str:
        return f"{fmt(self.median, digits)} ({fmt(self.low, digits)}–{fmt(self.high, digits)})"


def summarise(rounds: list[dict[str, dict[str, float]]], columns: tuple[Column, ...]) -> dict[str, Any]:
    """Per column and figure: the spread of its values over rounds and, for a peer, the spread of its
    same-round ratios to its codemode column (rounds where either side is missing give no ratio)."""
    values: dict[str, dict[str, Spread | None]] = {}
    ratios: dict[str, dict[str, Spread | None]] = {}
    for col in columns:
        values[col.key] = {
            f.key: Spread.of([r[col.key][f.key] for r in rounds if f.key in r.get(col.key, {})]) for f in FIGURES
        }
        if col.versus is not None:
            versus = col.versus
            ratios[col.key] = {
                f.key: Spread.of(
                    [
                        r[col.key][f.key] / r[versus][f.key]
                        for r in rounds
                        if f.key in r.get(col.key, {}) and r.get(versus, {}).get(f.key)
                    ]
                )
                for f in FIGURES
            }
    return {"values": values, "ratios": ratios}


def _cell(summary: dict[str, Any], col: Column, fig: Figure, spread: bool) -> str:
    value = summary["values"][col.key][fig.key]
    if value is None:
        return "—"
    text = value.text(fig.digits) if spread else fmt(value.median, fig.digits)
    ratio = summary["ratios"].get(col.key, {}).get(fig.key)
    if ratio is not None:
        text += f" [{ratio.text(3)}]" if spread else f" ({fmt(ratio.median, 3)})"
    return text


def markdown_table(summary: dict[str, Any], columns: tuple[Column, ...], spread: bool = False) -> str:
    """The table as markdown: each cell the median over rounds and, for a peer, (peer ÷ codemode, the
    median of the same-round ratios); ``spread`` adds the range over rounds of each figure and ratio."""
    lines = [
        "| figure | " + " | ".join(col.title for col in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for fig in FIGURES:
        lines.append(f"| {fig.title} | " + " | ".join(_cell(summary, col, fig, spread) for col in columns) + " |")
    return "\n".join(lines)


def spread_lines(summary: dict[str, Any], columns: tuple[Column, ...]) -> list[str]:
    """One line per column and figure: median (min–max) over rounds, and the ratio's, for the console."""
    out = []
    for col in columns:
        for fig in FIGURES:
            value = summary["values"][col.key][fig.key]
            if value is None:
                continue
            line = f"  {col.title:<22} {fig.title:<38} {value.text(fig.digits):>26}"
            ratio = summary["ratios"].get(col.key, {}).get(fig.key)
            if ratio is not None:
                line += f"   peer ÷ codemode {ratio.text(3)}"
            out.append(line + f"   ({value.rounds} rounds)")
    return out


def machine_lines(meta: dict[str, Any]) -> list[str]:
    """The command, the machine, the load before and after, and the versions, one fact a line."""
    m = meta["machine"]
    lines = [
        f"command: `{meta['command']}` ({meta['rounds']} alternating rounds, {meta['started']})",
        f"machine: {m['cpus']} CPUs, {m['model']}; governor {m['governor']}; "
        f"cpuidle {m.get('cpuidle', 'not recorded')}; kernel {m['kernel']}; "
        f"Python {m['python']}; Node {m['node']}",
        f"load average before {meta['load_before']}, after {meta['load_after']}",
    ]
    versions = meta.get("versions", {})
    if versions:
        lines.append("versions: " + "; ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    for title, reason in meta.get("missing", {}).items():
        lines.append(f"not measured: {title}: {reason}")
    return lines
