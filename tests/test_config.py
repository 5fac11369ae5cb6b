"""Settings refuse what cannot work: production with a guessable signing secret, owner
indexes no search would read."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from service.config import DEV_DEFAULT_SECRET, Settings

PROD: dict[str, Any] = {"env": "prod", "database_url": "postgresql://mneme_app@db/mneme"}


def test_dev_mode_accepts_the_documented_default_secret() -> None:
    settings = Settings(_env_file=None)
    assert settings.jwt_hs256_secret is not None
    assert settings.jwt_hs256_secret.get_secret_value() == DEV_DEFAULT_SECRET


@pytest.mark.parametrize("secret", [DEV_DEFAULT_SECRET, "short-secret"])
def test_prod_mode_refuses_default_or_weak_secrets(secret: str) -> None:
    with pytest.raises(ValidationError, match="MNEME_JWT_HS256_SECRET"):
        Settings(_env_file=None, **PROD, jwt_hs256_secret=secret)


def test_prod_mode_refuses_to_run_without_any_token_verification() -> None:
    with pytest.raises(ValidationError, match="MNEME_JWKS_URL"):
        Settings(_env_file=None, **PROD, jwt_hs256_secret="")


def test_prod_mode_accepts_a_strong_secret_or_a_jwks_url() -> None:
    assert Settings(_env_file=None, **PROD, jwt_hs256_secret="x" * 40).env == "prod"
    jwks_only = Settings(
        _env_file=None, **PROD, jwt_hs256_secret="", jwks_url="https://idp.example/jwks"
    )
    assert jwks_only.jwt_hs256_secret is None


def test_settings_come_from_mneme_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEME_TENANT_CLAIM", "tid")
    monkeypatch.setenv("MNEME_DATABASE_URL", "postgresql://app@db/mneme")
    settings = Settings(_env_file=None)
    assert settings.tenant_claim == "tid"
    assert not settings.uses_embedded_database


def test_secrets_are_not_printed() -> None:
    settings = Settings(_env_file=None, database_url="postgresql://app:pw-123@db/mneme")
    assert "pw-123" not in repr(settings)


def test_prod_mode_refuses_the_embedded_database() -> None:
    with pytest.raises(ValidationError, match="MNEME_DATABASE_URL"):
        Settings(_env_file=None, env="prod", jwt_hs256_secret="x" * 40)


@pytest.mark.parametrize(
    "setting",
    [
        "search_linear_lexical_weight",
        "search_recency_weight",
        "search_confidence_weight",
        "search_neighbour_weight",
        "search_thread_weight",
        "search_speaker_weight",
        "search_date_weight",
    ],
)
@pytest.mark.parametrize("weight", [1e-300, 5e-324, float("inf"), float("nan")])
def test_a_search_weight_that_would_underflow_the_ranking_is_refused_at_startup(
    setting: str, weight: float
) -> None:
    refused: dict[str, Any] = {setting: weight}
    accepted: dict[str, Any] = {setting: 1e-6}
    with pytest.raises(ValidationError, match=setting):
        Settings(_env_file=None, **refused)
    assert getattr(Settings(_env_file=None, **accepted), setting) == 1e-6


def test_owner_indexes_start_no_lower_than_bounded_search() -> None:
    """An owner's index is found through the statistics only a bounded search reads: a lower
    threshold would build indexes no search reads."""
    with pytest.raises(ValidationError, match="MNEME_OWNER_VECTOR_INDEX_FROM"):
        Settings(_env_file=None, search_bounded_from=5_000, owner_vector_index_from=1_000)
    assert Settings(_env_file=None, owner_vector_index_from=0).owner_vector_index_from == 0
    assert Settings(_env_file=None, search_bounded_from=800, owner_vector_index_from=800)


def test_the_postings_scanned_reach_at_least_the_postings_read() -> None:
    """The top postings of a lexeme are the first of those scanned for memories naming two of
    the question's words: a shorter scan would read fewer postings than the setting says."""
    with pytest.raises(ValidationError, match="MNEME_SEARCH_POSTINGS_SCANNED"):
        Settings(_env_file=None, search_postings_per_lexeme=2_000, search_postings_scanned=1_000)
    assert Settings(_env_file=None, search_postings_scanned=1_000).search_postings_scanned == 1_000
