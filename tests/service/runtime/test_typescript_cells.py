"""TypeScript cells through the real service: real worker processes (confined as deployed), the HTTP API."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import run, run_ok, value_of

TYPED = """
interface Echo { echo: number; session: string | null }
const replies: Echo[] = await Promise.all([1, 2].map((x: number) => echo({ x }) as Promise<Echo>));
const total = replies.reduce((sum: number, r: Echo): number => sum + r.echo, 0);
text(`total ${total satisfies number}`);
return { total, first: replies[0]!.echo };
"""


@pytest.mark.parametrize("language", [None, "javascript", "typescript"])
def test_a_typed_cell_calls_tools_in_every_javascript_language(client: TestClient, language: str | None):
    """Types are stripped whatever the cell is called: "typescript" is "javascript" by another name."""
    env = run_ok(client, TYPED, **({} if language is None else {"language": language}))
    assert env["value"] == {"total": 3, "first": 1}
    assert [entry for entry in env["output"] if entry.get("type") == "text"][0]["text"] == "total 3"


def test_a_runtime_error_names_the_line_and_column_the_caller_wrote(client: TestClient):
    """Blanked types move nothing: the stack frame points at `.b` as sent, after a typed line."""
    code = "const s: Record<string, { a?: number }> = {}\nconst v: number = (s as any).x.b as number"
    env = run(client, code, language="typescript")
    assert env["status"] == "failed" and env["failure_phase"] == "guest", env
    column = code.split("\n")[1].index("s as any") + 1
    assert f"cell.js:2:{column}" in env["error"], env["error"]


def test_a_syntax_error_after_types_keeps_its_position(client: TestClient):
    """A mistake in a typed cell is an invalid_input at the mistake's own line and column."""
    env = run(client, "const a: number = 1\nconst b = ;", language="typescript")
    assert (env["status"], env["code"], env["failure_phase"]) == ("failed", "invalid_input", "input"), env
    assert env["error"].startswith("SyntaxError at cell.js:2:11:"), env["error"]


def test_an_enum_is_refused_naming_the_construct_and_its_line(client: TestClient):
    """A construct that needs a transform is refused before anything runs, with what to write instead."""
    env = run(client, 'text("never")\nenum Color { Red, Green }\nreturn Color.Red')
    assert (env["status"], env["code"], env["failure_phase"]) == ("failed", "invalid_input", "input"), env
    assert env["error"].startswith("SyntaxError at cell.js:2:1: TypeScript enum is not supported"), env["error"]
    assert env["output"] == [] and env["bridge_dispatch_started"] is False


def test_an_unknown_language_is_refused_naming_the_three(client: TestClient):
    """The 422 lists the languages a request may name."""
    r = client.post("/v1/exec", json={"code": "return 1", "language": "coffeescript"})
    assert r.status_code == 422, r.text
    assert all(name in r.text for name in ("javascript", "typescript", "python")), r.text


def test_the_api_schema_and_the_tool_description_name_typescript(client: TestClient):
    """OpenAPI offers the alias; the tool description for "typescript" is the JavaScript one, which says so."""
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ExecRequest"]["properties"]["language"]
    assert schema["enum"] == ["javascript", "typescript", "python"]
    typescript = client.get("/v1/tool-description", params={"language": "typescript"}).json()
    javascript = client.get("/v1/tool-description").json()
    assert typescript == javascript
    assert typescript["description"].startswith("Run JavaScript or TypeScript (types are stripped, not checked)")


def test_a_typed_python_cell_is_still_python(client: TestClient):
    """Python cells are not touched by the TypeScript reading (their annotations are Python's)."""
    assert value_of(run(client, "x: int = 2\nx * 21", language="python")) == 42
