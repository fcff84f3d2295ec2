"""The quick-start promise through the in-process client: text + return value."""

from tests.conftest import run


def test_text_and_return_value(client):
    """`text("hi"); return 1+1` completes with value 2 and one text entry."""
    env = run(client, 'text("hi"); return 1+1')
    assert env["status"] == "completed"
    assert env["value"] == 2
    assert env["output"] == [{"type": "text", "text": "hi"}]
