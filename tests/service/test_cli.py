"""`codemode exec`: one cell through the same lifecycle, envelope printed, exit 0 only if completed."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.cli import main
from tests.support.live_server import codemode_serve
from tests.support.ports import free_port


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean CODEMODE_ environment whose data directory is in tmp."""
    for key in list(os.environ):
        if key.startswith("CODEMODE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CODEMODE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CODEMODE_WORKER_NICE", "0")  # workers at the service's priority (tests/conftest.py)
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


# ---- on a running server (--url, CODEMODE_URL, --api-key) -----------------------------------------------

KEYED_CONFIG = """
[[api_keys]]
key = "cli-key"
tenant = "cli"
"""


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `codemode serve --demo` with one API key."""
    workdir = tmp_path_factory.mktemp("cli-server")
    with codemode_serve(workdir, env={"CODEMODE_DEMO": "true"}, config=KEYED_CONFIG) as url:
        yield url


TYPED_DEMO_CELL = (
    "interface Quote { carrier: string; price: number }\n"
    'const q = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2}) as Quote\n'
    "return q.price > 0"
)


@pytest.mark.slow
def test_exec_runs_on_the_server_given_by_url_as_its_api_key(cli_env, capsys, demo_server):
    """--url and --api-key: the cell runs on that server, with its (demo) tools; TypeScript included."""
    rc = main(["exec", "--url", demo_server, "--api-key", "cli-key", _script(cli_env, TYPED_DEMO_CELL)])
    env = json.loads(capsys.readouterr().out)
    assert rc == 0, env
    assert env["status"] == "completed" and env["value"] is True


@pytest.mark.slow
def test_exec_takes_the_server_and_key_from_the_environment(cli_env, capsys, monkeypatch, demo_server):
    """CODEMODE_URL and CODEMODE_API_KEY stand for --url and --api-key; a Python file runs as Python."""
    monkeypatch.setenv("CODEMODE_URL", demo_server)
    monkeypatch.setenv("CODEMODE_API_KEY", "cli-key")
    path = cli_env / "cell.py"
    path.write_text('q = await quote_shipping(origin="DE", destination="FR", weight_kg=2)\nq["price"] > 0', "utf-8")
    rc = main(["exec", str(path)])
    env = json.loads(capsys.readouterr().out)
    assert rc == 0 and env["value"] is True, env


@pytest.mark.slow
def test_exec_prints_the_servers_refusal_and_exits_2(cli_env, capsys, demo_server):
    """A key the server does not know: its 401 body is printed, exit 2."""
    rc = main(["exec", "--url", demo_server, "--api-key", "wrong", _script(cli_env, "return 1")])
    body = json.loads(capsys.readouterr().out)
    assert rc == 2 and body["error"]["code"] == "unauthorized", body


def test_exec_names_a_server_that_does_not_answer(cli_env, capsys):
    """--url where nothing listens: a message naming the URL and what to do, exit 3, no envelope."""
    url = f"http://127.0.0.1:{free_port()}"
    rc = main(["exec", "--url", url, _script(cli_env, "return 1")])
    out = capsys.readouterr()
    assert rc == 3 and out.out == ""
    assert url in out.err and "codemode serve" in out.err


def test_exec_in_process_says_where_a_missing_tool_may_be(cli_env, capsys):
    """Without --url a demo tool is not defined: the failed envelope, then a hint naming --url and --demo."""
    rc = main(["exec", _script(cli_env, 'return await quote_shipping({origin: "DE"})')])
    out = capsys.readouterr()
    env = json.loads(out.out)
    assert rc == 1 and env["code"] == "uncaught_error", env
    assert "quote_shipping is not defined in this private in-process service" in out.err
    assert "--url http://127.0.0.1:8000" in out.err and "--demo" in out.err


@pytest.mark.slow
def test_exec_demo_runs_in_process_with_the_demo_tools(cli_env, capsys):
    """--demo: the in-process service loads the demo's plugin; --language typescript is accepted."""
    rc = main(["exec", "--demo", "--language", "typescript", _script(cli_env, TYPED_DEMO_CELL)])
    env = json.loads(capsys.readouterr().out)
    assert rc == 0 and env["value"] is True, env


def test_the_cli_languages_are_the_apis():
    """--language offers exactly what the API takes."""
    from service.api.schemas import REQUEST_LANGUAGES
    from service.cli import CELL_LANGUAGES

    assert CELL_LANGUAGES == REQUEST_LANGUAGES
