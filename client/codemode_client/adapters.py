"""What the framework adapters share, with no framework imported: the code tool's description and
arguments, the framework tools as client tool declarations, and the answer the model gets back.

Each adapter (``pydantic_ai_toolset``, ``langchain_tool``, ``openai_agents_tool``) turns codemode into
one code tool: its description is the server's ``GET /v1/tool-description`` plus a line per framework
tool, and a call runs ``AsyncClient.run`` with the framework tools declared as client tools, so every
call a cell makes to one of them goes back through the framework's own tool execution.  The run is
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
#: The arguments a model passes to the code tool (the server's tool-description input schema).
CODE_FIELDS = ("code", "title", "timeout_ms", "max_output_bytes")
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


def description(server: Mapping[str, Any], tools: Sequence[FrameworkTool]) -> str:
    """The server's description followed by one line per framework tool the cell may call."""
    text = str(server.get("description", ""))
    if not tools:
        return text
    lines = []
    for tool in tools:
        schema = json.dumps(tool.input_schema.get("properties", {}), separators=(",", ":"), ensure_ascii=False)
        first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        line = f"- {tool.name}({schema}): {first}"
        lines.append(line if len(line) <= MAX_TOOL_LINE_CHARS else line[: MAX_TOOL_LINE_CHARS - 3] + "...")
    return (
        f"{text}\n\nYour own tools, also async globals in a cell taking one object "
        "(`await name({...})`; each call runs in your program and its result comes back to the cell):\n"
        + "\n".join(lines)
    )


def input_schema(server: Mapping[str, Any]) -> dict[str, Any]:
    """The code tool's argument schema, as the server describes it."""
    schema = server.get("input_schema")
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    return dict(schema)


def exec_arguments(args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(code, fields)`` from the model's arguments; a missing or blank ``code`` raises ``ValueError``."""
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ValueError("the codemode tool needs `code`: a non-empty string of JavaScript")
    unknown = sorted(set(args) - set(CODE_FIELDS))
    if unknown:
        raise ValueError(f"the codemode tool takes {', '.join(CODE_FIELDS)}; not {unknown[0]!r}")
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
