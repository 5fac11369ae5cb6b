"""Embedders behind a small protocol; `build_embedder` picks one from the settings."""

from service.providers.embedder import (
    Embedder,
    EmbedderConfig,
    EmbedderUnavailable,
    embedder_config_from_settings,
    second_embedder_config,
)
from service.providers.factory import build_embedder

__all__ = [
    "Embedder",
    "EmbedderConfig",
    "EmbedderUnavailable",
    "build_embedder",
    "embedder_config_from_settings",
    "second_embedder_config",
]
