"""The generated parts of the reference pages (settings, error codes, HTTP operations) are current."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.docs.pages import ROOT


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


@pytest.mark.parametrize("page", sorted(GENERATOR.PAGES))
def test_generated_part_is_current(page: str) -> None:
    """The page's generated tables equal what scripts/docs_reference.py makes from the code now."""
    text = (ROOT / page).read_text(encoding="utf-8")
    assert GENERATOR.render(page, text) == text, f"{page} is stale: run python scripts/docs_reference.py"


def test_settings_table_lists_every_setting() -> None:
    """Each field of Settings has its row, with its environment variable when it has one."""
    from service.settings import Settings
    from service.settings_load import ENV_NAMES, TOML_PATHS

    rows = [line.split(" | ")[0].removeprefix("| ") for line in GENERATOR.settings_table().splitlines()[2:]]
    named = {part.strip("`") for row in rows for part in row.split("<br>")}
    assert len(rows) == len(TOML_PATHS) == len(Settings.model_fields)
    assert {".".join(path) for path in TOML_PATHS} <= named
    assert set(ENV_NAMES) <= named


def test_service_errors_table_has_every_code() -> None:
    """Each exception of service/errors.py appears with its code and status."""
    from service import errors

    table = GENERATOR.service_errors_table()
    for cls in vars(errors).values():
        if isinstance(cls, type) and issubclass(cls, errors.ServiceError):
            assert f"| `{cls.__name__}` | `{cls.code}` |" in table, cls
