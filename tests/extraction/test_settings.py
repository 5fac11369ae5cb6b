"""The write path's settings refuse combinations that cannot work."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from service.config import Settings


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def test_the_defaults_follow_the_seeds() -> None:
    defaults = settings()
    assert (
        defaults.extraction_strategy,
        defaults.extraction_interval_turns,
        defaults.extraction_max_facts_per_turn,
        defaults.extraction_fact_confidence_threshold,
        defaults.extraction_quarantine_confidence,
    ) == ("interval", 5, 3, 0.7, 0.82)
    assert defaults.extraction_category_modes["preference"] == "replace"
    assert set(defaults.extraction_org_categories) <= set(defaults.extraction_category_modes)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"extraction_fact_confidence_threshold": 0.9, "extraction_quarantine_confidence": 0.8},
            "QUARANTINE",
        ),
        ({"extraction_org_categories": ["gossip"]}, "ORG_CATEGORIES"),
        ({"extraction_category_modes": {"turn": "accumulate"}}, "CATEGORY_MODES"),
        ({"extraction_category_modes": {"Bad Name": "replace"}}, "CATEGORY_MODES"),
        ({"extraction_category_modes": {}, "extraction_org_categories": []}, "CATEGORY_MODES"),
        ({"extraction_category_modes": {"x": "overwrite"}}, "extraction_category_modes"),
        ({"extraction_strategy": "sometimes"}, "extraction_strategy"),
    ],
)
def test_inconsistent_extraction_settings_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        settings(**values)


def test_lists_and_modes_come_from_json_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MNEME_EXTRACTION_FAREWELL_PHRASES", '["ciao", "tschüss"]')
    monkeypatch.setenv(
        "MNEME_EXTRACTION_CATEGORY_MODES", '{"fact": "accumulate", "taste": "replace"}'
    )
    monkeypatch.setenv("MNEME_EXTRACTION_ORG_CATEGORIES", '["fact"]')
    loaded = settings()
    assert loaded.extraction_farewell_phrases == ["ciao", "tschüss"]
    assert loaded.extraction_category_modes == {"fact": "accumulate", "taste": "replace"}
