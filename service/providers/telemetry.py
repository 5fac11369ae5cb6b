"""Telemetry around an embedder: a span per call, latency and batch-size metrics, and one log
line per failed call (its error classes and URL; the traceback only at debug level)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from opentelemetry import trace

from service.observability import DOMAIN_METRICS, describe_failure, tracer
from service.providers.embedder import (
    Embedder,
    EmbedderUnavailable,
    computes_in_process,
    former_model_names,
    lexical_weight_of,
    load_model,
)

logger = logging.getLogger("mneme.embedder")

T = TypeVar("T")


class InstrumentedEmbedder:
    """Wraps any `Embedder`; behaves exactly like it, and is observed."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.model_name = inner.model_name
        self.dims = inner.dims
        self.computes_in_process = computes_in_process(inner)
        self.lexical_weight = lexical_weight_of(inner)
        self.former_model_names = former_model_names(inner)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._observe("document", len(texts), lambda: self._inner.embed(texts))

    async def embed_query(self, text: str) -> list[float]:
        return await self._observe("query", 1, lambda: self._inner.embed_query(text))

    async def load(self) -> None:
        await load_model(self._inner)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def _observe(self, purpose: str, batch: int, call: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        with tracer.start_as_current_span(
            f"embeddings {self.model_name}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "embeddings",
                "gen_ai.request.model": self.model_name,
                "gen_ai.embeddings.dimension.count": self.dims,
                "mneme.embedding.purpose": purpose,
                "mneme.embedding.batch_size": batch,
            },
        ) as span:
            try:
                return await call()
            except EmbedderUnavailable as exc:
                error, url = describe_failure(exc)
                error_type = type(exc.__cause__ or exc).__name__
                span.set_attribute("error.type", error_type)
                span.set_status(trace.StatusCode.ERROR)
                DOMAIN_METRICS.embedding_failures.labels(self.model_name, error_type).inc()
                logger.warning(
                    "embedding %d text(s) with %s failed: %s%s",
                    batch,
                    self.model_name,
                    error,
                    f" calling {url}" if url else "",
                    exc_info=exc if logger.isEnabledFor(logging.DEBUG) else None,
                )
                raise
            finally:
                elapsed = time.perf_counter() - started
                DOMAIN_METRICS.embedding_latency.labels(purpose, self.model_name).observe(elapsed)
                DOMAIN_METRICS.embedding_batch.labels(purpose).observe(batch)
