"""The README's examples stay true: its config file loads as written."""

from __future__ import annotations

from pathlib import Path

from service.settings import load_settings

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_example_loads(tmp_path):
    """The TOML example under Configuration is accepted by the settings loader as written."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```toml\n[limits]") + len("```toml\n")
    config = tmp_path / "codemode.toml"
    config.write_text(text[start : text.index("```", start)], encoding="utf-8")
    settings = load_settings(environ={}, config_path=str(config))
    assert [k.tenant for k in settings.api_keys] == ["acme"]
    assert settings.tools.plugins == ("examples.plugins.shipping",)
    assert [s.name for s in settings.mcp_servers] == ["everything", "docs"]
    assert settings.max_snapshot_bytes == 10485760
