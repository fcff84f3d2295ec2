"""The model-facing description of codemode as one function tool: ``{name, description, input_schema}``.

One builder for every face: ``GET /v1/tool-description`` answers it for the caller's key, and the MCP
facade's ``exec`` tool carries the same text.  The text teaches what a cell is, the guest API in brief,
where the two limits apply (the inbox for what a cell reads, the output budget for what comes back), how
to continue a waiting cell, and ends with the key's quick index.  Its size is bounded: the fixed text
plus the quick index (itself at most ``QUICK_INDEX_MAX_CHARS``) stays under ``MAX_DESCRIPTION_CHARS``.
"""

from __future__ import annotations

import copy
import functools

from bridge.json_types import JsonObject
from bridge.messages import Language
from service.api.schemas import REQUEST_LANGUAGES, ExecRequest, cell_language
from service.api_files.quick_index import QUICK_INDEX_MAX_CHARS
from service.errors import InvalidRequest
from service.runtime.spec import check_runs
from service.settings import Settings

TOOL_NAME = "codemode"
#: Languages a cell may be written in: JavaScript (or TypeScript, its types stripped) on QuickJS, Python
#: on Monty (the same contract).
LANGUAGES = REQUEST_LANGUAGES
DEFAULT_LANGUAGE: Language = "javascript"
#: The exec fields a model fills in; sessions, runs and client tools are the caller's business.
MODEL_FIELDS = ("code", "title", "timeout_ms", "max_output_bytes")
#: Fixed text (about 2,600 characters with the largest settings) plus the quick index.
MAX_DESCRIPTION_CHARS = QUICK_INDEX_MAX_CHARS + 4000

_JAVASCRIPT = """Run JavaScript or TypeScript (types are stripped, not checked) in a fresh sandbox (QuickJS). The \
code is the body of an async function: top-level \
`await` works and `return` gives the cell's value (JSON). Each call is a new cell; nothing carries over except \
saved results and the session store. Write one cell that does the whole job (calls, loops, filtering) and \
returns only what matters.
- Tools are async globals taking one object: `const r = await tool_name({...})`. The tools you may call are \
listed below. Find tools with `await catalog.search("words", {limit: 5})`; read one's TypeScript declaration \
with `await API.read("tools/<name>.d.ts")` (`await API.list()` lists every declaration file; MCP clients read \
the same files as resources codemode://api/tools/<name>.d.ts).
- MCP servers: `await MCP.<server>.<tool>({...})` returns the MCP result {content, structuredContent?, \
isError?}; their declarations are `API.read("mcp/index.d.ts")` and `API.read("mcp/<server>.d.ts")`.
- Output: `text(v)`, `json(v)` and `console.log(...)` append to the cell's output, in order.
- Large data: `const ref = await results.save(v)` keeps a value out of your context and answers a small \
reference; `await results.load(ref.id)` reads it back (same session and run). `await store(key, value)` and \
`await load(key)` keep small values per session.
- No network, files, require, import or process.
Limits. What a cell reads (tool replies, loads, declarations) must fit its inbox of {inbox_bytes} bytes not \
yet consumed: a bigger reply rejects with a catchable "program-data budget exceeded" error, so paginate or \
narrow the request. What comes back to you (output plus the value or error) shares max_output_bytes (default \
{max_output_bytes}): past it you get a truncation marker instead (for a large value, with a saved-result \
reference). Each \
call runs at most timeout_ms (default {timeout_ms}, at most {max_timeout_ms}).
Continuing. A cell still blocked on tools when timeout_ms runs out, or that needs its caller (a client tool, \
an approval), answers status "waiting" with a cell_id and pending_tool_calls: continue it with wait (the \
cell_id, plus tool_results for client tool calls and approvals for approval requests). Only output not shown \
before comes back."""


_PYTHON = """Run Python in a fresh sandbox (Monty, a Python subset: no generators, no third-party packages). Pass "language": "python". The code is a module: top-level `await` works and the value of the last expression statement is the cell's value (JSON). Each call is a new cell; nothing carries over except the session store. Write one cell that does the whole job (calls, loops, filtering) and ends with only what matters.
- Tools are async functions taking keyword arguments: `r = await tool_name(field=value)`. The tools you may call are listed below, each input and output in TypeScript notation (`{origin: string}` is `origin="DE"`; read `API.read("tools/<name>.pyi")` for its Python stub); several at once: `import asyncio` then `await asyncio.gather(a(...), b(...))`.
- A failed call raises an exception you can catch; `error_info(e)` gives its fields (`code`, `tool`, `message`, ...), None for your own exceptions.
- Output: `text(v)`, `json(v)` and `print(...)` append to the cell's output, in order.
- `await store(key, value)` and `await load(key)` keep small values per session; `await sleep(seconds)` and `await yield_control()` wait on the host.
- No network, files, environment, clock or processes: such calls raise an error.
Limits. What a cell reads (tool replies, loads) must fit its inbox of {inbox_bytes} bytes not yet consumed: a bigger reply raises a catchable "program-data budget exceeded" error, so paginate or narrow the request. What comes back to you (output plus the value or error) shares max_output_bytes (default {max_output_bytes}): past it you get a truncation marker instead. Each call runs at most timeout_ms (default {timeout_ms}, at most {max_timeout_ms}).
Continuing. A cell still blocked on tools when timeout_ms runs out, or that needs its caller (a client tool, an approval), answers status "waiting" with a cell_id and pending_tool_calls: continue it with wait (the cell_id, plus tool_results for client tool calls and approvals for approval requests). Only output not shown before comes back."""


def check_language(language: str | None) -> Language:
    """The cell language asked for ("typescript" is "javascript"), or ``InvalidRequest`` naming the ones this
    server runs."""
    if language is None:
        return DEFAULT_LANGUAGE
    for known in LANGUAGES:
        if language == known:
            return cell_language(known)
    raise InvalidRequest(
        f"language {language[:64]!r} is not available: this server runs {', '.join(LANGUAGES)} cells",
        need_param="language",
    )


def description_text(settings: Settings, quick_index: str, language: str = DEFAULT_LANGUAGE) -> str:
    """The description: the guest API and its limits for ``settings``, then the caller's quick index."""
    check_language(language)
    values = {
        "inbox_bytes": min(settings.memory_limit_bytes, settings.max_snapshot_bytes),
        "max_output_bytes": settings.max_output_bytes,
        "timeout_ms": settings.timeout_ms,
        "max_timeout_ms": settings.max_timeout_ms,
    }
    text = _PYTHON if language == "python" else _JAVASCRIPT
    # Not str.format: the text is full of JavaScript braces.
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return f"{text}\n\n{quick_index}" if quick_index else text


def input_schema() -> JsonObject:
    """The arguments a model passes: the exec request's own fields and bounds, ``code`` required."""
    return copy.deepcopy(_input_schema())


@functools.cache
def _input_schema() -> JsonObject:
    # pydantic builds a JSON schema in milliseconds: once per process, not once per request.
    full = ExecRequest.model_json_schema()
    return {
        "type": "object",
        "properties": {name: full["properties"][name] for name in MODEL_FIELDS},
        "required": ["code"],
        "additionalProperties": False,
    }


def tool_description(settings: Settings, quick_index: str, language: str | None = None) -> JsonObject:
    """``{name, description, input_schema}``, ready to register as a function tool with a model provider."""
    lang = check_language(language)
    check_runs(settings, lang)
    schema = input_schema()
    if lang != DEFAULT_LANGUAGE:
        # The model must say which language its code is in: the field is fixed to the described one.
        properties = schema["properties"]
        assert isinstance(properties, dict)  # built by _input_schema
        properties["language"] = {"const": lang, "description": f"always {lang!r}: the code is {lang}"}
        schema["required"] = ["code", "language"]
    return {
        "name": TOOL_NAME,
        "description": description_text(settings, quick_index, lang),
        "input_schema": schema,
    }
