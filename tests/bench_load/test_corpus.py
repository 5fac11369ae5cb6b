"""The synthetic corpus: deterministic, realistic enough for the service to accept, and shaped
as asked (N tenants x M users x K memories)."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from benchmarks.bulk import vector_payloads
from benchmarks.corpus import (
    DETAIL_SLOTS,
    TEMPLATES,
    Corpus,
    CorpusShape,
    build_pool,
    noisy_vectors,
    sample_queries,
)
from benchmarks.load import parse_concurrency, parse_sizes, size_label
from service.kit.secrets import find_secret
from service.memories.schemas import MemoryCreate

SHAPE = CorpusShape(memories_per_user=40, users_per_tenant=3, org_memories_per_tenant=5, seed=7)


def corpus(seed: int = 7) -> Corpus:
    return Corpus(CorpusShape(40, 3, 5, seed), build_pool(200, seed))


def test_the_same_seed_gives_the_same_rows_and_another_seed_does_not() -> None:
    first, again, other = corpus(), corpus(), corpus(seed=8)

    assert [p.text for p in first.pool] == [p.text for p in again.pool]
    assert first.user_rows(4) == again.user_rows(4)
    assert first.org_rows(1) == again.org_rows(1)
    assert [r.text for r in first.user_rows(4)] != [r.text for r in other.user_rows(4)]


def test_users_belong_to_tenants_in_order_and_sizes_count_their_memories() -> None:
    rows = corpus().user_rows(7)

    assert {row.tenant_id for row in rows} == {SHAPE.tenant_id(2)}
    assert {row.user_id for row in rows} == {SHAPE.user_id(7)}
    assert SHAPE.users_for(400) == 10
    assert SHAPE.tenants_for(10) == 4
    assert SHAPE.total_rows(400) == 400 + 4 * 5
    with pytest.raises(ValueError, match="not a multiple"):
        SHAPE.users_for(410)


def test_one_owners_memories_never_repeat_a_text() -> None:
    generated = corpus()
    for rows in (generated.user_rows(0), generated.user_rows(11), generated.org_rows(0)):
        # The service's duplicate key: whitespace-collapsed, case-folded text.
        keys = {re.sub(r"\s+", " ", row.text.strip().lower()) for row in rows}
        assert len(keys) == len(rows)


def test_every_generated_memory_is_one_the_api_would_accept() -> None:
    generated = corpus()
    rows = [row for user in range(6) for row in generated.user_rows(user)]
    for row in rows:
        assert find_secret(row.text) is None, row.text
        MemoryCreate.model_validate(
            {
                "kind": row.kind,
                "category": row.category,
                "text": row.text,
                "confidence": row.confidence,
                "lifecycle": row.lifecycle,
                "event_at": row.event_at,
            }
        )
    assert {row.kind for row in rows} == {"semantic", "episodic", "procedural"}
    assert all((row.event_at is not None) == (row.kind == "episodic") for row in rows)
    assert {row.lifecycle for row in rows} == {"proposed", "confirmed"}


def test_questions_name_only_what_the_memory_is_about() -> None:
    for template in TEMPLATES:
        slots = set(re.findall(r"{(\w+)}", template.text))
        for question in template.questions:
            asked = set(re.findall(r"{(\w+)}", question))
            assert asked <= slots - DETAIL_SLOTS, (template.text, question)

    queries = list(sample_queries(corpus(), users=6, count=20, seed=7))
    assert len(queries) == 20
    for tenant_id, user_id, question, row in queries:
        assert row.tenant_id == tenant_id and row.user_id == user_id
        assert "{" not in question and question.endswith("?")


def test_row_vectors_are_unit_length_near_their_pool_vector_and_independent_of_batching() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal((50, 384)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)

    vectors = noisy_vectors(base, 0.4, "user-3", seed=7)

    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * base, axis=1)
    assert abs(float(cosines.mean()) - 1 / np.sqrt(1 + 0.4**2)) < 0.01
    assert np.array_equal(vectors, noisy_vectors(base, 0.4, "user-3", seed=7))
    assert not np.array_equal(vectors, noisy_vectors(base, 0.4, "user-4", seed=7))


def test_vectors_go_to_copy_in_pgvectors_binary_format() -> None:
    vector = np.array([[0.5, -1.0, 2.0]], dtype=np.float32)

    [payload] = vector_payloads(vector)

    assert struct.unpack(">HH3f", payload) == (3, 0, 0.5, -1.0, 2.0)


def test_sizes_and_client_counts_read_as_the_command_line_spells_them() -> None:
    assert parse_sizes("1m, 10k,100k,10k") == (10_000, 100_000, 1_000_000)
    assert parse_sizes("2500,0.5k") == (500, 2_500)
    assert [size_label(size) for size in (10_000, 1_000_000, 2_500)] == ["10k", "1m", "2500"]
    assert parse_concurrency("32,1,8") == (1, 8, 32)
    for bad in ("", "ten", "-1k", "1.5"):
        with pytest.raises(ValueError, match="corpus size"):
            parse_sizes(bad)
    with pytest.raises(ValueError, match="positive"):
        parse_concurrency("0,4")


def test_a_pool_smaller_than_one_users_memories_is_refused() -> None:
    with pytest.raises(ValueError, match="distinct memories"):
        Corpus(CorpusShape(300, 1, 0, 1), build_pool(200, 1))


def test_a_heavy_user_gets_more_memories_than_the_pool_has_sentences_none_repeated() -> None:
    generated = corpus()
    rows = generated.heavy_user_rows("bench-heavy", "user-heavy", 1000)

    assert len(rows) == 1000 > len(generated.pool)
    assert {(row.tenant_id, row.user_id) for row in rows} == {("bench-heavy", "user-heavy")}
    keys = {re.sub(r"\s+", " ", row.text.strip().lower()) for row in rows}
    assert len(keys) == len(rows)
    assert len({row.id for row in rows}) == len(rows)
    assert rows == corpus().heavy_user_rows("bench-heavy", "user-heavy", 1000)
