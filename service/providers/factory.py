"""Which embedder the settings ask for.

Apart from the embedding contract (`embedder.py`), which the embedders themselves import: the
contract knows no implementation, so the providers import each other in one direction only.
"""

from __future__ import annotations

from dataclasses import replace

from service.providers.embedder import Embedder, EmbedderConfig
from service.providers.profiles import PACKAGED_PROFILES


def build_embedder(config: EmbedderConfig) -> Embedder:
    """The embedder `config.provider` names; raises ValueError for a config it cannot serve."""
    # Imported here so a deployment that embeds through an API never loads onnxruntime.
    if config.provider == "openai":
        from service.providers.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(config)
    from service.providers.local_embedder import LocalEmbedder

    return LocalEmbedder(config)


def build_packaged_embedder(model_name: str, config: EmbedderConfig) -> Embedder | None:
    """The packaged model whose vectors are named `model_name` (None: none is), run with
    `config`'s local settings: a vector column that holds its vectors is served by it whatever
    model the settings name, until the column changes models (`mneme reembed`)."""
    profile = next((known for known in PACKAGED_PROFILES if known.name == model_name), None)
    if profile is None:
        return None
    from service.providers.local_embedder import LocalEmbedder

    return LocalEmbedder(
        replace(
            EmbedderConfig(),
            dims=profile.dims,
            profile=profile.name,
            local_threads=config.local_threads,
            local_query_batch=config.local_query_batch,
        )
    )
