"""Which embedder the settings ask for.

Apart from the embedding contract (`embedder.py`), which the embedders themselves import: the
contract knows no implementation, so the providers import each other in one direction only.
"""

from __future__ import annotations

from service.providers.embedder import Embedder, EmbedderConfig


def build_embedder(config: EmbedderConfig) -> Embedder:
    """The embedder `config.provider` names; raises ValueError for a config it cannot serve."""
    # Imported here so a deployment that embeds through an API never loads onnxruntime.
    if config.provider == "openai":
        from service.providers.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(config)
    from service.providers.local_embedder import LocalEmbedder

    return LocalEmbedder(config)
