"""Approval rules: entries match like tool-policy entries, only add up, and name where they came from."""

from __future__ import annotations

import pytest

from service.tools.approvals import KEY, REQUEST, SERVER, ApprovalRules, unknown_entry
from service.tools.errors import ToolConfigError
from service.tools.policy import PolicySubject, ToolPolicy

SEND = PolicySubject("send_mail", "mailer.send_mail", "mailer", "plugin")
READ = PolicySubject("read_mail", "mailer.read_mail", "mailer", "plugin")
CORE = PolicySubject("echo", "codemode.echo", None, "core")


@pytest.mark.parametrize(
    ("entry", "subjects"),
    [
        ("send_mail", {SEND}),
        ("mailer.send_mail", {SEND}),
        ("mailer", {SEND, READ}),
        ("group:plugins", {SEND, READ}),
        ("group:core", {CORE}),
        ("mcp:docs", set()),
    ],
)
def test_native_entries_match_like_policy_entries(entry, subjects):
    rules = ApprovalRules().adding(SERVER, [entry])
    assert {s for s in (SEND, READ, CORE) if rules.native(s) is not None} == subjects


def test_reason_names_the_first_source_that_asks():
    rules = ApprovalRules().adding(SERVER, ["read_mail"]).adding(KEY, ["send_mail"]).adding(REQUEST, ["mailer"])
    assert rules.native(SEND) == "send_mail needs approval: this API key's tools.approve lists 'send_mail'"
    assert rules.native(READ) == "read_mail needs approval: the server's [tools] approve lists 'read_mail'"


@pytest.mark.parametrize(
    ("entry", "tools", "asks"),
    [
        ("mcp:*", ("t", "T"), True),
        ("mcp:docs", ("t", "T"), True),
        ("mcp:Docs Server", ("t", "T"), True),  # the configured name
        ("mcp:docs/T", ("t", "T"), True),  # the server's own tool name
        ("mcp:docs/other", ("t", "T"), False),
        ("mcp:web", ("t", "T"), False),
        ("mcp:docs/other", None, True),  # the tool's names are not known yet: ask rather than run unasked
        ("send_mail", ("t", "T"), False),
    ],
)
def test_mcp_entries_match_every_spelling(entry, tools, asks):
    rules = ApprovalRules().adding(SERVER, [entry])
    assert (rules.mcp(("docs", "Docs Server"), tools, "MCP.docs.t") is not None) is asks


def test_empty_groups_add_nothing():
    rules = ApprovalRules().adding(KEY, ())
    assert rules.groups == () and rules.native(SEND) is None


def test_unknown_entries_are_named_with_their_index():
    assert unknown_entry(["send_mail", "sned_mail"], "tools.approve", [SEND], []).startswith(
        "tools.approve[1]: 'sned_mail' names no tool"
    )
    assert "names no MCP server here; servers: docs" in unknown_entry(["mcp:web/x"], "w", [], ["docs"])
    assert unknown_entry(["group:core", "mcp:*", "mailer", "mcp:docs/x"], "w", [SEND], ["docs"]) is None


def test_key_policy_carries_approve_and_checks_it():
    policy = ToolPolicy.from_config({"approve": ["send_mail"]}, where="api_keys.tools")
    assert policy.approve == ("send_mail",) and policy.allow is None and policy.profile is None and not policy.deny
    with pytest.raises(ToolConfigError, match=r"api_keys.tools.approve\[0\]"):
        ToolPolicy.from_config({"approve": [""]}, where="api_keys.tools")
