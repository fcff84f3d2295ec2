"""examples/client_quickstart.py (the Python client guide's examples, docs/guide/python-client.md) works against a real server."""

from __future__ import annotations

import pytest
from codemode_client import Client

from examples import client_quickstart

pytestmark = pytest.mark.slow


def test_quote_order_runs_the_client_tool_and_the_approved_call(client: Client, capsys):
    """run() answers lookup_order and the approval; the value carries the quote's price."""
    value = client_quickstart.quote_order(client)
    assert value["order"] == "A-17" and value["currency"] == "USD" and value["price"] > 0
    assert "quoted A-17" in capsys.readouterr().out


def test_watch_cell_follows_the_stream_and_answers_the_approval(client: Client, capsys):
    """The events loop prints both outputs, answers the approval and returns the envelope's value."""
    value = client_quickstart.watch_cell(client)
    out = capsys.readouterr().out
    assert isinstance(value, (int, float)) and value > 0
    assert out.index("output: fetching") < out.index("output: pricing") < out.index("completed")
