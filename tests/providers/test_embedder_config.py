"""Building an embedder config from the settings, and refusing nonsense configs (at start-up,
in one line)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from service.providers import EmbedderConfig, embedder_config_from_settings
from tests.conftest import make_settings
from tests.fixtures.model_files import operator_model_file
from tests.test_refused_start import start_messages


def test_settings_fields_named_embedding_something_fill_the_config() -> None:
    settings = SimpleNamespace(
        embedding_provider="openai",
        embedding_dims=1536,
        embedding_openai_api_key=SecretStr("sk-test"),
        embedding_openai_model="text-embedding-3-large",
        embedding_openai_batch_size=64,
        unrelated_setting=True,
    )
    config = embedder_config_from_settings(settings)

    assert config == EmbedderConfig(
        provider="openai",
        dims=1536,
        openai_api_key=SecretStr("sk-test"),
        openai_model="text-embedding-3-large",
        openai_batch_size=64,
    )


def test_settings_without_embedding_fields_give_the_default_config() -> None:
    assert embedder_config_from_settings(SimpleNamespace()) == EmbedderConfig()


def test_the_real_settings_embedding_dims_reach_the_config() -> None:
    config = embedder_config_from_settings(
        Settings(_env_file=None, embedding_dims=768, embedding_profile="all-mpnet-base-v2")
    )
    assert config.dims == 768


def test_the_api_key_is_not_shown_in_the_config_repr() -> None:
    assert "sk-secret" not in repr(EmbedderConfig(openai_api_key=SecretStr("sk-secret")))


@pytest.mark.parametrize(
    "invalid",
    [
        {"provider": "word2vec"},
        {"dims": 0},
        {"local_threads": 0},
        {"local_query_batch": 0},
        {"openai_batch_size": 0},
        {"openai_timeout_seconds": 0},
        {"openai_max_retries": -1},
    ],
)
def test_nonsense_configs_are_refused(invalid: dict[str, object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies by field
        EmbedderConfig(**invalid)  # type: ignore[arg-type]


async def test_embedding_settings_no_model_can_serve_stop_the_start_with_one_line(
    cluster: EmbeddedCluster,
) -> None:
    # The packaged model's 384 values cannot fill a column of 768: the settings refuse it
    # (tests/test_cli.py), and so does a start given such settings all the same.
    unusable = make_settings(cluster).model_copy(update={"embedding_dims": 768})
    sent = await start_messages(create_app(unusable))
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": "mneme cannot start: all-MiniLM-L6-v2-onnx-int8-dynamic makes "
            "384-dimensional vectors and cannot be shortened to the column's 768; set the "
            "embedding dims to 384 or pick another model",
        }
    ]


# The tests' database (`settings`), already migrated.
@pytest.mark.usefixtures("settings")
@pytest.mark.parametrize("second", [False, True])
async def test_a_model_file_that_is_not_the_one_its_sha256_pins_stops_the_start_with_one_line(
    cluster: EmbeddedCluster, tmp_path: Path, second: bool
) -> None:
    """Checked as the model loads (not by the settings: a model of gigabytes is not read for
    every command), and said as the setting at fault, not as a traceback."""
    model, sha256 = operator_model_file(tmp_path)
    pinned = {"local_model_path": model, "local_model_sha256": "0" * 64}
    configured = (
        make_settings(cluster, migrate_on_start=False, embedding_second=pinned)
        if second
        else make_settings(
            cluster,
            migrate_on_start=False,
            **{f"embedding_{field}": value for field, value in pinned.items()},
        )
    )
    setting = (
        "MNEME_EMBEDDING_SECOND: local_model_sha256"
        if second
        else "MNEME_EMBEDDING_LOCAL_MODEL_SHA256"
    )
    assert await start_messages(create_app(configured)) == [
        {
            "type": "lifespan.startup.failed",
            "message": f"mneme cannot start: {setting}: the embedding model {model} has sha256 "
            f"{sha256}, not the configured {'0' * 64}; vectors of another model would not "
            "compare with those stored",
        }
    ]
