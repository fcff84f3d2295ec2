"""The settings reference's configuration file stays true: it loads as written."""

from __future__ import annotations

from service.settings_load import load_settings
from tests.docs.pages import DOCS

SETTINGS_PAGE = DOCS / "reference" / "settings.md"


def test_settings_page_config_example_loads(tmp_path):
    """The TOML example of the settings reference is accepted by the settings loader as written."""
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    start = text.index("```toml\n[limits]") + len("```toml\n")
    config = tmp_path / "codemode.toml"
    config.write_text(text[start : text.index("```", start)], encoding="utf-8")
    settings = load_settings(environ={}, config_path=str(config))
    assert [k.tenant for k in settings.api_keys] == ["acme"]
    assert settings.tools.plugins == ("service.demo.shipping",)
    assert [s.name for s in settings.mcp_servers] == ["everything", "docs"]
    assert settings.max_snapshot_bytes == 10485760
