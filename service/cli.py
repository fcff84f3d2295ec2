"""``codemode`` command line: ``serve`` the HTTP API, ``exec`` one cell and print its envelope, or serve
``mcp`` on stdin/stdout."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bridge import jsoncodec

from .errors import ServiceError

if TYPE_CHECKING:  # the settings module is imported once the command line is parsed
    from .settings import Settings

STARTUP_FAILURE = 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="codemode", description="Sandboxed JavaScript cells over HTTP.")
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
    ex = sub.add_parser("exec", help="run one cell and print its envelope (exit 0 only when completed)")
    ex.add_argument("file", help="JavaScript file, or - for stdin")
    ex.add_argument("--config", help="TOML config file (or CODEMODE_CONFIG)")
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

    overrides: dict[str, object] = {}
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


async def _exec(settings: Settings, args: argparse.Namespace) -> int:
    from .api.exec import cell_spec, parsed
    from .api.schemas import ExecRequest
    from .assembly import build_components
    from .auth import LOCAL_KEY, LOCAL_TENANT

    # read and closed: no unclosed-file warning
    code = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    fields = ("timeout_ms", "memory_limit_bytes", "max_output_bytes", "session_id", "run_id")
    try:
        # The same request model as HTTP and MCP: the same bounds, refused before any worker starts.
        body = parsed(ExecRequest, {"code": code, "headless": True, **{f: getattr(args, f) for f in fields}})
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
        while (
            envelope["status"] == "waiting"
            and envelope.get("reason") != "yield"
            and not any("input" in call for call in envelope.get("pending_tool_calls", []))
        ):
            envelope = await svc.cells.wait(envelope["cell_id"], LOCAL_TENANT, timeout_ms=None, tool_results=[])
    except ServiceError as exc:
        print(jsoncodec.dumps_pretty(exc.body()))
        return 2
    finally:
        await svc.close()
    print(jsoncodec.dumps_pretty(envelope))
    return 0 if envelope["status"] == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
