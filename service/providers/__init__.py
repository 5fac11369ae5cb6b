"""Embedders behind a small protocol; `build_embedder` picks one from the settings."""

from service.providers.embedder import (
    Embedder,
    EmbedderConfig,
    EmbedderUnavailable,
    build_embedder,
    embedder_config_from_settings,
)

__all__ = [
    "Embedder",
    "EmbedderConfig",
    "EmbedderUnavailable",
    "build_embedder",
    "embedder_config_from_settings",
]
