"""What the memories domain records about itself: its metrics (a search's stages, candidates,
hits and reranker failures; a change of embedding model's progress), and a search's spans: a
span and a timing per stage, the fusion statement's span, and every returned hit's component
scores as span events."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence

from opentelemetry.trace import Span
from prometheus_client import Counter, Gauge, Histogram

from service.memories.schemas import SearchHit
from service.observability import (
    COUNT_BUCKETS,
    DOMAIN_METRICS,
    LATENCY_BUCKETS,
    SHARED_BETWEEN_WORKERS,
    tracer,
)

SEARCH_STAGE_METRIC = "mneme_search_stage_duration_seconds"
"""The histogram of a search's stages, by stage and mode."""

STATEMENT_STAGE = "fusion_query"
"""The stage that times the fusion statement (`fusion_statement`)."""


class MemoryMetrics:
    """The memories domain's instruments, on the process-wide registry `/metrics` renders
    (`DOMAIN_METRICS.registry`)."""

    def __init__(self) -> None:
        r = DOMAIN_METRICS.registry
        self.search_stage_latency = Histogram(
            SEARCH_STAGE_METRIC,
            "Search stages (fusion_query, mmr, rerank) by search mode.",
            ["stage", "mode"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.search_candidates = Histogram(
            "mneme_search_candidates",
            "Fused candidates the search statement returned, by mode.",
            ["mode"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.rerank_failures = Counter(
            "mneme_rerank_failures_total",
            "Searches whose reranker gave no usable scores (they kept the fused order), by "
            "reason (timeout, unreachable, error_status, bad_answer).",
            ["reason"],
            registry=r,
        )
        self.search_hits = Histogram(
            "mneme_search_hits",
            "Hits a search returned, by mode.",
            ["mode"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        # Published by every service process from the state `mneme reembed run` records: the
        # database's, the same whichever worker reads it (with several, the value read last).
        self.reembed_memories = Gauge(
            "mneme_reembed_memories",
            "Memories of the vector column being filled for a new embedding model, by model "
            "and state (total: to embed when the pass began, embedded: done since).",
            ["model", "state"],
            registry=r,
            multiprocess_mode="mostrecent",
        )
        self.reembed_tenants_switched = Gauge(
            "mneme_reembed_tenants_switched",
            "Tenants whose searches already read the new embedding model's column, by model.",
            ["model"],
            registry=r,
            multiprocess_mode="mostrecent",
        )
        self._reembed_model: str | None = None
        """The model whose progress this process published last (None: none, or withdrawn)."""

    def publish_reembed_progress(
        self, model: str, embedded: int, total: int, tenants_switched: int
    ) -> None:
        """A change of embedding model's progress: the new column's memories embedded of
        `total`, and its tenants switched."""
        self.reembed_memories.labels(model=model, state="embedded").set(embedded)
        self.reembed_memories.labels(model=model, state="total").set(total)
        self.reembed_tenants_switched.labels(model=model).set(tenants_switched)
        self._reembed_model = model

    def withdraw_reembed_progress(self) -> None:
        """No column is being filled: the progress this process published goes (nothing, when
        it published none).

        Under `mneme serve --workers N` the workers' metrics live in shared files, from which
        prometheus_client cannot remove a series (it warns, and keeps it): there the last
        model's series are set to zero, a total of zero being no change in progress (the
        dashboard's panel divides by a total above zero)."""
        model = self._reembed_model
        if model is None:
            return
        if SHARED_BETWEEN_WORKERS:
            self.publish_reembed_progress(model, 0, 0, 0)
        else:
            self.reembed_memories.clear()
            self.reembed_tenants_switched.clear()
        self._reembed_model = None


MEMORY_METRICS = MemoryMetrics()


def record_search_hits(span: Span, hits: Sequence[SearchHit], *, mode: str) -> None:
    """One `mneme.search.hit` event per returned hit with every component score, in rank order.

    Absent components (no lexical match, no vector, no MMR pass) are left out of the event
    rather than written as zeros, so a reader can tell "not a candidate" from "scored 0".
    """
    MEMORY_METRICS.search_hits.labels(mode).observe(len(hits))
    if not span.is_recording():
        return
    span.set_attribute("mneme.search.mode", mode)
    span.set_attribute("mneme.search.hits", len(hits))
    for position, hit in enumerate(hits, start=1):
        scores = hit.scores
        optional = {
            "mneme.score.lexical_rank": scores.lexical_rank,
            "mneme.score.lexical": scores.lexical_score,
            "mneme.score.vector_rank": scores.vector_rank,
            "mneme.score.vector_cosine": scores.vector_cosine,
            "mneme.score.mmr": scores.mmr_score,
            "mneme.score.neighbour": scores.neighbour_score,
            "mneme.score.thread": scores.thread_score,
            "mneme.score.speaker": scores.speaker_score,
            "mneme.score.date": scores.date_score,
            "mneme.score.rerank": scores.rerank_score,
        }
        attributes: dict[str, str | int | float] = {
            "mneme.memory.id": str(hit.memory.id),
            "mneme.hit.position": position,
            "mneme.score.fused": scores.fused_score,
            "mneme.score.recency": scores.recency_factor,
            "mneme.score.confidence": scores.confidence_factor,
            "mneme.score.final": scores.final_score,
        }
        attributes.update({key: value for key, value in optional.items() if value is not None})
        span.add_event("mneme.search.hit", attributes)


@contextlib.contextmanager
def search_stage(stage: str, mode: str) -> Iterator[Span]:
    """A span for one stage of a search (`memories.<stage>`), timed into the stage histogram."""
    started = time.perf_counter()
    with tracer.start_as_current_span(f"memories.{stage}") as span:
        span.set_attribute("mneme.search.mode", mode)
        try:
            yield span
        finally:
            MEMORY_METRICS.search_stage_latency.labels(stage, mode).observe(
                time.perf_counter() - started
            )


@contextlib.contextmanager
def fusion_statement(mode: str, statement: str = "HYBRID_SEARCH_SQL") -> Iterator[StatementSpan]:
    """The span of the one fusion statement (database client conventions) and its metrics."""
    with search_stage(STATEMENT_STAGE, mode) as span:
        span.set_attribute("db.system.name", "postgresql")
        # The name before semantic conventions 1.26; some backends still key on it.
        span.set_attribute("db.system", "postgresql")
        span.set_attribute("db.query.summary", statement)
        span.set_attribute("db.operation.name", "SELECT")
        yield StatementSpan(span, mode)


@dataclasses.dataclass(frozen=True)
class StatementSpan:
    span: Span
    mode: str

    def rows(self, count: int) -> None:
        """Record how many rows (fused candidates) the statement returned."""
        self.span.set_attribute("db.response.returned_rows", count)
        MEMORY_METRICS.search_candidates.labels(self.mode).observe(count)
