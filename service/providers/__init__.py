"""Embedders behind a small protocol; `build_embedder` picks one from the settings."""

from service.providers.embedder import (
    Embedder,
    EmbedderConfig,
    EmbedderUnavailable,
    FormerlyNamed,
    ModelFileUnusable,
    computes_in_process,
    embedder_config_from_settings,
    former_model_names,
    lexical_weight_of,
    load_configured_model,
    load_model,
    named,
    second_embedder_config,
)
from service.providers.factory import build_embedder, build_packaged_embedder
from service.providers.profiles import EmbeddingSettingsRefused

__all__ = [
    "Embedder",
    "EmbedderConfig",
    "EmbedderUnavailable",
    "EmbeddingSettingsRefused",
    "FormerlyNamed",
    "ModelFileUnusable",
    "build_embedder",
    "build_packaged_embedder",
    "computes_in_process",
    "embedder_config_from_settings",
    "former_model_names",
    "lexical_weight_of",
    "load_configured_model",
    "load_model",
    "named",
    "second_embedder_config",
]
