"""codemode as FastMCP CodeMode's sandbox (``pip install 'codemode-client[fastmcp]'``).

    from codemode_client.fastmcp_sandbox import CodemodeSandboxProvider
    from fastmcp.experimental.transforms.code_mode import CodeMode
    mcp.add_transform(CodeMode(sandbox_provider=CodemodeSandboxProvider("http://127.0.0.1:8000", api_key=KEY)))

FastMCP's ``CodeMode`` transform hands its ``execute`` tool's Python to a ``SandboxProvider``:
``run(code, inputs=, external_functions=)``, with ``external_functions={"call_tool": ...}`` reaching
the server's own tools.  This provider runs that code as one codemode **Python cell** (Monty inside
codemode's confined worker) under the key's tenant, limits and tool policy, and answers the cell's
calls to each external function as a client tool, in this process, through the function FastMCP
gave: so FastMCP's own tool lookup, visibility and validation decide every call.

The cell sees each external function under its own name, taking positional arguments as FastMCP's code
writes them (``await call_tool("add", {"a": 1})``): a one-line prelude binds the name to a client tool
(``fastmcp_<name>``) that carries ``{args, kwargs}``; the line numbers of a failure are the code's own.
This is the only module of ours that imports FastMCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import keyword
import re
import weakref
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

try:
    from fastmcp.exceptions import ToolError
except ImportError as exc:  # the framework is an optional extra
    raise ImportError(
        f"codemode_client.fastmcp_sandbox needs its framework: pip install 'codemode-client[fastmcp]' ({exc})"
    ) from exc

from . import adapters
from .async_client import AsyncClient
from .client import Approver
from .errors import CodemodeError, RunLimitError
from .models import Envelope

#: The client tool an external function ``name`` is declared as (its own name stays free for the prelude).
HOST_PREFIX = "fastmcp_"
#: What each client tool takes: the positional and keyword arguments of one call (the service checks it).
CALL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"args": {"type": "array"}, "kwargs": {"type": "object"}},
    "required": ["args", "kwargs"],
    "additionalProperties": False,
}
#: The name the prelude imports ``json`` as, to decode the ``inputs`` (the cell's ``json()`` keeps its name).
_JSON = "fastmcp_json"
#: The cell's title in codemode's cell list and traces, unless the caller gives one.
DEFAULT_TITLE = "fastmcp execute"
#: Where codemode's Python errors name a line of cell.py: a traceback frame, a syntax error.
_LINE_REFERENCES = re.compile(r'(File "cell\.py", line |at cell\.py:)(\d+)')


class CodemodeSandboxProvider:
    """A FastMCP ``SandboxProvider`` whose code runs as a codemode Python cell.

    ``client`` is an ``AsyncClient`` (left open) or the service's URL (a client per event loop, made on
    its first run there; ``aclose()`` closes the running loop's).  ``api_key`` picks the tenant and its
    tool policy; ``exec_fields`` go with every cell (``timeout_ms``, ``memory_limit_bytes``, ``max_output_bytes``, ``session_id``, ``run_id``,
    ``require_approval``, ``title``, …).  ``approve(call)`` answers the cell's approval requests (without
    it they are denied); ``on_envelope(env)`` sees each leg's envelope (the cell id, its telemetry).
    ``max_legs`` and ``deadline`` bound the run as ``AsyncClient.run`` does.

    A cell that completes gives ``run()`` its value; one that fails, and a request codemode refuses,
    raise FastMCP's ``ToolError`` with codemode's message, which FastMCP shows the model.
    """

    def __init__(
        self,
        client: AsyncClient | str,
        *,
        api_key: str | None = None,
        approve: Approver | None = None,
        on_envelope: Callable[[Envelope], object] | None = None,
        max_legs: int | None = None,
        deadline: float | None = None,
        **exec_fields: Any,
    ) -> None:
        if "language" in exec_fields or "client_tools" in exec_fields:
            raise TypeError("CodemodeSandboxProvider sets language and client_tools itself")
        self._client = client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = weakref.WeakKeyDictionary()
        self._api_key = api_key
        self._approve = approve
        self._on_envelope = on_envelope
        self._bounds: dict[str, Any] = {
            k: v for k, v in (("max_legs", max_legs), ("deadline", deadline)) if v is not None
        }
        self._fields = {"title": DEFAULT_TITLE, **exec_fields}

    async def run(
        self,
        code: str,
        *,
        inputs: dict[str, Any] | None = None,
        external_functions: dict[str, Callable[..., Any]] | None = None,
    ) -> Any:
        functions = dict(external_functions or {})
        source = cell_source(code, inputs or {}, list(functions))
        client_tools = [
            (
                {"name": HOST_PREFIX + name, "description": _describe(name, fn), "input_schema": dict(CALL_SCHEMA)},
                _handler(fn),
            )
            for name, fn in functions.items()
        ]
        async with self._session() as cm:
            try:
                env = await cm.run(
                    source,
                    language="python",
                    client_tools=client_tools,
                    approve=self._approve,
                    on_envelope=self._on_envelope,
                    **self._bounds,
                    **self._fields,
                )
            except RunLimitError as exc:
                raise ToolError(adapters.stopped(exc)) from None
            except CodemodeError as exc:  # refused (422, 429, 401, ...) or unreachable: FastMCP reports it
                raise ToolError(f"codemode refused the code: {exc}") from None
        if env.status == "completed":
            return env.value
        raise ToolError(failure_text(env))

    def _session(self) -> AbstractAsyncContextManager[AsyncClient]:
        """The caller's client, or this event loop's client for the URL: made once per loop, since a connection
        belongs to the loop that opened it and a new client costs more than a cell (its TLS context)."""
        if isinstance(self._client, AsyncClient):
            return contextlib.nullcontext(self._client)
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = AsyncClient(self._client, self._api_key)
        return contextlib.nullcontext(client)

    async def aclose(self) -> None:
        """Close the client this provider made for the running event loop (a caller's client stays open)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


def cell_source(code: str, inputs: Mapping[str, Any], functions: list[str]) -> str:
    """The cell: a one-line prelude (the inputs, the external functions), then ``code`` from line 2."""
    prelude: list[str] = []
    if inputs:
        prelude.append(f"import json as {_JSON}")
    for name, value in inputs.items():
        _check_identifier(name, "an input")
        try:
            text = json.dumps(value, allow_nan=False, ensure_ascii=True, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError) as exc:
            raise ToolError(f"CodeMode inputs must be JSON values for a codemode cell; {name!r}: {exc}") from None
        # ensure_ascii: the JSON text is plain ASCII, so its repr is a Python string literal as written.
        prelude.append(f"{name} = {_JSON}.loads({text!r})")
    for name in functions:
        _check_identifier(name, "an external function")
        prelude.append(f"{name} = lambda *args, **kwargs: {HOST_PREFIX}{name}(args=list(args), kwargs=kwargs)")
    return "; ".join(prelude or ["pass"]) + "\n" + code


def failure_text(env: Envelope) -> str:
    """A failed cell's error for the model, its line numbers counted in the code it wrote (not the prelude)."""
    text = _LINE_REFERENCES.sub(lambda m: m.group(1) + str(max(int(m.group(2)) - 1, 1)), env.error or "")
    return f"{text}\n(codemode: {env.code}, failure_phase {env.failure_phase}, cell {env.cell_id})"


def _check_identifier(name: str, what: str) -> None:
    if not (isinstance(name, str) and name.isidentifier() and name.isascii() and not keyword.iskeyword(name)):
        raise ToolError(f"{what} named {name!r:.80} cannot be a name in a codemode Python cell")


def _describe(name: str, fn: Callable[..., Any]) -> str:
    try:
        signature = str(inspect.signature(fn))
    except (TypeError, ValueError):
        signature = "(*args, **kwargs)"
    return f"FastMCP's {name}{signature}: the cell calls it as {name}(...); its arguments arrive as args and kwargs."


def _handler(fn: Callable[..., Any]) -> Callable[[Any], Awaitable[Any]]:
    async def handle(call: Any) -> Any:
        # The service checked the input against CALL_SCHEMA before the cell parked.
        try:
            result = fn(*call["args"], **call["kwargs"])
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            lines = str(exc).splitlines()
            if len(lines) < 2:
                raise
            # FastMCP's validation errors span lines (the failure, then the valid parameters), and a Python
            # cell's uncaught-error text keeps only a message's last line: the model gets them all on one.
            raise ToolError("; ".join(line.strip() for line in lines if line.strip())) from exc
        return adapters.jsonable(result)

    return handle


if TYPE_CHECKING:  # the client's mypy run holds the provider to FastMCP's protocol
    from fastmcp.experimental.transforms.code_mode import SandboxProvider

    _CONFORMS: SandboxProvider = CodemodeSandboxProvider("http://127.0.0.1:8000")
