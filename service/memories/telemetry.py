"""What a search records about itself: a span and a timing per stage, the fusion statement's
span, and every returned hit's component scores as span events."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence

from opentelemetry.trace import Span

from service.memories.schemas import SearchHit
from service.observability import DOMAIN_METRICS, tracer


def record_search_hits(span: Span, hits: Sequence[SearchHit], *, mode: str) -> None:
    """One `mneme.search.hit` event per returned hit with every component score, in rank order.

    Absent components (no lexical match, no vector, no MMR pass) are left out of the event
    rather than written as zeros, so a reader can tell "not a candidate" from "scored 0".
    """
    DOMAIN_METRICS.search_hits.labels(mode).observe(len(hits))
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
            DOMAIN_METRICS.search_stage_latency.labels(stage, mode).observe(
                time.perf_counter() - started
            )


@contextlib.contextmanager
def fusion_statement(mode: str, statement: str = "HYBRID_SEARCH_SQL") -> Iterator[StatementSpan]:
    """The span of the one fusion statement (database client conventions) and its metrics."""
    with search_stage("fusion_query", mode) as span:
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
        DOMAIN_METRICS.search_candidates.labels(self.mode).observe(count)
