"""``python -m bench peers``' arithmetic and table, on synthetic rounds: no peer is installed here.

The bench itself (``bench/peer_table.py``) needs Node, npm and PyPI and minutes of a machine; the suite
checks what it computes from its rounds (same-round ratios, medians, spreads, the markdown written into
the docs) and that every workload is valid code in both dialects.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess

import pytest

from bench.peer_report import FIGURES, Column, fmt, markdown_table, summarise
from bench.peer_table import BEGIN, COLUMNS, DOC_FILES, END, shown_argv, write_docs
from bench.peer_workloads import BIG_ROWS, workloads
from bench.tools import rows_for

CODEMODE = Column("cm", "codemode JS", "javascript", "nop")
PEER = Column("peer", "a peer", "javascript", "tools.nop", versus="cm")
COLS = (CODEMODE, PEER)


def _round(cm: float, peer: float) -> dict[str, dict[str, float]]:
    return {"cm": {f.key: cm for f in FIGURES}, "peer": {f.key: peer for f in FIGURES}}


def test_ratios_are_taken_within_each_round_so_drift_that_hits_both_sides_cancels() -> None:
    # The machine slows by 3x in the middle round: each figure's spread is wide, its ratio's is not.
    rounds = [_round(1.0, 2.0), _round(3.0, 6.0), _round(1.5, 3.0)]
    summary = summarise(rounds, COLS)
    value = summary["values"]["peer"]["fresh_ms"]
    ratio = summary["ratios"]["peer"]["fresh_ms"]
    assert (value.median, value.low, value.high, value.rounds) == (3.0, 2.0, 6.0, 3)
    assert (ratio.median, ratio.low, ratio.high, ratio.rounds) == (2.0, 2.0, 2.0, 3)
    # The ratio of medians would mix rounds: 3.0 / 1.5 here happens to agree, so check a case where it does not.
    rounds = [_round(1.0, 1.0), _round(2.0, 8.0), _round(4.0, 4.0)]
    ratio = summarise(rounds, COLS)["ratios"]["peer"]["fresh_ms"]
    assert (ratio.median, ratio.low, ratio.high) == (1.0, 1.0, 4.0)


def test_a_round_missing_either_side_gives_no_ratio_and_codemode_gets_none() -> None:
    rounds = [_round(1.0, 2.0), {"cm": {f.key: 1.0 for f in FIGURES}}, {"peer": {f.key: 9.0 for f in FIGURES}}]
    summary = summarise(rounds, COLS)
    assert summary["ratios"]["peer"]["big_ms"].rounds == 1
    assert summary["values"]["peer"]["big_ms"].rounds == 2
    assert "cm" not in summary["ratios"]
    assert summarise([], COLS)["values"]["peer"]["big_ms"] is None


def test_markdown_table_puts_the_median_ratio_in_brackets_and_spread_on_request() -> None:
    rounds = [_round(1.08, 13.3), _round(1.2, 12.0), _round(1.0, 14.0)]
    table = markdown_table(summarise(rounds, COLS), COLS).splitlines()
    assert table[0] == "| figure | codemode JS | a peer |"
    assert table[1] == "|---|---|---|"
    assert table[2] == "| fresh guest + `return 1`, ms | 1.08 | 13.3 (12.3) |"
    assert len(table) == 2 + len(FIGURES)
    wide = markdown_table(summarise(rounds, COLS), COLS, spread=True).splitlines()
    assert wide[2] == "| fresh guest + `return 1`, ms | 1.08 (1.00–1.20) | 13.3 (12.0–14.0) [12.3 (10.0–14.0)] |"


def test_a_column_with_no_rounds_prints_a_dash() -> None:
    table = markdown_table(summarise([{"cm": {f.key: 1.0 for f in FIGURES}}], COLS), COLS)
    assert table.splitlines()[2] == "| fresh guest + `return 1`, ms | 1.00 | — |"


@pytest.mark.parametrize(
    ("value", "text"),
    [(1304.2, "1,304"), (86.73, "86.7"), (0.6921, "0.692"), (0.01234, "0.0123"), (4591.0, "4,591"), (0, "0")],
)
def test_fmt_keeps_three_significant_digits(value: float, text: str) -> None:
    assert fmt(value) == text
    assert fmt(float("nan")) == "n/a"


def test_write_docs_replaces_only_the_block_between_the_markers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "docs" / "operations").mkdir(parents=True)
    (tmp_path / DOC_FILES[0]).write_text(f"before\n{BEGIN}\nstale table\n{END}\nafter\n")
    (tmp_path / DOC_FILES[1]).write_text("a page without the markers\n")
    meta = {
        "command": "python -m bench peers --rounds 10",
        "rounds": 2,
        "started": "2026-12-07 12:00 UTC",
        "machine": {"cpus": 2, "model": "a CPU", "governor": "n/a", "kernel": "6", "python": "3.12", "node": "v20"},
        "load_before": "1.0 1.0 1.0",
        "load_after": "2.0 2.0 2.0",
        "missing": {"quickjs-rs 0.2": "pip install failed"},
    }
    rounds = [{"codemode-js": {f.key: 1.0 for f in FIGURES}, "vercel-run": {f.key: 2.0 for f in FIGURES}}] * 2
    written = write_docs({"meta": meta, "rounds": rounds}, root=tmp_path)
    assert written == [tmp_path / DOC_FILES[0]]
    text = (tmp_path / DOC_FILES[0]).read_text()
    assert text.startswith(f"before\n{BEGIN}\n| figure | codemode JS | Vercel `run` 2.1 |")
    assert text.endswith(f"{END}\nafter\n")
    assert "stale table" not in text
    assert "`python -m bench peers --rounds 10`" in text
    assert "load average before 1.0 1.0 1.0, after 2.0 2.0 2.0" in text
    assert "not measured: quickjs-rs 0.2: pip install failed" in text
    assert (tmp_path / DOC_FILES[1]).read_text() == "a page without the markers\n"


def test_every_peer_is_measured_against_a_codemode_column_of_its_own_language() -> None:
    by_key = {c.key: c for c in COLUMNS}
    for col in COLUMNS:
        if col.versus is not None:
            assert by_key[col.versus].dialect == col.dialect
            assert by_key[col.versus].versus is None


def test_the_large_value_is_just_under_one_mebibyte_of_compact_json() -> None:
    assert rows_for(1 << 20) == BIG_ROWS


def test_every_workload_is_valid_python() -> None:
    for w in workloads(1000).values():
        ast.parse(w.code("python", ""), mode="exec")  # top-level await parses; Monty and codemode allow it


@pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed, so the JavaScript workloads are not parsed"
)
def test_every_workload_is_a_valid_async_function_body_for_each_spelling_of_the_host_function() -> None:
    codes = [w.code("javascript", col.call) for w in workloads(1000).values() for col in COLUMNS]
    script = (
        "const AsyncFunction = (async () => {}).constructor;"
        "for (const code of JSON.parse(process.argv[1])) new AsyncFunction(code);"
    )
    done = subprocess.run(["node", "-e", script, json.dumps(codes)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_printed_command_leaves_out_local_paths() -> None:
    argv = ["--rounds", "10", "--monty-dir", "/x/monty", "--out=/tmp/r.json", "--write-docs", "--only", "a,b"]
    assert shown_argv(argv) == ["--rounds", "10", "--only", "a,b"]
