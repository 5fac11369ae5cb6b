"""A hosted reranking service behind one method: a relevance score for each (query, document).

Reranking services share one de-facto API, `POST …/rerank` with a query and documents, in
three shapes (`RerankApi`):

- `cohere`: Cohere v2, Jina, vLLM and Infinity. `{model, query, documents, top_n}` →
  `{"results": [{"index", "relevance_score"}]}`.
- `voyage`: Voyage AI. `{model, query, documents, top_k}` → `{"data": [{"index",
  "relevance_score"}]}`.
- `tei`: Hugging Face text-embeddings-inference. `{query, texts, truncate}` →
  `[{"index", "score"}]`.

Every failure (unreachable, slower than the timeout, an error status, an answer that does not
score each document exactly once with a finite number) is a `RerankerUnavailable` with a short
reason; the caller keeps its own order.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx

if TYPE_CHECKING:
    # For the type checker only: the settings import the providers (they check the
    # embedding models with them).
    from service.config import Settings

RerankApi = Literal["cohere", "voyage", "tei"]
RerankFailure = Literal["timeout", "unreachable", "error_status", "bad_answer"]


class RerankerUnavailable(Exception):
    """The reranker gave no usable scores; `reason` labels the failure metric."""

    def __init__(self, reason: RerankFailure, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: RerankFailure = reason


class Reranker(Protocol):
    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher is better)."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class RerankerConfig:
    url: str
    api: RerankApi
    api_key: str | None
    model: str | None
    timeout_seconds: float


class HttpReranker:
    """Scores from a `/rerank` endpoint over one pooled HTTP client."""

    def __init__(self, config: RerankerConfig, client: httpx.AsyncClient | None = None) -> None:
        self._config = config
        headers = {"Accept": "application/json"}
        if config.api_key is not None:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = client or httpx.AsyncClient(headers=headers, timeout=config.timeout_seconds)

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher is better)."""
        config = self._config
        try:
            # httpx's timeout bounds each phase of the exchange; the whole call is bounded too.
            async with asyncio.timeout(config.timeout_seconds):
                response = await self._client.post(config.url, json=self._body(query, documents))
        except TimeoutError as error:
            raise RerankerUnavailable("timeout", "no answer in time") from error
        except httpx.TimeoutException as error:
            raise RerankerUnavailable("timeout", type(error).__name__) from error
        except httpx.HTTPError as error:
            raise RerankerUnavailable("unreachable", type(error).__name__) from error
        if response.status_code >= 400:
            raise RerankerUnavailable("error_status", f"status {response.status_code}")
        try:
            answer: object = response.json()
        except ValueError as error:
            raise RerankerUnavailable("bad_answer", "not JSON") from error
        return _scores_in_order(self._entries(answer), len(documents))

    async def aclose(self) -> None:
        await self._client.aclose()

    def _body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        config = self._config
        if config.api == "tei":
            return {"query": query, "texts": list(documents), "truncate": True}
        body: dict[str, Any] = {"query": query, "documents": list(documents)}
        body["top_k" if config.api == "voyage" else "top_n"] = len(documents)
        if config.model is not None:
            body["model"] = config.model
        return body

    def _entries(self, answer: object) -> list[tuple[object, object]]:
        """(index, score) pairs of the answer, as the API shapes them."""
        api = self._config.api
        if api == "tei":
            entries = answer
        elif isinstance(answer, dict):
            entries = answer.get("data" if api == "voyage" else "results")
        else:
            entries = None
        if not isinstance(entries, list):
            raise RerankerUnavailable("bad_answer", f"not a {api} rerank answer")
        score_key = "score" if api == "tei" else "relevance_score"
        pairs: list[tuple[object, object]] = []
        for entry in entries:
            if not isinstance(entry, dict):
                raise RerankerUnavailable("bad_answer", "an entry is not an object")
            pairs.append((entry.get("index"), entry.get(score_key)))
        return pairs


def _scores_in_order(pairs: list[tuple[object, object]], count: int) -> list[float]:
    scores: list[float | None] = [None] * count
    for index, score in pairs:
        if type(index) is not int or not 0 <= index < count or scores[index] is not None:
            raise RerankerUnavailable("bad_answer", "an index out of range or repeated")
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise RerankerUnavailable("bad_answer", "a score that is not a finite number")
        scores[index] = float(score)
    complete = [score for score in scores if score is not None]
    if len(complete) != count:
        raise RerankerUnavailable("bad_answer", "documents left unscored")
    return complete


def build_reranker(settings: Settings) -> HttpReranker | None:
    """The configured reranker, None when `MNEME_RERANK_URL` is unset."""
    if settings.rerank_url is None:
        return None
    return HttpReranker(
        RerankerConfig(
            url=str(settings.rerank_url),
            api=settings.rerank_api,
            api_key=None
            if settings.rerank_api_key is None
            else settings.rerank_api_key.get_secret_value(),
            model=settings.rerank_model,
            timeout_seconds=settings.rerank_timeout_seconds,
        )
    )
