"""The fusion statement for one search's parameters: its text rendered from the fragments
of `sql` for the search's filter shape (`render` fails on a placeholder left unfilled), its
values bound, and its compilation to driver SQL, once per filter shape (`compiled_search`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from string import Template
from typing import Any, get_args

from sqlalchemy import BindParameter, Integer, Text, TextualSelect, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, UUID
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from service.auth.owner import Owner
from service.db import DriverStatement, compiled_once, escaped_literal
from service.memories.bm25 import (
    SATURATION,
    SHORTEST_SHARE,
    inverse_document_frequency,
    score_for_ties,
    term_weight,
)
from service.memories.filters import MemoryFilter, Predicate
from service.memories.fusion.parameters import RANKING_PARAMETERS, SearchParams
from service.memories.fusion.sql import (
    BEYOND_POOLS_SQL,
    BOUNDED_MATCHES_SQL,
    COLLECTION_SQL,
    COUNT_PASSING_SQL,
    DATED_SCAN_SQL,
    DATED_SQL,
    EXACT_ORDER_SQL,
    EXACT_WHEN_FEW_SQL,
    FEW_PASSED_SQL,
    FEW_PASSING_SQL,
    FEW_SQL,
    FILTERED_WALK_SQL,
    HYBRID_SEARCH_SQL,
    INDEX_ORDER_SQL,
    KEPT_SQL,
    LEXICAL_EXACT_SQL,
    LEXICAL_MATCHES_SQL,
    LINEAR_FUSED_SQL,
    MANY_PASSED_SQL,
    MEMORY_BY_KEY_SQL,
    NEAREST_OF_OWNERS_SQL,
    NEAREST_SQL,
    OWNER_DOCUMENTS_SQL,
    OWNER_INDEXES_OF_SQL,
    OWNER_INDEXES_SQL,
    OWNER_STATS_SQL,
    OWNERS_SEARCHED_SQL,
    PASSED_BY_KEY_SQL,
    PASSED_LENGTHS_SQL,
    PASSING_SQL,
    POOL_REACHED_SQL,
    QUESTION_VECTOR_SQL,
    READ_POSTINGS_SQL,
    SEARCHED_EXACTLY_SQL,
    SEARCHED_FEW_SQL,
    SEARCHED_OWNER_KEYS_SQL,
    SEEDS_SQL,
    WEIGHT_BOUND_SQL,
)
from service.memories.owner_index_names import ALL_KINDS, OWNER_INDEX_PREFIX
from service.memories.postings import IMPACT_MEAN_LENGTH
from service.memories.schemas import MemoryKind
from service.memories.vector_columns import VectorColumn

MEMORY_KINDS: tuple[str, ...] = get_args(MemoryKind)
"""Every kind of memory, in the order a search over all of them scans their owner indexes."""

_COMPILED_SEARCHES_KEPT = 512
"""How many statement texts are kept compiled (and rendered): one per filter shape, and per
owner for the owners written in."""


def render(template: str, **fragments: str) -> str:
    """`template` with every `${name}` replaced by `fragments[name]`.

    A placeholder without a fragment is an error, never left in the SQL for Postgres to
    reject at run time (or worse, to parse as something else)."""
    try:
        return Template(template).substitute(fragments)
    except KeyError as missing:
        raise ValueError(f"the SQL template's placeholder {missing} has no fragment") from None


def vector_fragments(column: VectorColumn) -> dict[str, str]:
    """The statement's fragments for the vector column a search reads: the column as its
    index is built (`${vector}`, over `memory m`), and the hit's vector and model name."""
    return {
        "vector": column.expression("m"),
        "vector_name": column.name,
        "owner_index_prefix": f"'{OWNER_INDEX_PREFIX}'",
        "owner_index_kinds": "ARRAY["
        + ", ".join(f"'{kind}'" for kind in (ALL_KINDS, *MEMORY_KINDS))
        + "]::text[]",
        "hit_vector": f"s.{column.name}",
        "hit_vector_model": f"s.{column.model_column}",
    }


POOL_REACHED_READS = 4
"""How many candidates per memory of a section's pool a bounded read checks against the
section's filter to find the score its pool reaches (`POOL_REACHED_SQL`): a section whose
memories are rarer among the candidates than that prunes none."""

PRUNED_FROM = 2
"""A bounded read prunes its candidates (see `BOUNDED_MATCHES_SQL`) only when they are more
than this many times its section's pool: with fewer, reading the pool's rows to find the score
it reaches costs more than the rows it would save."""


@dataclass(frozen=True)
class SectionShape:
    """What the statement's text depends on in one section: its filter as SQL, and the same
    filter for each of its owners alone (when it has more than one, or when the owners are
    written into it: `owners_written`). A section whose owners are written in reads the
    nearest vectors of those with indexes of their own in the order an index serves (their
    indexes, which a plan made once for the statement can prove it may use), and sorts the
    others' exactly."""

    candidate_filter: str
    owner_filters: tuple[str, ...]
    owners_written: bool = False
    written_sizes: tuple[int, int, int] | None = None
    """The section's pool, limit and vector candidates, written into the text with its owners:
    a plan made once for the statement then expects the rows a search reads, not a guess at an
    unknown LIMIT's (a tenth of the owner's memories), which had it join whole tables where a
    search reads a few hundred rows."""
    indexed_kinds: tuple[tuple[str, ...], ...] = ()
    """For each owner written in, the kinds of memory it has an index of its own for
    (`ALL_KINDS` for one over all of them)."""
    rest_filters: tuple[str, ...] = ()
    """For each owner written in, its filter for the scan of the kinds it has no index for
    (the organization's stated by its user column: `MemoryFilter.where`'s
    `org_without_user`)."""
    kinds: tuple[str, ...] = MEMORY_KINDS
    """The kinds of memory the section's filter lets through."""
    reads_postings_of: int = 0
    """The first section with the same owners as this one (this one's own index if none comes
    before it): sections of one owner read its postings once, in that section's scan."""
    holds_turns: bool = True
    """Whether the section's filter lets episodic memories (a conversation's turns) through:
    only a turn receives a neighbour's evidence, so a section without them looks none up."""
    left_out: str | None = None
    """The memories the section ranks but does not return, as a condition over `memory x`
    (`SearchParams.not_only_of_messages`), or None."""
    graph_filters: tuple[str, ...] = ()
    """For owners written in, when the filter passes only part of a kind, each owner's filter
    without that part: each walk of an owner's index then becomes an exact sort when few
    memories pass its filter (`FEW_PASSING_SQL`), and otherwise reads the memories of
    `graph_filters`, testing each against its filter as it finds them (`FILTERED_WALK_SQL`).
    Empty: walked under the filter."""
    kinds_bind: str | None = None
    """The bind of the kinds its filter names (`MemoryFilter.where`'s), None when it names
    none: a bounded read tests a posting's kind against it without reading the memory."""
    postings_part: int = 0
    """Its ranges' part of the read of its owners' postings (`BOUNDED_MATCHES_SQL`): its place
    among the sections of that read when each of them names kinds no other does (a context's
    facts and episodes), so each reads the top of its own kinds' lists; else 0, one range per
    lexeme and owner for all of them."""
    lexical_few: bool = False
    """Whether the section's filter passes only part of a kind and it reads its owners'
    postings alone: if it is bounded, its lexical side is searched exactly when few memories
    pass the filter (`LEXICAL_EXACT_SQL`), since the top of its postings may hold none of them."""
    dated_filters: tuple[str, ...] = ()
    """Its filter for each of its owners alone without its kinds, the organization's stated by
    its user column, for the scans of the memories of the time a query names (`DATED_SCAN_SQL`,
    one per owner and kind: an index keyed by user and kind serves them)."""

    @property
    def each_owner_filter(self) -> tuple[str, ...]:
        """Its filter for each of its owners alone, or its one filter when it has no others."""
        return self.owner_filters or (self.candidate_filter,)

    def pool(self, index: int) -> str:
        return str(self.written_sizes[0]) if self.written_sizes else f":pool_{index}"

    def limit(self, index: int) -> str:
        return str(self.written_sizes[1]) if self.written_sizes else f":limit_{index}"

    def vector_pool(self, index: int) -> str:
        """How many candidates its vector side brings (`SearchParams.vector_candidates`)."""
        return str(self.written_sizes[2]) if self.written_sizes else f":vector_pool_{index}"


@dataclass(frozen=True)
class VectorScan:
    """One scan of a section's vector candidates (`NEAREST_SQL`): the memories it reads and
    their order; with `graph_filter`, a walk of an owner's index (`FILTERED_WALK_SQL`) that
    tests `candidate_filter` on the memories of `graph_filter` it finds."""

    candidate_filter: str
    order: str
    graph_filter: str | None = None


@lru_cache(maxsize=_COMPILED_SEARCHES_KEPT)
def _search_template(
    shapes: tuple[SectionShape, ...],
    column: VectorColumn,
) -> str:
    """`HYBRID_SEARCH_SQL` with section `i` selected by `shapes[i]`, its pool and limit bound
    as `:pool_i` and `:limit_i`, its vectors read from `column`. The owners written in with
    indexes of their own read their nearest vectors from those; every other owner's are sorted
    by their exact distance, an order no index serves, so that no plan walks a graph that
    holds other owners' vectors (the memory table has none of its own: see
    `service.memories.owner_indexes`)."""
    # Cached per filter shape: the same text (and so asyncpg's prepared statement) is reused.

    vectors = vector_fragments(column)
    candidate_filters = tuple(shape.candidate_filter for shape in shapes)
    # Whether a section's lexical side may be searched exactly when few memories pass its
    # filter (`LEXICAL_EXACT_SQL`): the bounded read and the statistics then leave it out.
    some_searched_exactly = any(shape.lexical_few for shape in shapes)

    index_order = render(INDEX_ORDER_SQL, question_vector=QUESTION_VECTOR_SQL, **vectors)
    exact_order = render(EXACT_ORDER_SQL, question_vector=QUESTION_VECTOR_SQL, **vectors)
    # Whether few memories pass each filtered walk's filter (`COUNT_PASSING_SQL`), numbered as
    # `owner_scans` writes them.
    passing_counts: list[str] = []

    def owner_scans(index: int, shape: SectionShape) -> list[VectorScan]:
        """The section's vector scans: one per owner, and for an owner written in with
        indexes of its own per kind, one per kind it has an index for (the kind written in, so
        the plan can prove the index's condition) and one, exact, for the kinds it has none
        for. An owner written in with no index of its own (the organization beside a large
        user) is sorted exactly, like those kinds."""
        if not shape.owners_written:
            return [VectorScan(each, exact_order) for each in shape.each_owner_filter]

        def walked(scan_filter: str, graph_filter: str) -> list[VectorScan]:
            """A walk of the owner's index under `scan_filter`; for a filter that passes only
            part of a kind, two scans, of which the statement runs one: the exact sort when
            few memories pass it, the walk (of the memories `graph_filter` passes, tested
            against `scan_filter` as it finds them) when more do."""
            if not shape.graph_filters:
                return [VectorScan(scan_filter, index_order)]
            scan = str(len(passing_counts))
            few = render(FEW_SQL, section=str(index), pool=shape.pool(index))
            passing_counts.append(
                render(
                    COUNT_PASSING_SQL,
                    scan=scan,
                    few=few,
                    passing=render(
                        PASSING_SQL, side=":use_vector", candidate_filter=scan_filter, few=few
                    ),
                )
            )
            return [
                VectorScan(
                    render(FEW_PASSED_SQL, scan=scan, candidate_filter=scan_filter), exact_order
                ),
                VectorScan(
                    f"{scan_filter}\n    AND {render(MANY_PASSED_SQL, scan=scan)}",
                    index_order,
                    graph_filter,
                ),
            ]

        scans = []
        for owner_filter, graph_filter, indexed, rest_filter in zip(
            shape.owner_filters,
            shape.graph_filters or shape.owner_filters,
            shape.indexed_kinds,
            shape.rest_filters,
            strict=True,
        ):
            if ALL_KINDS in indexed:
                scans += walked(owner_filter, graph_filter)
                continue
            for kind in shape.kinds:
                if kind in indexed:
                    of_kind = f"\n    AND m.kind = {owner_literal(kind)}"
                    scans += walked(owner_filter + of_kind, graph_filter + of_kind)
            rest = [kind for kind in shape.kinds if kind not in indexed]
            if rest:
                written = ", ".join(owner_literal(kind) for kind in rest)
                # Found through the index by user and kind: a kind the owner has few or none of
                # costs a probe, not a read of every one of the owner's memories' entries.
                scans.append(
                    VectorScan(f"{rest_filter}\n    AND m.kind IN ({written})", exact_order)
                )
        return scans

    def nearest(index: int, shape: SectionShape) -> str:
        """The section's vector candidates: one scan per owner (or per owner and kind), the
        nearest of them kept."""
        scans = [
            render(
                NEAREST_SQL if scan.graph_filter is None else FILTERED_WALK_SQL,
                section=str(index),
                candidate_filter=scan.candidate_filter,
                pool=shape.vector_pool(index),
                question_vector=QUESTION_VECTOR_SQL,
                order=scan.order,
                **({} if scan.graph_filter is None else {"graph_filter": scan.graph_filter}),
                **vectors,
            )
            for scan in owner_scans(index, shape)
        ]
        if len(scans) == 1:
            return scans[0]
        return render(
            NEAREST_OF_OWNERS_SQL,
            owners=" UNION ALL ".join(f"({scan})" for scan in scans),
            pool=shape.vector_pool(index),
        )

    def bounded_matches() -> str:
        """The bounded sections' lexical candidates: one read of the postings per set of
        owners, each candidate put in the section whose filter it passes (a context's facts
        and episodes are one user's memories: the same postings, the same candidates, read
        and fetched once instead of once per section)."""
        reads = []
        for reader in sorted({shape.reads_postings_of for shape in shapes}):
            filters = {
                index: shape.candidate_filter
                for index, shape in enumerate(shapes)
                if shape.reads_postings_of == reader
            }
            if len(filters) == 1:
                section, candidate_filter = str(reader), filters[reader]
            else:
                section, candidate_filter = _sections_of(filters)
            pools = ", ".join(shapes[index].pool(index) for index in filters)
            pruning = _pruning({index: shapes[index] for index in filters})
            fragment = render(
                BOUNDED_MATCHES_SQL,
                section=section,
                reading_section=str(reader),
                candidate_filter=candidate_filter,
                seeds=render(SEEDS_SQL, documents="l.documents", owner_documents="o.documents"),
                shared_candidates=f"2 * greatest({pools})",
                impact_mean_length=repr(IMPACT_MEAN_LENGTH),
                bounded_idf=BOUNDED_IDF,
                candidate_row=render(MEMORY_BY_KEY_SQL, key="candidate.memory_id", row="m"),
                read_postings=f"\n                   AND {READ_POSTINGS_SQL}"
                if some_searched_exactly
                else "",
                **pruning,
            )
            reads.append(f"({fragment})")
        return " UNION ALL ".join(reads)

    def each_section(fragment: str) -> str:
        return " UNION ALL ".join(
            "("
            + render(
                fragment,
                section=str(index),
                candidate_filter=exact_lexical_filter(shape),
                pool=shape.pool(index),
                owner_keys=f"CAST(:owner_keys_{index} AS text[])",
                question_vector=QUESTION_VECTOR_SQL,
                searched_exactly=render(
                    SEARCHED_FEW_SQL if shape.lexical_few else SEARCHED_EXACTLY_SQL,
                    section=str(index),
                ),
                **collected(shape),
                **vectors,
            )
            + ")"
            for index, shape in enumerate(shapes)
        )

    def owner_selects(shape: SectionShape, columns: str) -> str:
        """`columns` of the section's memories, one SELECT per owner's filter."""
        return " UNION ALL ".join(
            f"SELECT {columns} FROM memory m WHERE {owner_filter}"  # noqa: S608 - our fragments
            for owner_filter in shape.each_owner_filter
        )

    def collected(shape: SectionShape) -> dict[str, str]:
        """What `COLLECTION_SQL` counts for the section: `memory` under its filter, or for a
        section `LEXICAL_EXACT_SQL` may take its owners' memories' lengths."""
        if not shape.lexical_few:
            return {"collected": "memory", "collected_filter": shape.candidate_filter}
        return {
            "collected": render(
                PASSED_LENGTHS_SQL, passing_lengths=owner_selects(shape, "m.tsv_length")
            ),
            "collected_filter": "true",
        }

    def exact_lexical_filter(shape: SectionShape) -> str:
        """The section's filter for its exact lexical side; for a section `LEXICAL_EXACT_SQL`
        may take, its memories found by each owner's filter, then by their keys."""
        if not shape.lexical_few:
            return shape.candidate_filter
        return render(PASSED_BY_KEY_SQL, passing_ids=owner_selects(shape, "m.id"))

    def exact_when_few(index: int, shape: SectionShape) -> str:
        """Section `index` when its lexical side is searched exactly (`EXACT_WHEN_FEW_SQL`),
        its memories counted one owner at a time."""
        few = render(FEW_SQL, section=str(index), pool=shape.pool(index))
        return render(
            EXACT_WHEN_FEW_SQL,
            section=str(index),
            few=few,
            seeds=render(SEEDS_SQL, documents="d.documents", owner_documents="o.documents"),
            passing=" + ".join(
                render(PASSING_SQL, side=":use_lexical", candidate_filter=owner_filter, few=few)
                for owner_filter in shape.each_owner_filter
            ),
        )

    exact_when_few_sections = [
        exact_when_few(index, shape) for index, shape in enumerate(shapes) if shape.lexical_few
    ]

    turn_sections = [str(index) for index, shape in enumerate(shapes) if shape.holds_turns]
    if not turn_sections:
        sections_with_turns = "false"
    elif len(turn_sections) == len(shapes):
        sections_with_turns = "true"
    else:
        sections_with_turns = f"c.section IN ({', '.join(turn_sections)})"
    if len(candidate_filters) == 1:
        section, candidate_filter = "0", candidate_filters[0]
        pool, limit = shapes[0].pool(0), shapes[0].limit(0)
        neighbour_filter = candidate_filter
        lexical_pool = pool
    else:
        section, candidate_filter = _sections_of(dict(enumerate(candidate_filters)))
        # Not the sections' filters OR'ed beside it: the planner would read the thread's
        # earlier turns once per section's filter (a BitmapOr) and sort them all, where the
        # thread's index in time order finds the neighbour in a step or two. Each turn it
        # steps over is tested against the candidate's own section's filter alone (the
        # sections are disjoint, so passing it is being in that section), not against each
        # section's filter in turn until one holds.
        own_section = " ".join(
            f"WHEN {index} THEN ({each})" for index, each in enumerate(candidate_filters)
        )
        neighbour_filter = f"m.tenant_id = :tenant_id AND CASE c.section {own_section} END"
        pool = (
            "CASE section "
            + " ".join(
                f"WHEN {index} THEN {shape.pool(index)}" for index, shape in enumerate(shapes)
            )
            + " END"
        )
        limit = (
            "CASE section "
            + " ".join(
                f"WHEN {index} THEN {shape.limit(index)}" for index, shape in enumerate(shapes)
            )
            + " END"
        )
        lexical_pool = "ALL"
    nearest_scans = " UNION ALL ".join(
        f"({nearest(index, shape)})" for index, shape in enumerate(shapes)
    )

    def dated(index: int, shape: SectionShape) -> str:
        """The section's memories of the time the query names: a scan per owner and kind (of
        the kinds its text has), each run only if the filter's own bind of its kinds holds the
        scan's."""
        scans = [
            render(
                DATED_SCAN_SQL,
                kind=owner_literal(kind),
                kind_asked=""
                if shape.kinds_bind is None
                else f"\n   AND {owner_literal(kind)} = ANY(:{shape.kinds_bind})",
                owner_filter=owner_filter,
                pool=shape.pool(index),
            )
            for owner_filter in shape.dated_filters
            for kind in shape.kinds
        ]
        return render(
            DATED_SQL,
            section=str(index),
            scans=" UNION ALL ".join(f"({scan})" for scan in scans),
            pool=shape.pool(index),
        )

    return render(
        HYBRID_SEARCH_SQL,
        owner_stats=each_section(OWNER_STATS_SQL),
        lexical_matches=each_section(LEXICAL_MATCHES_SQL),
        bounded_matches=bounded_matches(),
        collection=each_section(COLLECTION_SQL),
        nearest=nearest_scans,
        dated=" UNION ALL ".join(f"({dated(index, shape)})" for index, shape in enumerate(shapes)),
        few_passing=render(FEW_PASSING_SQL, passing="\n UNION ALL ".join(passing_counts))
        if passing_counts
        else "",
        lexical_exact=render(
            LEXICAL_EXACT_SQL, sections="\n UNION ALL ".join(exact_when_few_sections)
        )
        if exact_when_few_sections
        else "",
        read_postings_where=f"\n     WHERE {READ_POSTINGS_SQL}" if some_searched_exactly else "",
        beyond_pools=render(
            BEYOND_POOLS_SQL.strip(),
            neighbour_row=render(MEMORY_BY_KEY_SQL, key="b.id", row="m"),
            question_vector=QUESTION_VECTOR_SQL,
            own_lexical_score=lexical_score(
                term_weight(
                    "cardinality(term.positions)", "m.tsv_length", "nullif(w.mean_length, 0)"
                )
            ),
            linear_fused_score=render(
                LINEAR_FUSED_SQL,
                lexical="coalesce(own.lexical_score / nullif(best.score, 0), 0)",
                cosine="own.cosine",
            ),
            **vectors,
        ),
        lexical_score=lexical_score(term_weight("lm.tf", "lm.length", "nullif(w.mean_length, 0)")),
        exact_idf=inverse_document_frequency("c.documents", "count(*)"),
        bounded_idf=BOUNDED_IDF,
        candidate_filter=candidate_filter,
        neighbour_filter=neighbour_filter,
        turn_sections=sections_with_turns,
        left_out=_left_out(shapes),
        fused_row=render(MEMORY_BY_KEY_SQL, key="f.id", row="m"),
        linear_fused_score=render(
            LINEAR_FUSED_SQL, lexical="f.lexical_strength", cosine="cosine.value"
        ),
        question_vector=QUESTION_VECTOR_SQL,
        hit_row=render(MEMORY_BY_KEY_SQL, key="ranked.id", row="s"),
        section=section,
        lexical_pool=lexical_pool,
        pool=pool,
        limit=limit,
        **vectors,
    )


def _left_out(shapes: Sequence[SectionShape]) -> str:
    """Whether a hit `h` is one its section ranks but does not return (`SectionShape.left_out`),
    as SQL: a look-up of the memory's row for the hits of such a section alone."""
    cases = " ".join(
        f"WHEN {index} THEN EXISTS (SELECT FROM memory x WHERE x.tenant_id = :tenant_id"
        f" AND x.id = h.id AND {shape.left_out})"
        for index, shape in enumerate(shapes)
        if shape.left_out is not None
    )
    return f"(CASE h.section {cases} ELSE false END)" if cases else "false"


def lexical_score(weight: str) -> str:
    """A memory's BM25 score over its rows of the question's lexemes joined to their
    `term_weights` `w`, each lexeme's `weight` in the memory (`term_weight`)."""
    return score_for_ties(f"sum(w.idf * {weight})")


BOUNDED_IDF = inverse_document_frequency("greatest(o.documents, d.documents)", "d.documents")
"""A bounded section's inverse document frequency of a question lexeme (`lexeme_documents`
`d`), over its owners' memories (`owner_stats` `o`; never fewer than the lexeme's own count,
which may be newer)."""


def weight_bound(impact: str, *, most: bool) -> str:
    """`WEIGHT_BOUND_SQL` for `impact`: the most BM25 weight a memory's lexeme with that
    impact can have (`most`) or the least, widened by a millionth for the rounding of a stored
    impact."""
    bound = render(
        WEIGHT_BOUND_SQL.strip(),
        pick="least" if most else "greatest",
        impact=impact,
        saturation=SATURATION,
        shortest_share=SHORTEST_SHARE,
    )
    return f"(1 + 1e-6) * {bound}" if most else f"(1 - 1e-6) * {bound}"


def _of_kinds(column: str, shape: SectionShape) -> str:
    """Whether `column` holds one of the kinds the section's filter names, as SQL."""
    return "true" if shape.kinds_bind is None else f"{column} = ANY(:{shape.kinds_bind})"


def _pruning(sections: Mapping[int, SectionShape]) -> dict[str, str]:
    """`BOUNDED_MATCHES_SQL`'s fragments for a read of the postings that `sections` (by
    index) share: the ranges of their kinds, in one part or one per section
    (`SectionShape.postings_part`), and a candidate left unread when its score cannot reach the
    pool of any section its kind may be in."""
    shapes = list(sections.values())
    parts = 1 + max(shape.postings_part for shape in shapes)
    if parts > 1:
        cases = " ".join(
            f"WHEN {shape.postings_part} THEN {_of_kinds('p.kind', shape)}" for shape in shapes
        )
        posting_kinds = f"CASE r.part {cases} END"
    elif all(shape.kinds_bind for shape in shapes):
        posting_kinds = "(" + " OR ".join(_of_kinds("p.kind", shape) for shape in shapes) + ")"
    else:
        posting_kinds = "true"
    # A read of one section holds its kinds alone (its ranges do): its candidates' kinds are
    # not read, nor tested.
    shared = len(sections) > 1
    reached, kept = [], []
    for index, shape in sections.items():
        pool = shape.pool(index)
        of_kinds = _of_kinds("kind", shape) if shared else "true"
        reached.append(
            render(
                POOL_REACHED_SQL.strip(),
                index=str(index),
                candidate_row=render(MEMORY_BY_KEY_SQL, key="c.memory_id", row="m"),
                candidate_filter=shape.candidate_filter,
                of_kinds=of_kinds,
                pool=pool,
                most_read=f"{POOL_REACHED_READS} * {pool}",
                pruned_from=f"{PRUNED_FROM} * {pool}",
            )
        )
        section_kept = render(KEPT_SQL, index=str(index))
        kept.append(
            section_kept if of_kinds == "true" else f"CASE WHEN {of_kinds} THEN {section_kept} END"
        )
    return {
        "pool_reached": "\n" + ",\n".join(reached),
        "kept": kept[0] if len(kept) == 1 else "(" + " OR ".join(kept) + ")",
        "found_tied": score_for_ties("c.found_score"),
        "parts": "(VALUES " + ", ".join(f"({part})" for part in range(parts)) + ")",
        # Carried only where a section's bound reads it: ~4 % of a large owner's search.
        "posting_kind": "p.kind" if shared else "NULL::text",
        "posting_kinds": posting_kinds,
        "beyond": BEYOND,
        "found_weight": FOUND_WEIGHT,
    }


BEYOND = f"r.idf * coalesce({weight_bound('past.impact', most=True)}, 0)"
"""The most a question lexeme `r` can weigh in a memory below its range (`past`, the posting
right after it): the weight bound of that posting's impact."""

FOUND_WEIGHT = term_weight("top.frequency", "top.length", "nullif(s.mean_length, 0)")
"""The BM25 weight of a posting `top` read by a bounded read, at the owners' mean length (`s`,
its `scale`): exactly as its memory's row scores it (`lexical_hits`), but for the float
arithmetic's last bits, which the bounds widen by a millionth."""


def _sections_of(filters: Mapping[int, str]) -> tuple[str, str]:
    """For several disjoint sections (their filters by index): the expression giving a memory's
    section, and the filter a memory of any of them passes."""
    cases = " ".join(f"WHEN ({each}) THEN {index}" for index, each in filters.items())
    return f"CASE {cases} END", "(" + " OR ".join(f"({each})" for each in filters.values()) + ")"


owner_literal = escaped_literal
"""An owner, a tenant or a kind written into the statement's text (`service.db.escaped_literal`)."""


@dataclass(frozen=True)
class SectionPredicates:
    """A section's filter as SQL and each of its owners' conditions."""

    candidate: Predicate
    owners: tuple[Predicate, ...]
    written_sizes: tuple[int, int, int] | None
    """The pool, limit and vector candidates when the owners are written in
    (`SectionShape.written_sizes`)."""
    indexed_kinds: tuple[tuple[str, ...], ...] = ()
    """When the owners are written in, the kinds each has an index of its own for."""
    rest: tuple[Predicate, ...] = ()
    """Each owner's filter for its kinds without an index (`SectionShape.rest_filters`): its
    own filter, but where an owner written in has indexes per kind."""
    left_out: Predicate | None = None
    """The memories the section ranks but does not return (`SectionShape.left_out`)."""
    graphs: tuple[Predicate, ...] = ()
    """When the owners are written in and the filter passes only part of a kind, each owner's
    filter without that part (`SectionShape.graph_filters`); its binds are the owner's."""
    dated: tuple[Predicate, ...] = ()
    """Each owner's filter without its kinds, the organization stated by its user column
    (`SectionShape.dated_filters`); its binds are the owner's, or the section's."""


def _section_predicates(
    tenant_id: str,
    sections: Sequence[SearchParams],
    written_owners: Mapping[int, Collection[str]] | None = None,
) -> list[SectionPredicates]:
    """Each section's filter as SQL and each of its owners' conditions (binds prefixed by the
    section), once the sections are checked to be one search split by disjoint filters; the
    sections whose index is a key of `written_owners` have their owners written in
    (`owner_literal`), and read the indexes of their own it names (`kind:owner key` each, as
    `OWNER_STATS_SQL` finds them)."""
    written_owners = written_owners or {}
    first = sections[0]
    # A plain search is one section: nothing to compare (this runs on every search).
    for index, other in enumerate(sections[1:], start=1):
        if (
            replace(
                other,
                filter=first.filter,
                pool=first.pool,
                limit=first.limit,
                vector_pool=first.vector_pool,
                not_only_of_messages=first.not_only_of_messages,
            )
            != first
        ):
            raise ValueError(
                "sections of one search share everything but filter, pools, limit and the "
                "messages whose memories they do not return"
            )
        if any(not other.filter.is_disjoint(earlier.filter) for earlier in sections[:index]):
            raise ValueError("the sections of one search must select disjoint memories")
    predicates = []
    for index, params in enumerate(sections):
        literal = owner_literal if index in written_owners else None
        units = [unit.partition(":") for unit in written_owners.get(index, ())]
        # The organization's memories are stated by their user column (`org_without_user`),
        # but where an owner is written in: an index of the organization's own is partial to
        # `scope = 'org'`, and the plan can read it only if the scan states that.
        owners = _each_owner(
            tenant_id, params.filter, f"f{index}_", literal, org_without_user=literal is None
        )
        # The filters for the kinds without an index are needed only beside indexes per kind
        # (and differ only for the organization): not made again on every other search. Their
        # binds are the owners' own (the same names and values), bound once.
        per_kind = any(kind != ALL_KINDS for kind, _, _ in units)
        predicates.append(
            SectionPredicates(
                params.filter.where(tenant_id, prefix=f"f{index}_", org_without_user=True),
                owners,
                (params.pool, params.limit, params.vector_candidates)
                if literal is not None
                else None,
                tuple(
                    tuple(sorted(kind for kind, _, key in units if key == owner.key))
                    for owner in params.filter.owners
                )
                if literal is not None
                else (),
                _each_owner(tenant_id, params.filter, f"f{index}_", literal, org_without_user=True)
                if per_kind
                else owners,
                _drawn_only_from(params.not_only_of_messages, f"f{index}_"),
                _each_owner(tenant_id, params.filter.of_kinds_only(), f"f{index}_", literal)
                if literal is not None and params.filter.passes_part_of_a_kind
                else (),
                _dated_filters(tenant_id, params.filter, f"f{index}_", literal),
            )
        )
    return predicates


def _dated_filters(
    tenant_id: str,
    memories: MemoryFilter,
    prefix: str,
    literal: Callable[[str], str] | None,
) -> tuple[Predicate, ...]:
    """`memories` for each of its owners alone, the organization stated by its user column, a
    user not written in bound as a value (`MemoryFilter.where`'s `one_user_as_value`), without
    the kinds: a scan of one kind (`DATED_SCAN_SQL`) tests them once, not on each row. Binds
    prefixed by `prefix` and the owner's place, as the owners' own (`_each_owner`) are."""
    without_kinds = replace(memories, kinds=None)
    return tuple(
        replace(without_kinds, owners=(owner,)).where(
            tenant_id,
            prefix=f"{prefix}{place}_",
            owner_literal=literal,
            org_without_user=True,
            one_user_as_value=True,
        )
        for place, owner in enumerate(memories.owners)
    )


def _drawn_only_from(messages: tuple[uuid.UUID, ...] | None, prefix: str) -> Predicate | None:
    """The memories drawn from `messages` alone, as a condition over `memory x`, or None: a
    memory drawn from no message, or from any other, is not one of them."""
    if messages is None:
        return None
    name = f"{prefix}not_only_of_messages"
    return Predicate(
        f"(x.source_message_ids <@ :{name} AND cardinality(x.source_message_ids) > 0)",
        (bindparam(name, list(messages), type_=ARRAY(UUID(as_uuid=True))),),
    )


def _each_owner(
    tenant_id: str,
    memories: MemoryFilter,
    prefix: str,
    literal: Callable[[str], str] | None,
    *,
    org_without_user: bool = False,
) -> tuple[Predicate, ...]:
    """`memories` for each of its owners alone (binds prefixed by `prefix` and the owner's
    place): if it has more than one, or if `literal` writes them in. A statement that reads
    each owner apart can use an index partial to one owner: its conditions imply the
    index's."""
    if len(memories.owners) < 2 and literal is None:
        return ()
    return tuple(
        replace(memories, owners=(owner,)).where(
            tenant_id,
            prefix=f"{prefix}{place}_",
            owner_literal=literal,
            org_without_user=org_without_user,
        )
        for place, owner in enumerate(memories.owners)
    )


def _shapes(
    sections: Sequence[SearchParams],
    predicates: Sequence[SectionPredicates],
) -> tuple[SectionShape, ...]:
    owner_sets = [params.filter.owners for params in sections]
    postings_parts = _postings_parts(sections)
    return tuple(
        SectionShape(
            section.candidate.sql,
            tuple(owner.sql for owner in section.owners),
            section.written_sizes is not None,
            section.written_sizes,
            section.indexed_kinds,
            tuple(rest.sql for rest in section.rest),
            # Only a text with its owners written in depends on the kinds' values (it has a
            # scan per kind); elsewhere they are bound, and one text serves any.
            tuple(kind for kind in MEMORY_KINDS if kind in (params.filter.kinds or MEMORY_KINDS))
            if section.written_sizes is not None
            else MEMORY_KINDS,
            owner_sets.index(owner_sets[index]),
            # The text depends on it (a section without turns has no look-ups), so a filter
            # that leaves episodic memories out has a text of its own.
            params.filter.kinds is None or "episodic" in params.filter.kinds,
            None if section.left_out is None else section.left_out.sql,
            tuple(graph.sql for graph in section.graphs),
            # The filter's own bind of its kinds (`MemoryFilter.where`, prefixed by section).
            None if params.filter.kinds is None else f"f{index}_kind",
            postings_parts[index],
            # A read shared with other sections puts each candidate in the section it passes:
            # it cannot be left out for one of them.
            params.filter.passes_part_of_a_kind and owner_sets.count(owner_sets[index]) == 1,
            tuple(dated.sql for dated in section.dated),
        )
        for index, (params, section) in enumerate(zip(sections, predicates, strict=True))
    )


def _postings_parts(sections: Sequence[SearchParams]) -> list[int]:
    """Each section's `SectionShape.postings_part`: among the sections of the same owners,
    its place when each names kinds no other of them does, else 0."""
    parts = [0] * len(sections)
    owner_sets = [params.filter.owners for params in sections]
    for owners in dict.fromkeys(owner_sets):
        members = [index for index, each in enumerate(owner_sets) if each == owners]
        if len(members) < 2:  # a search's one section: nothing to part (every search)
            continue
        named = [set(sections[index].filter.kinds or ()) for index in members]
        every_named = all(sections[index].filter.kinds for index in members)
        if every_named and sum(map(len, named)) == len(set().union(*named)):
            for place, index in enumerate(members):
                parts[index] = place
    return parts


def _binds(predicates: Sequence[SectionPredicates]) -> list[BindParameter[Any]]:
    """Every bind of the sections' filters, each name once (the filters of one owner made for
    different scans bind the same names to the same values)."""
    binds: dict[str, BindParameter[Any]] = {}
    for section in predicates:
        for predicate in (
            section.candidate,
            *section.owners,
            *section.dated,
            *filter(None, [section.left_out]),
        ):
            for bind in predicate.binds:
                binds.setdefault(bind.key, bind)
    return list(binds.values())


def _bound_values(
    tenant_id: str,
    sections: Sequence[SearchParams],
    predicates: Sequence[SectionPredicates],
) -> dict[str, Any]:
    """Every value the statement binds but the filters' own: sizes per section (unless
    written in), its owners, the ranking parameters (shared by the sections) and the tenant."""
    values: dict[str, Any] = {}
    for index, (params, section) in enumerate(zip(sections, predicates, strict=True)):
        if section.written_sizes is None:
            values[f"pool_{index}"] = params.pool
            values[f"limit_{index}"] = params.limit
            values[f"vector_pool_{index}"] = params.vector_candidates
        values[f"owner_keys_{index}"] = [owner.key for owner in params.filter.owners]
    values.update((name, getattr(sections[0], name)) for name, _ in RANKING_PARAMETERS)
    if any(section.graphs for section in predicates):
        values["walk_scanned"] = sections[0].walk_scanned
    values["tenant_id"] = tenant_id
    return values


def hybrid_search_statement(tenant_id: str, params: SearchParams) -> TextualSelect:
    """`HYBRID_SEARCH_SQL` for these parameters, every value bound."""
    return sectioned_search_statement(tenant_id, [params])


def sectioned_search_statement(tenant_id: str, sections: Sequence[SearchParams]) -> TextualSelect:
    """`HYBRID_SEARCH_SQL` for several searches as one statement; a row's `section` column is
    the index of the search it answers, with the rank it has there (`section_rank`).

    The searches must differ only in their filter, pool and limit, and their filters must
    select disjoint memories (a memory is a candidate of one section at most)."""
    return _sectioned_statement(tenant_id, sections, _section_predicates(tenant_id, sections))


_SIZE_TYPE = Integer()
_SQL_TYPES: dict[str, TypeEngine[Any]] = dict(RANKING_PARAMETERS) | {"tenant_id": Text()}
_OWNER_KEYS_TYPE = ARRAY(Text())


def _sectioned_statement(
    tenant_id: str,
    sections: Sequence[SearchParams],
    predicates: Sequence[SectionPredicates],
) -> TextualSelect:
    binds = [
        bindparam(
            name,
            value,
            type_=_OWNER_KEYS_TYPE
            if name.startswith("owner_keys_")
            else _SQL_TYPES.get(name, _SIZE_TYPE),
        )
        for name, value in _bound_values(tenant_id, sections, predicates).items()
    ]
    return (
        text(_search_template(_shapes(sections, predicates), sections[0].vector_column))
        .bindparams(*_binds(predicates), *binds)
        .columns(embedding=BYTEA())
    )


def compiled_search(
    tenant_id: str,
    sections: Sequence[SearchParams],
    dialect: Dialect,
    *,
    written_owners: Mapping[int, Collection[str]] | None = None,
) -> tuple[DriverStatement, tuple[Any, ...]]:
    """The driver SQL of `sectioned_search_statement` for these sections, compiled once per
    filter shape, and its positional arguments; the owners of the sections keyed in
    `written_owners` are written into the text (see `SectionShape.owners_written`) with the
    indexes of their own it names (`kind:owner key`), so it is compiled once per filter shape,
    owner and set of indexes for those. The owners not written in sort their nearest vectors
    exactly (see `_search_template`).

    A search is the service's hottest statement; building and compiling a `TextualSelect` per
    request (and SQLAlchemy's cache-key work for a 7 KB text) cost more CPU than executing it.
    """
    predicates = _section_predicates(tenant_id, sections, written_owners)
    template = _search_template(_shapes(sections, predicates), sections[0].vector_column)
    compiled = compiled_once(
        template, dialect, lambda: _sectioned_statement(tenant_id, sections, predicates)
    )
    values = {bind.key: bind.value for bind in _binds(predicates)}
    values.update(_bound_values(tenant_id, sections, predicates))
    return compiled, compiled.arguments(values)


_SEARCHED_OWNER_KEYS = render(SEARCHED_OWNER_KEYS_SQL, org_key=f"'{Owner.org().key}'")
_OWNER_DOCUMENTS = render(OWNER_DOCUMENTS_SQL, owner_keys=_SEARCHED_OWNER_KEYS)


def owners_searched(
    tenant_id: str,
    user: Owner | None,
    column: VectorColumn,
    dialect: Dialect,
    plan_settings: Mapping[str, str] | None = None,
) -> tuple[DriverStatement, tuple[Any, ...]]:
    """The driver SQL of `OWNERS_SEARCHED_SQL` for the owners a search of `user` (None: of the
    organization alone) may read and the column it reads, setting `plan_settings` (name: value)
    for the rest of the transaction, and its positional arguments: one row, `documents`
    (`(owner key, documents)` records, an owner without statistics left out) and
    `owner_indexes` (`kind:owner key`)."""
    sql = _owners_searched_sql(column, tuple((plan_settings or {}).items()))
    return _compiled_of_owners(sql, dialect, tenant_id, user)


@lru_cache(maxsize=16)
def _owners_searched_sql(column: VectorColumn, plan_settings: tuple[tuple[str, str], ...]) -> str:
    settings = "".join(
        f"set_config('{name}', '{value}', true) AS \"{name}\",\n       "
        for name, value in plan_settings
    )
    return render(
        OWNERS_SEARCHED_SQL,
        plan_settings=settings,
        owner_documents=_OWNER_DOCUMENTS,
        owner_indexes=_owner_indexes(column),
    )


def owner_documents_of(
    tenant_id: str, user: Owner | None, dialect: Dialect
) -> tuple[DriverStatement, tuple[Any, ...]]:
    """The driver SQL of `OWNER_DOCUMENTS_SQL` for the owners a search of `user` may read, and
    its positional arguments, for a server that distributes queries (see
    `OWNERS_SEARCHED_SQL`): a row per owner with statistics."""
    return _compiled_of_owners(_OWNER_DOCUMENTS, dialect, tenant_id, user)


def owner_indexes_of(
    tenant_id: str, user: Owner | None, column: VectorColumn, dialect: Dialect
) -> tuple[DriverStatement, tuple[Any, ...]]:
    """The driver SQL of `OWNER_INDEXES_OF_SQL` for the owners a search of `user` may read and
    the column it reads, and its positional arguments: one row, their own indexes as `kind:owner
    key`."""
    return _compiled_of_owners(_owner_indexes_of_sql(column), dialect, tenant_id, user)


@lru_cache(maxsize=16)
def _owner_indexes_of_sql(column: VectorColumn) -> str:
    return render(OWNER_INDEXES_OF_SQL, owner_indexes=_owner_indexes(column))


def _owner_indexes(column: VectorColumn) -> str:
    return render(OWNER_INDEXES_SQL, owner_keys=_SEARCHED_OWNER_KEYS, **vector_fragments(column))


def _compiled_of_owners(
    sql: str, dialect: Dialect, tenant_id: str, user: Owner | None
) -> tuple[DriverStatement, tuple[Any, ...]]:
    """A statement about a search's owners (`:tenant_id`, `:user_key`), compiled once."""
    compiled = compiled_once(
        sql,
        dialect,
        lambda: text(sql).bindparams(
            bindparam("user_key", type_=Text()), bindparam("tenant_id", type_=Text())
        ),
    )
    user_key = None if user is None else user.key
    return compiled, compiled.arguments({"user_key": user_key, "tenant_id": tenant_id})
