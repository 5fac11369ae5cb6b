"""What a context block records about itself: its shape (sections, items, tokens) on its
span, and its token use against its budget as metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.trace import Span
from prometheus_client import Histogram

from service.context.schemas import ContextSection
from service.observability import DOMAIN_METRICS, TOKEN_BUCKETS

CONTEXT_TOKENS = Histogram(
    "mneme_context_tokens",
    "Context blocks: tokens used and the budget they had (measure=used|budget).",
    ["measure"],
    buckets=TOKEN_BUCKETS,
    registry=DOMAIN_METRICS.registry,
)


def record_context_sections(
    span: Span,
    sections: Sequence[ContextSection],
    omitted: Mapping[str, int],
    *,
    token_count: int,
    budget: int,
) -> None:
    """The context block's shape on its span: one event per section (tokens used, items,
    items omitted for budget) and one per chosen item (section, id, kind, tokens)."""
    CONTEXT_TOKENS.labels("used").observe(token_count)
    CONTEXT_TOKENS.labels("budget").observe(budget)
    if not span.is_recording():
        return
    span.set_attribute("mneme.context.tokens", token_count)
    span.set_attribute("mneme.context.budget", budget)
    for section in sections:
        span.add_event(
            "mneme.context.section",
            {
                "mneme.context.section": section.name,
                "mneme.context.section.tokens": sum(item.tokens for item in section.items),
                "mneme.context.section.items": len(section.items),
                "mneme.context.section.omitted": section.omitted,
            },
        )
        for item in section.items:
            attributes: dict[str, str | int] = {
                "mneme.context.section": section.name,
                "mneme.context.item.kind": item.kind.partition(":")[0],
                "mneme.context.item.tokens": item.tokens,
            }
            # Profile lines have no id; summary and message ids are Mneme's, not user text.
            if item.id is not None:
                attributes["mneme.context.item.id"] = item.id
            span.add_event("mneme.context.item", attributes)
    listed = {section.name for section in sections}
    for name, count in omitted.items():
        if name not in listed:
            span.add_event(
                "mneme.context.section",
                {
                    "mneme.context.section": name,
                    "mneme.context.section.tokens": 0,
                    "mneme.context.section.items": 0,
                    "mneme.context.section.omitted": count,
                },
            )
