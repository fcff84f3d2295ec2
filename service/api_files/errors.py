"""Exceptions of the api_files package; each has a stable snake_case ``code`` (none reaches a caller:
handlers answer ``invalid_input``, routes a 422 or 404, and a bad discriminator becomes a comment in the
tool's .d.ts or an ``invalid_contract`` ToolCallError).

ApiFileError                     api_file: a path is malformed or names no file
 └── InvalidDiscriminatorError   invalid_contract: a malformed output-discriminator annotation (also a ValueError)
"""

from __future__ import annotations

__all__ = ["ApiFileError", "InvalidDiscriminatorError"]


class ApiFileError(Exception):
    """Base of the package; raised itself when a path is malformed or names no file (the message is
    shown to guest code as is)."""

    code = "api_file"


class InvalidDiscriminatorError(ApiFileError, ValueError):
    """The annotation is present but malformed; the tool's contract must be refused."""

    code = "invalid_contract"
