"""docs/configuration.md states each setting's default as the service has it: a reader who
tunes a threshold starts from the value the service actually runs with."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.config import Settings
from service.threads.summaries import compute_summary_window

CONFIGURATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

SETTING_ROW = re.compile(r"^\| `MNEME_([A-Z0-9_]+)` \| `([^`]*)` \|", re.MULTILINE)
"""A table row naming one setting whose default is a single literal (rows with a prose
default, such as "unset", or several settings in one row, state no single value)."""


def _documented_defaults() -> list[tuple[str, str]]:
    return SETTING_ROW.findall(CONFIGURATION_DOC.read_text(encoding="utf-8"))


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No `MNEME_` variable of this process's: the defaults are compared, not its settings."""
    for variable in [v for v in os.environ if v.startswith("MNEME_")]:
        monkeypatch.delenv(variable)
    return monkeypatch


def test_the_table_documents_many_settings_with_a_literal_default() -> None:
    # Guards the pattern below: if the table's layout changed, the comparison would check
    # nothing.
    assert len(_documented_defaults()) > 50


@pytest.mark.parametrize(("name", "documented"), _documented_defaults())
def test_a_documented_default_is_the_settings_default(
    name: str, documented: str, clean_environment: pytest.MonkeyPatch
) -> None:
    field = name.lower()
    assert field in Settings.model_fields, f"MNEME_{name} is documented but not a setting"
    if documented.startswith("MNEME_"):
        # A default that is another setting's value (the migration URL falls back to the
        # runtime one) is resolved where it is used, not in the model.
        assert documented.removeprefix("MNEME_").lower() in Settings.model_fields
        return
    default = getattr(Settings(_env_file=None), field)
    # The documented value, read as the service reads its environment.
    clean_environment.setenv(f"MNEME_{name}", documented)
    stated = getattr(Settings(_env_file=None), field)
    assert stated == default, f"docs/configuration.md says MNEME_{name} defaults to {documented}"


@dataclass(frozen=True)
class _Message:
    seq: int
    role: str


def test_the_summary_window_is_documented_in_the_unit_the_service_counts() -> None:
    # K counts complete human turns (a user message and what answers it), not messages: K
    # exchanges make one window of 2K messages, and K messages only half of one.
    [row] = [
        line
        for line in CONFIGURATION_DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `MNEME_THREAD_SUMMARY_KEEP_RECENT` |")
    ]
    assert "windows of K complete human turns" in row
    keep_recent = 4
    exchanges = [_Message(seq, ("user", "assistant")[seq % 2]) for seq in range(2 * keep_recent)]
    window = compute_summary_window(
        exchanges, humans_before=0, last_end=None, keep_recent=keep_recent
    )
    assert window is not None and (window.start_index, window.end_index) == (0, 2 * keep_recent)
    assert (
        compute_summary_window(
            exchanges[:keep_recent], humans_before=0, last_end=None, keep_recent=keep_recent
        )
        is None
    )
