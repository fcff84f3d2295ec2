"""`codemode exec`: one cell through the same lifecycle, envelope printed, exit 0 only if completed."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from service.cli import main


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean CODEMODE_ environment whose data directory is in tmp."""
    for key in list(os.environ):
        if key.startswith("CODEMODE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CODEMODE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def _script(tmp: Path, code: str) -> str:
    path = tmp / "cell.js"
    path.write_text(code, encoding="utf-8")
    return str(path)


def test_exec_completed_cell_exits_0_and_prints_envelope(cli_env, capsys):
    """A completed cell prints its envelope and exits 0."""
    rc = main(["exec", _script(cli_env, 'text("hi"); return 1 + 1')])
    env = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert env["status"] == "completed" and env["value"] == 2
    assert env["output"] == [{"type": "text", "text": "hi"}]


def test_exec_failed_cell_exits_1(cli_env, capsys):
    """A failing cell prints the failed envelope and exits 1."""
    rc = main(["exec", _script(cli_env, "missingFn()")])
    env = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert env["status"] == "failed"
    assert env["error"].startswith("ReferenceError: missingFn is not defined")


def test_exec_invalid_input_exits_1(cli_env, capsys):
    """A cell refused before running (syntax error) exits 1 with failure_phase input."""
    rc = main(["exec", _script(cli_env, "let = = 1")])
    env = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert env["code"] == "invalid_input" and env["failure_phase"] == "input"


@pytest.mark.slow
def test_exec_reads_stdin(cli_env, capsys, monkeypatch):
    """`codemode exec -` reads the cell from stdin."""
    monkeypatch.setattr("sys.stdin", io.StringIO("return [1, 2, 3].length"))
    rc = main(["exec", "-"])
    env = json.loads(capsys.readouterr().out)
    assert rc == 0 and env["value"] == 3


@pytest.mark.slow
def test_exec_keeps_waiting_on_host_work_past_one_leg(cli_env, capsys):
    """A cell whose timer outlasts --timeout-ms is resumed by the CLI until it completes."""
    rc = main(
        ["exec", "--timeout-ms", "150", _script(cli_env, "await new Promise(r => setTimeout(r, 400)); return 'late'")]
    )
    env = json.loads(capsys.readouterr().out)
    assert rc == 0, env
    assert env["status"] == "completed" and env["value"] == "late"


def test_exec_refuses_unknown_environment_setting(cli_env, capsys, monkeypatch):
    """An unknown CODEMODE_ variable stops the CLI with a non-zero exit naming it."""
    monkeypatch.setenv("CODEMODE_NOT_A_SETTING", "1")
    rc = main(["exec", _script(cli_env, "return 1")])
    assert rc not in (0, 1)
    assert "CODEMODE_NOT_A_SETTING" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("code", "flags", "field"),
    [("   \n", [], "code"), ("return 1", ["--session-id", "bad id!"], "session_id")],
)
def test_exec_checks_the_request_like_http_before_any_worker_starts(cli_env, capsys, monkeypatch, code, flags, field):
    """`codemode exec` builds its cell from the HTTP request model: blank code or a malformed session id
    prints the invalid_request body naming the field and exits 2, and no service is built."""
    import service.assembly

    def no_service(*_args, **_kwargs):
        raise AssertionError("the service was built for a request that is refused")

    monkeypatch.setattr(service.assembly, "build_components", no_service)
    rc = main(["exec", _script(cli_env, code), *flags])
    body = json.loads(capsys.readouterr().out)["error"]
    assert rc == 2 and body["code"] == "invalid_request" and body["need_param"] == field
