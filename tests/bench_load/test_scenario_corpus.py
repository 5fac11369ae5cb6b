"""The realistic scenario's corpus: memories in the write path's style, owners that are a
minority of their database, natural variety and no near-duplicates, the same for the same seed."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli import DATASET_ENV, DEFAULT_DATASET
from benchmarks.corpus import Corpus, CorpusShape, build_pool
from benchmarks.datasets import load_dataset
from benchmarks.scenario import build_size
from benchmarks.scenario_corpus import (
    FIRST_NAMES,
    GENERIC,
    SOURCE_QUESTION,
    ScenarioShape,
    SourceText,
    build_organization,
    build_user,
    dedupe_key,
    distinct_token_ratio,
    first_person_clause,
    sample_questions,
    team_clause,
)
from service.config import Settings
from service.kit.secrets import find_secret
from service.memories.schemas import MemoryCreate
from tests.bench_load.chats import SESSIONS, write_chats

# Where the benchmark itself looks for LoCoMo: the real conversations, when they are there.
LOCOMO = Path(os.environ.get(DATASET_ENV) or DEFAULT_DATASET)
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> SourceText:
    path = write_chats(tmp_path_factory.mktemp("chats") / "chats.json")
    return SourceText(load_dataset(path, "locomo", image_captions=False))


def test_first_person_sentences_become_facts_about_the_user() -> None:
    loves = first_person_clause("I love walking my dog along the canal.", 0)
    needs = first_person_clause("Honestly, I need to finish my thesis before August!", 1)
    adverb = first_person_clause("I really enjoy baking bread for my neighbours.", 2)

    assert (
        loves is not None
        and f"User {loves.text}." == "User loves walking their dog along the canal."
    )
    assert loves.category == "preference"
    assert needs is not None and needs.text == "needs to finish their thesis before August"
    assert adverb is not None and adverb.text == "really enjoys baking bread for their neighbours"
    assert first_person_clause("Do I need a ticket?", 3) is None
    assert first_person_clause("The weather was lovely.", 4) is None
    team = team_clause("We always say that tests should fail first.", 5)
    assert team is not None and team.text == "always says that tests should fail first"
    assert team.category == "policy"


def test_every_kind_of_memory_has_the_write_paths_style(source: SourceText) -> None:
    owner = build_user(source, "t-1", "u-1", 200, seed=3)
    organization = build_organization(source, "t-1", 25, seed=3)
    settings = Settings(_env_file=None)

    assert len(owner.rows) == 200 and len(organization.rows) == 25
    by_category = {row.category for row in owner.rows}
    assert {"episode", "turn"} <= by_category
    for row in owner.rows:
        assert row.tenant_id == "t-1" and row.user_id == "u-1"
        if row.kind == "semantic":
            assert row.text.startswith("User ") and row.text.endswith(".")
            assert row.category in settings.extraction_category_modes
            assert row.lifecycle == ("proposed" if row.confidence < 0.82 else "confirmed")
        elif row.category == "episode":
            assert row.kind == "episodic" and row.text.startswith("User shared: ")
            assert row.event_at is not None
        else:
            assert row.kind == "episodic" and row.category == "turn"
            assert row.speaker is not None and row.text.startswith(f"{row.speaker}: ")
            assert row.source_thread_id is not None and row.event_at is not None
        assert find_secret(row.text) is None
        MemoryCreate.model_validate(
            {
                "kind": row.kind,
                "category": row.category,
                "text": row.text,
                "confidence": row.confidence,
                "lifecycle": row.lifecycle,
                "speaker": row.speaker,
                "source_thread_id": row.source_thread_id,
                "event_at": row.event_at,
            }
        )
    shares = {
        kind: sum(1 for r in owner.rows if r.category == kind) for kind in ("episode", "turn")
    }
    assert shares == {"episode": 50, "turn": 60}
    for row in organization.rows:
        assert row.user_id is None and row.text.startswith("The team ")
        assert row.category in settings.extraction_org_categories


def test_turns_replay_sessions_in_order_under_new_names(source: SourceText) -> None:
    owner = build_user(source, "t-1", "u-1", 200, seed=3)
    turns = [row for row in owner.rows if row.category == "turn"]
    threads: dict[Any, list[Any]] = {}
    for row in turns:
        threads.setdefault(row.source_thread_id, []).append(row.event_at)
    original = {name for speakers, _, _ in SESSIONS.values() for name in speakers}

    assert len(threads) > 1
    assert all(times == sorted(times) for times in threads.values())
    assert {row.speaker for row in turns} <= set(FIRST_NAMES)
    assert not any(name in row.text for row in owner.rows for name in original)


def test_an_owner_never_repeats_itself_nor_stores_near_duplicates(source: SourceText) -> None:
    rows = build_user(source, "t-1", "u-1", 200, seed=6).rows
    token_sets = [frozenset(w.lower() for w in WORD.findall(row.text)) for row in rows]
    source_words = {w.lower() for sentence in source.sentences for w in WORD.findall(sentence)}
    used = set().union(*token_sets)

    assert len({dedupe_key(row.text) for row in rows}) == len(rows)
    assert len({row.id for row in rows}) == len(rows)
    # No two memories are the same words in another order or frame.
    for first, second in itertools.combinations(range(len(rows)), 2):
        assert token_sets[first] != token_sets[second], (rows[first].text, rows[second].text)
    # An owner speaks with the whole vocabulary of the chats, not a few templates' words.
    assert len(used & source_words) / len(source_words) > 0.9


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo is not beside the project")
def test_on_real_chats_an_owner_is_more_varied_than_the_templated_corpus() -> None:
    real = SourceText(load_dataset(LOCOMO, "locomo", image_captions=False))
    owner = build_user(real, "t-1", "u-1", 1000, seed=4)
    templated = Corpus(CorpusShape(1000, 1, 0, 4), build_pool(4096, 4)).user_rows(0)

    varied = distinct_token_ratio([row.text for row in owner.rows])
    assert varied > 2 * distinct_token_ratio([row.text for row in templated])


def test_the_owner_is_a_minority_among_other_users_and_tenants(source: SourceText) -> None:
    shape = ScenarioShape(seed=3, background_user_memories=30, users_per_tenant=2, org_per_tenant=4)

    owner, owners, tenants = build_size(source, shape, "120", 120)

    everyone = [row for o in owners for row in o.rows]
    assert owner is owners[0] and (owner.tenant_id, owner.user_id) == (
        "bench-real-120",
        "owner-120",
    )
    assert len(owner.rows) == 120 and len(everyone) == 120 + 20 + 8 * 30 + 2 * 4
    assert len(owner.rows) < len(everyone) / 2
    organization = [row for row in everyone if row.user_id is None]
    assert {row.tenant_id for row in organization} == set(tenants)
    assert sum(1 for row in organization if row.tenant_id == owner.tenant_id) == 20
    neighbours = {o.user_id for o in owners if o.tenant_id == owner.tenant_id and o.user_id}
    assert len(neighbours) == 1 + shape.neighbours
    assert len(tenants) == 3 and tenants[0] == owner.tenant_id
    # Every owner speaks differently.
    texts = [{row.text for row in o.rows} for o in owners if o.user_id is not None]
    assert all(len(a & b) < len(a) / 2 for a, b in itertools.combinations(texts, 2))


def test_the_first_size_brings_the_small_tenants_and_no_other_size_does(
    source: SourceText,
) -> None:
    shape = ScenarioShape(
        seed=3,
        background_user_memories=30,
        users_per_tenant=2,
        org_per_tenant=4,
        small_tenants=6,
        small_tenant_users=2,
        small_tenant_user_memories=12,
        small_tenant_org_memories=3,
    )

    _, first_owners, first_tenants = build_size(source, shape, "60", 60, first=True)
    _, later_owners, later_tenants = build_size(source, shape, "120", 120)

    small = [t for t in first_tenants if t.startswith("bench-small-")]
    assert len(small) == 6 and len(set(small)) == 6
    assert not any(t.startswith("bench-small-") for t in later_tenants)
    for tenant in small:
        users = [o for o in first_owners if o.tenant_id == tenant and o.user_id is not None]
        organization = [o for o in first_owners if o.tenant_id == tenant and o.user_id is None]
        assert [len(o.rows) for o in users] == [12, 12]
        assert [len(o.rows) for o in organization] == [3]
    everyone = sum(len(o.rows) for o in first_owners)
    assert everyone == 60 + 20 + 4 * 30 + 6 * (2 * 12 + 3)
    assert len(later_owners) == len(build_size(source, shape, "120", 120)[1])


def test_the_same_seed_gives_the_same_owner_and_another_seed_does_not(source: SourceText) -> None:
    first = build_user(source, "t-1", "u-1", 150, seed=7)
    again = build_user(source, "t-1", "u-1", 150, seed=7)
    other = build_user(source, "t-1", "u-1", 150, seed=8)

    assert first == again
    assert sample_questions(first, 20, 7) == sample_questions(again, 20, 7)
    assert [row.text for row in first.rows] != [row.text for row in other.rows]


def test_questions_mix_common_words_with_specific_ones_and_name_their_targets(
    source: SourceText,
) -> None:
    owner = build_user(source, "t-1", "u-1", 200, seed=3)
    ids = {row.id for row in owner.rows}

    questions = sample_questions(owner, 20, seed=3)

    assert len(questions) == 20 and len({q.text for q in questions}) == 20
    kinds = {q.kind for q in questions}
    assert {GENERIC, SOURCE_QUESTION, "fact"} <= kinds
    for question in questions:
        assert question.text.endswith("?")
        if question.kind == GENERIC:
            assert question.targets == () and "the user" in question.text
        else:
            assert question.targets and set(question.targets) <= ids
        if question.kind in {"fact", "episode"}:
            assert question.text.startswith(
                ("What does the user", "Does the user", "When did the user", "What did the user")
            )
    fresh = sample_questions(owner, 20, seed=3, salt="fresh")
    assert {q.text for q in fresh} != {q.text for q in questions}


def test_a_source_without_first_person_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "flat.json"
    path.write_text(
        '[{"sample_id": "x", "qa": [], "conversation": {"speaker_a": "A", "speaker_b": "B",'
        ' "session_1_date_time": "1:00 pm on 1 May, 2023",'
        ' "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "Nice weather today."}]}}]'
    )

    with pytest.raises(ValueError, match="too little text"):
        SourceText(load_dataset(path, "locomo", image_captions=False))


def test_a_memory_of_one_unit_is_embedded_as_itself(source: SourceText) -> None:
    owner = build_user(source, "t-1", "u-1", 200, seed=3)
    organization = build_organization(source, "t-1", 25, seed=3)
    rows = [*owner.rows, *organization.rows]
    single = [row for row in rows if row.category != "turn" and len(row.pool) == 1]
    paired = [row for row in rows if row.category != "turn" and len(row.pool) == 2]

    assert single and paired
    assert all(source.pool[row.pool[0]] == row.text for row in single)
    # A pair's vector sums its two units', each a memory of its own form.
    for row in paired:
        first, second = (source.pool[n] for n in row.pool)
        assert first.split(" ", 1)[0] == second.split(" ", 1)[0] == row.text.split(" ", 1)[0]
    # A turn said as it was is embedded as said by "Someone": the same words, names aside.
    turns = [row for row in owner.rows if row.category == "turn" and len(row.pool) == 1]
    assert turns
    for row in turns:
        pooled = source.pool[row.pool[0]]
        assert pooled.startswith("Someone: ")
        assert len(pooled.split()) == len(row.text.split())
