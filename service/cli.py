"""``codemode`` command line: ``serve`` the HTTP API, ``exec`` one cell and print its envelope, or serve
``mcp`` on stdin/stdout."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bridge import jsoncodec

from .errors import ServiceError

if TYPE_CHECKING:  # the settings module is imported once the command line is parsed
    from .settings import Settings

STARTUP_FAILURE = 3
#: What ``--language`` takes: service.api.schemas.REQUEST_LANGUAGES, spelled out so ``codemode --help``
#: does not import pydantic (a test holds the two equal).
CELL_LANGUAGES = ("javascript", "typescript", "python")
#: A cell that names what the in-process service does not have: a tool of a server it did not reach.
_NOT_DEFINED = re.compile(r"ReferenceError: (\S+) is not defined|NameError: name '(\S+)' is not defined")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="codemode", description="Sandboxed code-mode cells (JavaScript, TypeScript, Python) over HTTP and MCP."
    )
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="bind address (default 127.0.0.1; others need API keys)")
    serve.add_argument("--port", type=int, help="bind port (default 8000)")
    serve.add_argument("--config", help="TOML config file (or CODEMODE_CONFIG)")
    serve.add_argument("--workers", type=int, help="warm worker processes")
    serve.add_argument("--store-url", help="sqlite:///PATH or redis://HOST:PORT/DB")
    serve.add_argument("--log-level", help="uvicorn log level")
    serve.add_argument(
        "--demo", action="store_true", default=None, help="load the example shipping plugin and a demo MCP server"
    )
    ex = sub.add_parser(
        "exec",
        help="run one cell and print its envelope (exit 0 only when completed)",
        description="Run one cell and print its envelope. With --url (or CODEMODE_URL) the cell runs on that "
        "server, as its API key (--api-key or CODEMODE_API_KEY), with that server's tools; without, in a "
        "private in-process service with the tools of --config (and the demo's with --demo).",
    )
    ex.add_argument("file", help="the cell: a JavaScript, TypeScript or Python (.py) file, or - for stdin")
    ex.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000 (or CODEMODE_URL)")
    ex.add_argument("--api-key", help="the server's API key (or CODEMODE_API_KEY)")
    ex.add_argument(
        "--language",
        choices=CELL_LANGUAGES,
        help="the cell's language (default: python for a .py file, else javascript)",
    )
    ex.add_argument("--title", help="a title for the cell (logged by the server)")
    ex.add_argument(
        "--demo",
        action="store_true",
        default=None,
        help="in-process: load the example shipping plugin and demo MCP server",
    )
    ex.add_argument("--config", help="in-process: TOML config file (or CODEMODE_CONFIG)")
    ex.add_argument("--timeout-ms", type=int)
    ex.add_argument("--memory-limit-bytes", type=int)
    ex.add_argument("--max-output-bytes", type=int)
    ex.add_argument("--session-id")
    ex.add_argument("--run-id")
    mcp = sub.add_parser("mcp", help="serve MCP on stdin/stdout for a desktop MCP client (logs to stderr)")
    mcp.add_argument("--config", help="TOML config file (or CODEMODE_CONFIG)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .settings_load import load_settings

    if args.command == "exec":
        from .settings import API_KEY_VARIABLE, URL_VARIABLE

        url = args.url or os.environ.get(URL_VARIABLE)
        if url:
            return _exec_on_server(args, url, args.api_key or os.environ.get(API_KEY_VARIABLE))
    overrides: dict[str, object] = {}
    if args.command == "exec" and args.demo:
        overrides = {"demo": True}
    if args.command == "serve":
        overrides = {
            "host": args.host,
            "port": args.port,
            "workers": args.workers,
            "store_url": args.store_url,
            "log_level": args.log_level,
            "demo": args.demo,
        }
    try:
        settings = load_settings(config_path=args.config, overrides=overrides)
    except ServiceError as exc:
        print(f"codemode: configuration error: {exc.message}", file=sys.stderr)
        return STARTUP_FAILURE
    if args.command == "serve":
        return _serve(settings)
    if args.command == "mcp":
        return asyncio.run(_mcp(settings))
    return asyncio.run(_exec(settings, args))


def _serve(settings: Settings) -> int:
    from .app import create_app
    from .assembly import build_components
    from .http.server import serve

    try:
        services = build_components(settings)
        app = create_app(settings, services)
    except ServiceError as exc:
        print(f"codemode: cannot start: {exc.message}", file=sys.stderr)
        return STARTUP_FAILURE
    import logging

    # Cell outcomes (with the request's title) are logged by "codemode" at the same level as uvicorn.
    logging.basicConfig(format="%(levelname)s:     %(name)s: %(message)s")
    logging.getLogger("codemode").setLevel(settings.log_level.upper())
    serve(app, settings, drain=services.drain.run if services.drain is not None else None)
    return 0


async def _mcp(settings: Settings) -> int:
    from .mcp_server.stdio_main import run_stdio

    try:
        await run_stdio(settings)
    except ServiceError as exc:
        print(f"codemode: cannot start: {exc.message}", file=sys.stderr)
        return STARTUP_FAILURE
    return 0


def _request(args: argparse.Namespace) -> dict[str, object]:
    """The exec request the command line asks for (fields it leaves out are not sent: the defaults apply)."""
    # read and closed: no unclosed-file warning
    code = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    language = args.language or ("python" if args.file.endswith(".py") else None)
    fields = {
        "language": language,
        "title": args.title,
        **{
            f: getattr(args, f)
            for f in ("timeout_ms", "memory_limit_bytes", "max_output_bytes", "session_id", "run_id")
        },
    }
    # Nobody answers an approval or a client tool here: a cell that needs its caller fails instead of parking.
    return {"code": code, "headless": True, **{k: v for k, v in fields.items() if v is not None}}


def _exec_on_server(args: argparse.Namespace, url: str, api_key: str | None) -> int:
    from .api.exec import parsed
    from .api.schemas import ExecRequest
    from .cli_client import run_cell
    from .errors import ServerRefused, ServerUnreachable

    body = _request(args)
    try:
        parsed(ExecRequest, body)  # the server's own bounds, checked before the request is sent
    except ServiceError as exc:
        print(jsoncodec.dumps_pretty(exc.body()))
        return 2
    try:
        envelope = run_cell(url, api_key, body)
    except ServerRefused as exc:
        print(jsoncodec.dumps_pretty(exc.answer))
        return 2
    except ServerUnreachable as exc:
        print(
            f"codemode: no server answers at {exc.message}; start one (codemode serve) or leave out --url",
            file=sys.stderr,
        )
        return STARTUP_FAILURE
    print(jsoncodec.dumps_pretty(envelope))
    return 0 if envelope.get("status") == "completed" else 1


async def _exec(settings: Settings, args: argparse.Namespace) -> int:
    from .api.exec import cell_spec, parsed
    from .api.schemas import ExecRequest
    from .assembly import build_components
    from .auth import LOCAL_KEY, LOCAL_TENANT
    from .cli_client import needs_another_leg

    try:
        # The same request model as HTTP and MCP: the same bounds, refused before any worker starts.
        body = parsed(ExecRequest, _request(args))
    except ServiceError as exc:
        print(jsoncodec.dumps_pretty(exc.body()))
        return 2
    try:
        svc = build_components(settings.replace(workers=1))  # one cell needs one warm worker, not a pool
        await svc.start()
    except ServiceError as exc:
        print(f"codemode: cannot start: {exc.message}", file=sys.stderr)
        return STARTUP_FAILURE
    try:
        envelope = await svc.cells.exec(await cell_spec(svc.cells, svc.tools, LOCAL_KEY, body))
        # A cell parked on host work gets the rest of its time budget from wait legs.
        while needs_another_leg(envelope):
            envelope = await svc.cells.wait(envelope["cell_id"], LOCAL_TENANT, timeout_ms=None, tool_results=[])
    except ServiceError as exc:
        print(jsoncodec.dumps_pretty(exc.body()))
        return 2
    finally:
        await svc.close()
    print(jsoncodec.dumps_pretty(envelope))
    _hint_missing_name(envelope, settings)
    return 0 if envelope["status"] == "completed" else 1


def _hint_missing_name(envelope: Mapping[str, object], settings: Settings) -> None:
    """Say where a name the private in-process service does not know may be: on a server, or in the demo."""
    missing = _NOT_DEFINED.match(str(envelope.get("error") or ""))
    if envelope.get("status") != "failed" or missing is None:
        return
    name = missing.group(1) or missing.group(2)
    demo = "" if settings.demo else ", or --demo for the demo's tools (quote_shipping, MCP.travel, ...)"
    print(
        f"codemode: {name} is not defined in this private in-process service, which has only the tools of "
        f"--config. If {name} is a tool of a running server, pass --url http://127.0.0.1:8000 (or set "
        f"CODEMODE_URL){demo}.",
        file=sys.stderr,
    )


if __name__ == "__main__":
    raise SystemExit(main())
