"""Settings refuse what cannot work: production with a guessable signing secret, owner
indexes no search would read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from service.config import DEV_DEFAULT_SECRET, Settings, settings_problems

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


def test_a_database_url_names_a_host_or_a_socket_directory() -> None:
    for url in (
        "postgresql://mneme_app:pw@db:5432/mneme",
        "postgres://mneme_app@db/mneme",
        "postgresql+asyncpg://mneme_app@/mneme?host=/run/mneme",
    ):
        assert Settings(_env_file=None, database_url=url).database_url is not None
    for url in ("db:5432/mneme", "mysql://app@db/mneme", "postgresql:///mneme"):
        with pytest.raises(ValidationError, match="database_url"):
            Settings(_env_file=None, database_url=url)


def test_an_empty_jwks_url_means_none() -> None:
    assert Settings(_env_file=None, jwks_url="").jwks_url is None
    with pytest.raises(ValidationError, match="jwks_url"):
        Settings(_env_file=None, jwks_url="file:///etc/jwks.json")


def test_secrets_are_not_printed() -> None:
    settings = Settings(_env_file=None, database_url="postgresql://app:pw-123@db/mneme")
    assert "pw-123" not in repr(settings)


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


SECRET_TEXT = "S3CRETPW"


@pytest.mark.parametrize(
    "value",
    [
        SECRET_TEXT,
        f"bogus://user:{SECRET_TEXT}@host:notaport/0",
        f"postgresql://app:{SECRET_TEXT}@db:notaport/mneme",
        f'["{SECRET_TEXT}"]',
        f'{{"{SECRET_TEXT}": "{SECRET_TEXT}"}}',
        f"10.0.0.0/8,{SECRET_TEXT}",
        f"{SECRET_TEXT}/minute",
    ],
)
def test_no_setting_repeats_the_value_it_refuses(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any setting may be given a password, by design (a URL) or by mistake (a line of an env
    file in the wrong variable): what is said about it never shows it."""
    for setting in Settings.model_fields:
        monkeypatch.setenv(f"MNEME_{setting.upper()}", value)
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    problems = settings_problems(refused.value)
    assert len(problems) > 20
    assert [problem for problem in problems if SECRET_TEXT in problem] == []


EMPTY_BY_DEFAULT: dict[str, Any] = {
    "jwt_algorithms": ["HS256"],
    "embedding_second": {"provider": "local"},
    "web_oidc_connect_origins": ["https://idp.example/"],
}
JSON_SETTINGS = [
    name
    for name, field in Settings.model_fields.items()
    if "list[" in str(field.annotation) or "dict[" in str(field.annotation)
]


@pytest.mark.parametrize("setting", JSON_SETTINGS)
def test_a_list_or_object_setting_is_read_from_json_and_bad_json_is_its_own_problem(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A value of the setting's own type (those empty by default: one of their own).
    value = Settings.model_fields[setting].default or EMPTY_BY_DEFAULT[setting]
    monkeypatch.setenv(f"MNEME_{setting.upper()}", json.dumps(value))
    assert Settings(_env_file=None).model_dump(mode="json")[setting] == value
    monkeypatch.setenv(f"MNEME_{setting.upper()}", "[1,")
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    assert settings_problems(refused.value) == [
        f"MNEME_{setting.upper()}: is not valid JSON (Expecting value at character 3)"
    ]


def test_the_accepted_algorithms_are_those_of_the_keys_configured_unless_listed() -> None:
    """Unset, MNEME_JWT_ALGORITHMS follows the keys: no algorithm is accepted that nothing
    could verify."""
    assert Settings(_env_file=None).accepted_jwt_algorithms == ["HS256"]
    jwks = "https://idp.example/jwks"
    assert Settings(_env_file=None, jwks_url=jwks).accepted_jwt_algorithms == [
        "HS256",
        "RS256",
        "ES256",
    ]
    jwks_only = Settings(_env_file=None, **PROD, jwt_hs256_secret="", jwks_url=jwks)
    assert jwks_only.accepted_jwt_algorithms == ["RS256", "ES256"]
    listed = Settings(_env_file=None, jwks_url=jwks, jwt_algorithms=["PS256"])
    assert listed.accepted_jwt_algorithms == ["PS256"]
