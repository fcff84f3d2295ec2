"""The host functions a Python cell calls by name, and how the host requests they stand for are shaped.

``yield_control``, ``sleep``, ``store`` and ``load`` are guest-visible functions whose calls the engine
(``engine.py``) turns into host requests: each answers (method, arguments, how the reply reaches the
guest).  A reply's shape is kept by name in a dumped cell (``SHAPES``), so a cell resumed elsewhere
still hands its pending ``catalog.search`` back as handles and ``load`` back as the stored value.
"""

from __future__ import annotations

from collections.abc import Callable

from .host_requests import Shape
from .namespaces import Namespaces, handle, route

#: A host request a guest function stands for: (method, arguments, how its reply reaches the guest).
Request = tuple[str, list[object], Shape | None]


def _yield_control(reason: object = None) -> Request:
    return "yield", [None if reason is None else str(reason)], None


def _sleep(seconds: object) -> Request:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("sleep(seconds) needs a number of seconds")
    return "sleep", [max(int(seconds * 1000), 0)], None


def _store(key: object, value: object = None) -> Request:
    _check_key(key)
    if value is None:
        return "store.delete", [key], None
    return "store.set", [key, value], None


def _load(key: object) -> Request:
    _check_key(key)
    return "store.get", [key], _stored_value


def _stored_value(reply: object) -> object:
    return reply.get("value") if isinstance(reply, dict) else None


BUILTINS: dict[str, Callable[..., Request]] = {
    "yield_control": _yield_control,
    "sleep": _sleep,
    "store": _store,
    "load": _load,
}


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not 1 <= len(key) <= 256:
        raise TypeError("store key must be a string of 1-256 characters")


def routed(target: object, name: str, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[str, list[object]]:
    """The request method and arguments of a namespace object's method call; a TypeError if it has none."""
    found = route(target, name, args, kwargs)
    if found is None:
        raise TypeError(f"{name}() is not a method the host serves")
    return found


def as_handles(metas: object) -> object:
    """A ``catalog.search`` reply as the guest receives it: tool handles it can call."""
    return [handle(m) for m in metas] if isinstance(metas, list) else metas


#: The reply shapes a request may have, by the name a dump gives them.
SHAPES: dict[str, Shape] = {"handles": as_handles, "stored": _stored_value}
SHAPE_NAMES = {shape: name for name, shape in SHAPES.items()}


def request_for(
    ns: Namespaces, target: object, name: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> Request | list[object] | None:
    """The host request a call of ``name`` (a method of ``target``, or a function of the cell's namespaces
    ``ns`` when ``target`` is None) stands for, the value of a call answered here, or None (no such name)."""
    if target is not None:
        if getattr(target, "namespace", None) == "catalog" and name == "all":
            return list(ns.handles)
        method, request_args = routed(target, name, args, kwargs)
        return method, request_args, as_handles if method == "search" else None
    tool = ns.tools.get(name)
    if tool is not None:
        if args:
            raise TypeError(f"{name}() takes the tool's input as keyword arguments: {name}(field=value, ...)")
        return (*routed(tool, "call", (), kwargs), None)
    builtin = BUILTINS.get(name)
    return None if builtin is None else builtin(*args, **kwargs)
