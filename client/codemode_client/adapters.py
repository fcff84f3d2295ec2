"""What the framework adapters share, with no framework imported: the code tool's description and
arguments, the framework tools as client tool declarations, and the answer the model gets back.

Each adapter (``pydantic_ai_toolset``, ``langchain_tool``, ``openai_agents_tool``) turns codemode into
one code tool: its description is the server's ``GET /v1/tool-description`` for the language its cells
are written in (the ``language`` exec field: JavaScript unless it says otherwise) plus a line per
framework tool, spelled in that language, and a call runs ``AsyncClient.run`` with the framework tools
declared as client tools, so every call a cell makes to one of them goes back through the framework's own tool execution.  The run is
bounded like any ``run()`` (``max_legs``, ``deadline``: its defaults, or the adapter's exec fields); a
cell it stops there is a tool error the model sees (``stopped``), in the framework's own form.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import RunLimitError
from .models import Envelope

TOOL_NAME = "codemode"
#: The arguments a model passes to the code tool (the server's tool-description input schema); ``language``
#: only as the tool's own (the server's schema for a Python tool requires it, fixed to "python").
CODE_FIELDS = ("code", "title", "timeout_ms", "max_output_bytes", "language")
DEFAULT_LANGUAGE = "javascript"
#: How the model is told to call its own tools from a cell, by language: what they are, and a call.
_CALLS = {
    "python": ("async functions in a cell taking keyword arguments", "await name(field=value)"),
    "javascript": ("async globals in a cell taking one object", "await name({...})"),
}
#: What the code is, by language, in the refusal of a call without it.
_SOURCE = {"python": "Python", "javascript": "JavaScript", "typescript": "TypeScript"}
#: One framework tool's line in the description (its schema is in the cell's declaration file anyway).
MAX_TOOL_LINE_CHARS = 600
#: The service's cap on a client tool's description (service/api/schemas.py ClientToolDecl).
MAX_CLIENT_DESCRIPTION_CHARS = 4096
#: Text output entries returned to the model after the value (the envelope's own budget bounds them).
_OUTPUT_KINDS = ("text", "truncated")

#: ``approve(tool_name, args)`` for a framework tool whose framework asks for approval: bool, or an awaitable of one.
Approve = Callable[[str, Mapping[str, Any]], bool | Awaitable[bool]]


async def approved(approve: Approve | None, name: str, args: Any) -> bool:
    """Whether ``approve`` lets this call run (no approver: it does not)."""
    if approve is None:
        return False
    decision = approve(name, args if isinstance(args, Mapping) else {})
    return bool(await decision if inspect.isawaitable(decision) else decision)


@dataclass(frozen=True)
class FrameworkTool:
    """A framework's tool as codemode declares it to a cell: a client tool with the framework's schema."""

    name: str
    description: str
    input_schema: Mapping[str, Any]

    def declaration(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description[:MAX_CLIENT_DESCRIPTION_CHARS],
            "input_schema": dict(self.input_schema),
        }


def language(exec_fields: Mapping[str, Any]) -> str:
    """The language the adapter's cells are written in: its ``language`` exec field, else JavaScript."""
    chosen = exec_fields.get("language")
    return chosen if isinstance(chosen, str) else DEFAULT_LANGUAGE


def description(server: Mapping[str, Any], tools: Sequence[FrameworkTool], language: str = DEFAULT_LANGUAGE) -> str:
    """The server's description (fetched for ``language``) followed by one line per framework tool the cell may
    call, spelled as a ``language`` cell calls it."""
    text = str(server.get("description", ""))
    if not tools:
        return text
    lines = []
    for tool in tools:
        schema = json.dumps(tool.input_schema.get("properties", {}), separators=(",", ":"), ensure_ascii=False)
        first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        line = f"- {tool.name}({schema}): {first}"
        lines.append(line if len(line) <= MAX_TOOL_LINE_CHARS else line[: MAX_TOOL_LINE_CHARS - 3] + "...")
    kind, call = _CALLS["python" if language == "python" else "javascript"]
    return (
        f"{text}\n\nYour own tools, also {kind} (`{call}`; each call runs in your program and its result comes "
        "back to the cell):\n" + "\n".join(lines)
    )


def input_schema(server: Mapping[str, Any]) -> dict[str, Any]:
    """The code tool's argument schema, as the server describes it."""
    schema = server.get("input_schema")
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    return dict(schema)


def exec_arguments(args: Mapping[str, Any], language: str = DEFAULT_LANGUAGE) -> tuple[str, dict[str, Any]]:
    """``(code, fields)`` from the model's arguments for a tool whose cells are ``language``; a missing or blank
    ``code``, a field the model may not set or another language raises ``ValueError``."""
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ValueError(f"the codemode tool needs `code`: a non-empty string of {_SOURCE.get(language, language)}")
    unknown = sorted(set(args) - set(CODE_FIELDS))
    if unknown:
        raise ValueError(f"the codemode tool takes {', '.join(CODE_FIELDS)}; not {unknown[0]!r}")
    asked = args.get("language")
    if asked is not None and asked != language:
        raise ValueError(f"this codemode tool runs {language} cells, not {str(asked)[:64]!r}: write {language}")
    return code, {k: v for k, v in args.items() if k != "code" and v is not None}


def jsonable(value: Any) -> Any:
    """A tool's return value as JSON for the cell: JSON as it is, pydantic models dumped, anything else its text."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        pass
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def stopped(exc: RunLimitError) -> str:
    """The tool error a model gets when ``run()`` stopped its cell at a bound (``max_legs``, ``deadline``)."""
    return f"codemode stopped the cell ({exc.code}): {exc.message}"


def answer(env: Envelope) -> dict[str, Any]:
    """What the model gets back from one code-tool call: status, value or error, and the text output."""
    out: dict[str, Any] = {"status": env.status}
    if env.status == "completed":
        out["value"] = env.value
    elif env.status == "failed":
        out["error"] = env.error
        out["code"] = env.code
    texts = [e.text for e in env.output if e.kind in _OUTPUT_KINDS and e.text is not None]
    json_entries = [e.value for e in env.output if e.kind == "json"]
    if texts:
        out["output"] = texts
    if json_entries:
        out["json_output"] = json_entries
    if env.warnings:
        out["warnings"] = list(env.warnings)
    return out
