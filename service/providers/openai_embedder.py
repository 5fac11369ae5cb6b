"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint.

Retries with exponential backoff are the openai client's own (connection errors, timeouts,
408/409/429 and 5xx, honouring Retry-After); whatever is left after them becomes
`EmbedderUnavailable`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from openai import AsyncOpenAI, OpenAIError, omit

from service.providers.embedder import EmbedderConfig, EmbedderUnavailable, shortened


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible HTTP API, `batch_size` texts per request.

    The model's profile applies as for a local model: its prompts go before each text, and a
    Matryoshka model's longer vector is cut to the column's size here when the server ignores
    `dimensions` (or is not asked to send it)."""

    def __init__(self, config: EmbedderConfig) -> None:
        api_key = config.require_api_key()
        self._model = config.openai_model
        self._profile = config.resolved_profile()
        self.dims = self._profile.stored_dims(config.dims)
        self.model_name = self._profile.space_name(config.dims)
        self.lexical_weight = self._profile.lexical_weight
        self._send_dimensions = config.openai_send_dimensions
        self._send_input_type = config.openai_send_input_type
        self._batch_size = config.openai_batch_size
        self._client = AsyncOpenAI(
            api_key=api_key.get_secret_value(),
            base_url=config.openai_base_url,
            timeout=config.openai_timeout_seconds,
            max_retries=config.openai_max_retries,
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        prompt = self._profile.document_prompt
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [prompt + text for text in texts[start : start + self._batch_size]]
            vectors.extend(await self._embed_batch(batch, "document"))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        (vector,) = await self._embed_batch([self._profile.query_prompt + text], "query")
        return vector

    async def aclose(self) -> None:
        await self._client.close()

    async def _embed_batch(self, texts: Sequence[str], input_type: str) -> list[list[float]]:
        try:
            response = await self._client.embeddings.create(
                # OpenAI refuses empty strings; a space embeds the same absence of content.
                input=[text or " " for text in texts],
                model=self._model,
                dimensions=self.dims if self._send_dimensions else omit,
                # The client would ask for base64, which not every compatible server speaks.
                encoding_format="float",
                extra_body={"input_type": input_type} if self._send_input_type else None,
            )
        except OpenAIError as exc:
            raise EmbedderUnavailable(
                f"{self.model_name} embeddings request failed: {exc}"
            ) from exc

        items = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(len(texts))):
            raise EmbedderUnavailable(
                f"{self.model_name} returned {len(items)} embeddings for {len(texts)} inputs"
            )
        return [self._unit_vector(item.embedding) for item in items]

    def _unit_vector(self, vector: list[float]) -> list[float]:
        if self._profile.matryoshka and len(vector) > self.dims:
            vector = shortened(vector, self.dims)
        if len(vector) != self.dims:
            raise EmbedderUnavailable(
                f"{self.model_name} returned {len(vector)}-dimensional vectors but {self.dims} "
                "are configured; configure the model's size or send dimensions"
            )
        # OpenAI's vectors are unit length already; other compatible servers' need not be.
        norm = math.hypot(*vector)
        if norm == 0 or not math.isfinite(norm):
            raise EmbedderUnavailable(f"{self.model_name} returned a degenerate vector")
        return [value / norm for value in vector]
