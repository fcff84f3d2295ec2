"""Exceptions of the virtual API file table."""

from __future__ import annotations

__all__ = ["ApiFileError"]


class ApiFileError(Exception):
    """A path is malformed or names no file; the message is shown to guest code as is."""

    code = "api_file"
