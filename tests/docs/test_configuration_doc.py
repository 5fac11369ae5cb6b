"""docs/configuration.md states each setting's default as the service has it: a reader who
tunes a threshold starts from the value the service actually runs with."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from service.config import Settings

CONFIGURATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

SETTING_ROW = re.compile(r"^\| `MNEME_([A-Z0-9_]+)` \| `([^`]*)` \|", re.MULTILINE)
"""A table row naming one setting whose default is a single literal (rows with a prose
default, such as "unset", or several settings in one row, state no single value)."""


def _documented_defaults() -> list[tuple[str, str]]:
    return SETTING_ROW.findall(CONFIGURATION_DOC.read_text(encoding="utf-8"))


def _comparable(value: Any, documented: str) -> tuple[Any, Any]:
    """`value` and the documented default, each in a form the other compares with: the table
    writes JSON for lists and mappings, `true`/`false` for flags, the number or the text
    otherwise."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, list | dict):
        return value, json.loads(documented)
    if isinstance(value, bool):
        return value, documented == "true"
    if isinstance(value, int | float):
        return value, type(value)(documented)
    return str(value), documented


def test_the_table_documents_many_settings_with_a_literal_default() -> None:
    # Guards the pattern below: if the table's layout changed, the comparison would check
    # nothing.
    assert len(_documented_defaults()) > 50


@pytest.mark.parametrize(("name", "documented"), _documented_defaults())
def test_a_documented_default_is_the_settings_default(
    name: str, documented: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The defaults, not what this process's environment sets.
    for variable in [v for v in os.environ if v.startswith("MNEME_")]:
        monkeypatch.delenv(variable)
    field = name.lower()
    assert field in Settings.model_fields, f"MNEME_{name} is documented but not a setting"
    if documented.startswith("MNEME_"):
        # A default that is another setting's value (the migration URL falls back to the
        # runtime one) is resolved where it is used, not in the model.
        assert documented.removeprefix("MNEME_").lower() in Settings.model_fields
        return
    actual, stated = _comparable(getattr(Settings(_env_file=None), field), documented)
    assert actual == stated, f"docs/configuration.md says MNEME_{name} defaults to {documented}"
