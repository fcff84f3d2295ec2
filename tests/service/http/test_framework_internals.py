"""Framework hooks we extend: one test each, so an upgrade that moves one fails here, by name.

uvicorn's HTTP protocol class is subclassed for the connection hygiene (service/http/server.py), and
FastAPI's ``APIRoute.get_route_handler`` is overridden the documented way so routes read the body the
request gate decoded (``GatedRoute``).  Nothing of ours reads a private attribute of FastAPI, Starlette or
uvicorn (tests/test_layering.py).  pyproject.toml admits a range of each; raise a bound once this file
and the HTTP tests pass on the new release (the behaviour itself is tested in tests/service/http/test_gate.py).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import signal
import socket
import sys
import tomllib
from pathlib import Path

import pytest
import sse_starlette.sse
import uvicorn
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from starlette.requests import Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from service.http.request_gate import GatedRoute
from service.http.server import DrainingServer, GuardedHttpToolsProtocol, guarded_protocol
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
STDLIB = set(sys.stdlib_module_names) | {"builtins"}
GUARDED = guarded_protocol(Settings())  # one server's class: it binds that server's guard
OVERRIDES = GuardedHttpToolsProtocol  # the class that holds the overrides GUARDED inherits


def test_the_frameworks_we_extend_are_pinned_to_ranges_that_admit_what_is_installed():
    """fastapi, starlette and uvicorn are bounded from below and above in pyproject.toml, each range wider
    than one minor release, and the installed versions (the ones this file checks) are inside them."""
    requirements = [
        Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ]
    bounded = {r.name: r.specifier for r in requirements if r.name in ("fastapi", "starlette", "uvicorn")}
    assert set(bounded) == {"fastapi", "starlette", "uvicorn"}
    for name, specifier in bounded.items():
        assert any(s.operator in ("<", "<=", "~=", "==") for s in specifier), f"{name} has no upper bound"
        assert any(s.operator in (">", ">=", "~=", "==") for s in specifier), f"{name} has no lower bound"
        assert specifier.contains(importlib.metadata.version(name)), (name, str(specifier))
        assert len(_minors_admitted(specifier, importlib.metadata.version(name))) > 1, (
            f"{name} is pinned to one minor release: {specifier}"
        )


def _minors_admitted(specifier: SpecifierSet, installed: str) -> set[tuple[int, int]]:
    """The minor releases near ``installed`` (twenty either side, and the neighbouring majors) ``specifier`` admits."""
    major, minor = Version(installed).release[:2]
    near = [Version(f"{major}.{m}.0") for m in range(max(0, minor - 20), minor + 21)]
    near += [Version(f"{m}.0.0") for m in (major - 1, major + 1) if m >= 0] + [Version(installed)]
    return {(v.major, v.minor) for v in near if specifier.contains(v)}


def test_uvicorn_http_tools_protocol_has_the_hooks_the_guarded_protocol_overrides():
    """service/http/server.py subclasses uvicorn's HttpToolsProtocol: every method it overrides exists on
    the base with the same parameters, and uvicorn accepts the class as ``http=``."""
    overridden = [name for name, member in vars(OVERRIDES).items() if inspect.isfunction(member) and name[0] != "_"]
    assert {
        "connection_made",
        "connection_lost",
        "on_headers_complete",
        "on_response_complete",
        "pause_writing",
    } <= set(overridden)
    for name in overridden:
        base = getattr(HttpToolsProtocol, name, None)
        assert base is not None, f"uvicorn's HttpToolsProtocol no longer has {name}"
        ours = list(inspect.signature(getattr(OVERRIDES, name)).parameters)
        assert list(inspect.signature(base).parameters) == ours, name
    config = uvicorn.Config(app=_app, http=GUARDED, log_level="warning")
    config.load()
    assert config.http_protocol_class is GUARDED


def test_uvicorn_http_tools_protocol_keeps_connections_transport_and_loop_where_we_read_them():
    """A connected HttpToolsProtocol (a real socket pair) has ``connections`` (the server's shared set,
    which the connection cap counts), ``transport`` and ``loop``, and none of the private names our
    subclass adds is uvicorn's own (a clash would silently change either side)."""

    async def connect() -> tuple[HttpToolsProtocol, asyncio.Transport, ServerState]:
        config = uvicorn.Config(app=_app, http=HttpToolsProtocol, log_level="warning")
        config.load()
        state = ServerState()
        ours, theirs = socket.socketpair()
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_accepted_socket(lambda: HttpToolsProtocol(config, state, {}), ours)
        assert protocol.loop is loop
        transport.close()
        theirs.close()
        return protocol, transport, state

    protocol, transport, state = asyncio.run(connect())
    assert protocol.transport is transport
    assert protocol.connections is state.connections
    ours = {name for name in vars(OVERRIDES) if name.startswith("_") and not name.startswith("__")}
    assert ours, "the scan found none of the subclass's own names"
    theirs = set(dir(HttpToolsProtocol)) | set(vars(protocol))
    assert ours & theirs == set()


def test_uvicorn_server_has_the_signal_hook_and_state_the_draining_server_uses(monkeypatch: pytest.MonkeyPatch):
    """service/http/server.py's DrainingServer overrides ``Server.handle_exit(sig, frame)`` and ``serve(sockets)``
    and reads ``started`` and ``should_exit``: uvicorn's Server still has them, a signal handler still calls
    ``handle_exit``, and setting ``should_exit`` is still how it is told to stop.  (sse_starlette, which the
    MCP SDK imports, replaces ``Server.handle_exit`` with a ``(*args, **kwargs)`` wrapper that calls the
    original: so the signature is read from uvicorn's module source, not the class attribute.  Its wrapper
    also sets a process-wide flag that ends every event stream served afterwards in this process, the MCP
    facade's too: the flag is put back when the test ends.)"""
    monkeypatch.setattr(sse_starlette.sse.AppStatus, "should_exit", False)
    assert list(inspect.signature(DrainingServer.handle_exit).parameters) == ["self", "sig", "frame"]
    assert "def handle_exit(self, sig: int, frame: FrameType | None) -> None:" in inspect.getsource(uvicorn.server)
    ours = list(inspect.signature(DrainingServer.serve).parameters)
    assert list(inspect.signature(uvicorn.Server.serve).parameters) == ours
    server = uvicorn.Server(uvicorn.Config(app=_app, log_level="warning"))
    assert (server.started, server.should_exit) == (False, False)
    server.handle_exit(signal.SIGTERM, None)
    assert server.should_exit
    assert "self.handle_exit" in inspect.getsource(uvicorn.Server.capture_signals)


def test_fastapi_builds_each_route_handler_through_get_route_handler():
    """GatedRoute overrides APIRoute.get_route_handler: FastAPI still calls it to build the handler that
    answers a request on a route of that class."""
    calls = []

    class Counting(APIRoute):
        def get_route_handler(self):  # type: ignore[no-untyped-def]
            handler = super().get_route_handler()

            async def counted(request: Request):  # type: ignore[no-untyped-def]
                calls.append(request.url.path)
                return await handler(request)

            return counted

    app = FastAPI()
    app.router.route_class = Counting

    @app.get("/probe")
    def probe() -> dict[str, int]:
        return {"ok": 1}

    with TestClient(app) as client:
        assert client.get("/probe").json() == {"ok": 1}
    assert calls == ["/probe"]
    assert "get_route_handler" in vars(GatedRoute)


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("no request reaches this app")


def _our_classes() -> list[type]:
    import importlib
    import pkgutil

    import service

    found = []
    for info in pkgutil.walk_packages(service.__path__, "service."):
        if info.name.startswith("service.demo.travel"):
            continue  # a program of its own (it builds its MCP server at import)
        module = importlib.import_module(info.name)
        found += [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module.__name__]
    return found


def test_no_class_of_ours_overrides_a_private_name_of_another_distribution():
    """Subclasses of third-party classes (pydantic-settings sources, uvicorn's protocol, FastAPI's route,
    starlette's request, ...) define no ``_name`` their base already has: we extend through public hooks only."""
    clashes = []
    for cls in [*_our_classes(), GUARDED]:
        foreign = [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] not in STDLIB | {"service"}]
        for name in vars(cls):
            if name == "_abc_impl":  # set on every class by the standard library's ABCMeta, not by us
                continue
            if name.startswith("_") and not name.startswith("__") and any(name in vars(b) for b in foreign):
                clashes.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    assert clashes == []
    assert any(issubclass(c, APIRoute) for c in _our_classes()), "the scan found no framework subclass"
