"""The deterministic resolver, apart from the LLM: validation, confidence, duplicates, combine
modes, supersession, removal and org permissions."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest

from service.config import Settings
from service.extraction.pipeline import resolver_rules
from service.extraction.resolver import (
    Candidate,
    Dropped,
    EarlierSupersession,
    Known,
    KnownFact,
    ProfileChange,
    ProfileProposalIn,
    Reconfirmation,
    ResolverRules,
    Supersession,
    resolve,
    resolve_episode,
    resolve_profile,
)

RULES = ResolverRules(
    min_confidence=0.7,
    quarantine_confidence=0.82,
    near_duplicate_cosine=0.92,
    max_facts=3,
    category_modes={
        "preference": "replace",
        "knowledge": "merge",
        "context": "accumulate",
        "policy": "replace",
    },
    org_categories=frozenset({"policy", "knowledge"}),
)
USER = "alice"


def fact(
    text: str,
    category: str | None = "preference",
    *,
    subject: str | None = None,
    scope: str = "user",
    user_id: str | None = USER,
    lifecycle: str = "confirmed",
) -> KnownFact:
    return KnownFact(
        id=uuid.uuid4(),
        scope=scope,
        user_id=None if scope == "org" else user_id,
        category=category,
        subject=subject,
        text=text,
        lifecycle=lifecycle,
    )


def candidate(text: str, index: int = 0, **overrides: Any) -> Candidate:
    values: dict[str, Any] = {
        "index": index,
        "text": text,
        "category": "preference",
        "subject": None,
        "scope": "user",
        "confidence": 0.95,
        "evidence": "",
        "supersedes": (),
    }
    values.update(overrides)
    return Candidate(**values)


def known(
    *facts: KnownFact,
    org_writes: bool = False,
    cosine: dict[Any, float] | None = None,
    between: dict[tuple[int, int], float] | None = None,
) -> Known:
    return Known(
        user_id=USER,
        org_writes=org_writes,
        facts={f.id: f for f in facts},
        cosine=cosine or {},
        between=between or {},
    )


def test_new_facts_on_an_empty_profile_are_confirmed_quarantined_or_dropped_by_confidence() -> None:
    result = resolve(
        [
            candidate("User works on fraud detection.", 0, category="knowledge", confidence=0.9),
            candidate("User might like jazz.", 1, category="context", confidence=0.75),
            candidate("User may live in Berlin.", 2, category="context", confidence=0.5),
        ],
        [],
        known(),
        RULES,
    )
    assert [(n.candidate.index, n.lifecycle, n.needs_review) for n in result.new_facts] == [
        (0, "confirmed", False),
        (1, "proposed", True),
    ]
    assert result.dropped == [Dropped("low_confidence", 2)]
    assert result.reconfirmations == [] and result.removals == []


def test_the_quarantine_edges_are_inclusive_of_the_thresholds() -> None:
    result = resolve(
        [
            candidate("User rides a bike.", 0, category="context", confidence=0.82),
            candidate("User owns a cat.", 1, category="context", confidence=0.7),
            candidate("User owns a dog.", 2, category="context", confidence=0.6999),
        ],
        [],
        known(),
        RULES,
    )
    assert [n.lifecycle for n in result.new_facts] == ["confirmed", "proposed"]
    assert result.dropped == [Dropped("low_confidence", 2)]


def test_an_explicit_supersede_replaces_the_users_own_fact() -> None:
    dark = fact("User wants the product UI in dark mode only.")
    result = resolve(
        [candidate("User wants light mode everywhere.", supersedes=(dark.id,))],
        [],
        known(dark),
        RULES,
    )
    [new] = result.new_facts
    assert new.supersedes == (Supersession(dark.id, "explicit"),)


def test_supersede_ids_of_facts_the_user_does_not_own_are_ignored() -> None:
    bobs = fact("Bob likes tea.", user_id="bob")
    org = fact("Prices may change without notice.", "policy", scope="org")
    unknown = uuid.uuid4()
    result = resolve(
        [
            candidate(
                "User likes coffee.", category="context", supersedes=(bobs.id, org.id, unknown)
            )
        ],
        [],
        known(bobs, org, org_writes=True),
        RULES,
    )
    [new] = result.new_facts
    assert new.supersedes == ()
    assert {(d.reason, d.fact_id) for d in result.dropped} == {
        ("supersede_not_owned", bobs.id),
        ("supersede_not_owned", org.id),
        ("supersede_not_owned", unknown),
    }


def test_a_fact_supersedes_its_subject_and_in_a_replace_category_a_similar_unnamed_one() -> None:
    theme = fact("User prefers dark mode.", subject="ui_theme")
    legacy = fact("User wants the UI dark.")  # written through the API: no subject
    style = fact("User prefers terse answers.", subject="answer_style")
    elsewhere = fact("User lives in Berlin.", "context", subject="ui_theme")
    result = resolve(
        [candidate("User prefers light mode.", subject="ui_theme")],
        [],
        known(theme, legacy, style, elsewhere, cosine={(0, legacy.id): 0.8, (0, style.id): 0.8}),
        RULES,
    )
    [new] = result.new_facts
    assert set(new.supersedes) == {
        Supersession(theme.id, "subject"),
        Supersession(legacy.id, "similar"),
    }


def test_a_fact_without_a_subject_never_replaces_an_unrelated_fact_of_its_category() -> None:
    tea, metric = fact("User prefers tea.", subject="drink"), fact("User likes metric units.")
    dissimilar = known(tea, metric, cosine={(0, tea.id): 0.31, (0, metric.id): 0.32})
    result = resolve([candidate("User prefers dark mode.")], [], dissimilar, RULES)
    assert result.new_facts[0].supersedes == ()
    unknown_similarity = resolve([candidate("User prefers dark mode.")], [], known(metric), RULES)
    assert unknown_similarity.new_facts[0].supersedes == ()


def test_the_same_subject_supersedes_in_every_mode_unless_the_subject_is_multi_valued() -> None:
    rules = replace(RULES, multi_valued_subjects=frozenset({"pet", "hobby"}))
    python = fact("User knows Python.", "knowledge", subject="python")
    anonymous = fact("User knows SQL.", "knowledge")
    lisbon = fact("User lives in Lisbon.", "context", subject="home_city")
    dog = fact("User has a dog named Rex.", "context", subject="pets")
    hiking = fact("User likes hiking.", "preference", subject="hobby")
    result = resolve(
        [
            candidate("User knows Python and Rust.", 0, category="knowledge", subject="python"),
            candidate("User lives in Porto.", 1, category="context", subject="home_city"),
            candidate("User has a cat named Tom.", 2, category="context", subject="pet"),
            candidate("User likes painting.", 3, subject="hobbies"),
        ],
        [],
        known(python, anonymous, lisbon, dog, hiking, cosine={(3, hiking.id): 0.9}),
        replace(rules, max_facts=4),
    )
    merged, moved, cat, painting = result.new_facts
    assert merged.supersedes == (Supersession(python.id, "subject"),)
    assert moved.supersedes == (Supersession(lisbon.id, "subject"),)
    assert cat.supersedes == () and painting.supersedes == ()


DEFAULTS = Settings(_env_file=None)


@pytest.mark.parametrize(
    ("subject", "multi_valued"),
    [
        ("language", True),
        ("languages_spoken", True),
        ("spoken_language", True),
        ("programming_languages", True),
        ("preferred_languages", True),
        ("food_allergy", True),
        ("pet_name", True),
        ("children", True),
        ("response_language", False),
        ("preferred_language", False),
        ("ui_language", False),
        ("favorite_instrument", False),
        ("preferred_sport_team", False),
        ("home_city", False),
    ],
)
def test_a_subject_naming_one_choice_of_a_multi_valued_topic_is_single_valued(
    subject: str, multi_valued: bool
) -> None:
    rules = resolver_rules(DEFAULTS, 1)
    assert rules.multi_valued(subject) is multi_valued
    old = fact("User's value is one.", subject=subject)
    result = resolve([candidate("User's value is two.", subject=subject)], [], known(old), rules)
    assert result.new_facts[0].supersedes == (
        () if multi_valued else (Supersession(old.id, "subject"),)
    )


def test_subject_less_facts_of_merge_and_accumulate_categories_add_up() -> None:
    sql = fact("User knows SQL.", "knowledge")
    team = fact("User's team is fraud-ops.", "context")
    result = resolve(
        [
            candidate("User knows Postgres.", 0, category="knowledge"),
            candidate("User's manager is Ana.", 1, category="context"),
        ],
        [],
        known(sql, team, cosine={(0, sql.id): 0.85, (1, team.id): 0.85}),
        RULES,
    )
    assert [n.supersedes for n in result.new_facts] == [(), ()]


def test_a_deliberate_fact_is_only_flagged_on_weak_evidence() -> None:
    metric = replace(fact("User prefers metric units."), deliberate=True)
    similar = known(metric, cosine={(0, metric.id): 0.82})
    by_similarity = resolve([candidate("User prefers imperial units.")], [], similar, RULES)
    by_name_only = resolve(
        [candidate("User prefers dark mode.", supersedes=(metric.id,))],
        [],
        known(metric, cosine={(0, metric.id): 0.3}),
        RULES,
    )
    for result in (by_similarity, by_name_only):
        [new] = result.new_facts
        assert (new.lifecycle, new.flagged, new.supersedes) == ("proposed", True, ())
        assert new.proposed_supersedes == (metric.id,)
        assert result.flagged == [metric.id]
    removed = resolve([], [metric.id], known(metric), RULES)
    assert (removed.removals, removed.flagged) == ([], [metric.id])


def test_a_flagged_fact_said_again_is_reconfirmed_and_still_waits_for_the_user() -> None:
    metric = replace(fact("User prefers metric units."), deliberate=True)
    imperial = replace(fact("User prefers imperial units.", lifecycle="proposed"), flagged=True)
    stored = resolve(
        [candidate("User prefers imperial units.")],
        [],
        known(metric, imperial, cosine={(0, metric.id): 0.82, (0, imperial.id): 1.0}),
        RULES,
    )
    [again] = stored.reconfirmations
    assert (again.fact_id, again.promote) == (imperial.id, False)
    in_one_pass = resolve(
        [
            candidate("User prefers imperial units.", 0, said_at=1),
            candidate("User prefers imperial units.", 1, said_at=2),
        ],
        [],
        known(metric, cosine={(0, metric.id): 0.82, (1, metric.id): 0.82}, between={(0, 1): 1.0}),
        RULES,
    )
    [new] = in_one_pass.new_facts
    assert (new.lifecycle, new.flagged, new.proposed_supersedes) == (
        "proposed",
        True,
        (metric.id,),
    )


def test_a_deliberate_fact_falls_to_its_subject_or_to_being_named_and_similar() -> None:
    metric = replace(fact("User prefers metric units."), deliberate=True)
    named = resolve(
        [candidate("User prefers imperial units.", supersedes=(metric.id,))],
        [],
        known(metric, cosine={(0, metric.id): 0.82}),
        RULES,
    )
    [new] = named.new_facts
    assert (new.lifecycle, new.supersedes) == ("confirmed", (Supersession(metric.id, "explicit"),))
    labelled = replace(metric, subject="units")
    same_subject = resolve(
        [candidate("User prefers imperial units.", subject="units")], [], known(labelled), RULES
    )
    assert same_subject.new_facts[0].supersedes == (Supersession(metric.id, "subject"),)
    assert named.flagged == same_subject.flagged == []


def test_quarantined_facts_supersede_nothing_but_keep_their_targets_for_review() -> None:
    dark = fact("User prefers dark mode.", subject="ui_theme")
    result = resolve(
        [
            candidate(
                "User prefers light mode.",
                subject="ui_theme",
                confidence=0.75,
                supersedes=(dark.id,),
            )
        ],
        [],
        known(dark),
        RULES,
    )
    [new] = result.new_facts
    assert (new.lifecycle, new.supersedes, new.proposed_supersedes) == (
        "proposed",
        (),
        (dark.id,),
    )


def test_an_exact_duplicate_reconfirms_and_a_confident_one_confirms_a_proposed_fact() -> None:
    confirmed = fact("User prefers dark mode.")
    proposed = fact("User likes jazz.", "context", lifecycle="proposed")
    result = resolve(
        [
            candidate("  user prefers   DARK mode. ", 0),
            candidate("User likes jazz.", 1, category="context", confidence=0.9),
        ],
        [],
        known(confirmed, proposed),
        RULES,
    )
    assert result.new_facts == []
    assert result.reconfirmations == [
        Reconfirmation(confirmed.id, 0, promote=False, confidence=0.95, cosine=None),
        Reconfirmation(proposed.id, 1, promote=True, confidence=0.9, cosine=None),
    ]


def test_a_near_duplicate_by_cosine_is_no_new_fact_unless_explicitly_replaced() -> None:
    dark = fact("User prefers dark mode.", subject="ui_theme")
    near = {(0, dark.id): 0.95}
    result = resolve([candidate("The user likes dark mode.")], [], known(dark, cosine=near), RULES)
    assert result.new_facts == []
    assert result.reconfirmations == [Reconfirmation(dark.id, 0, False, 0.95, 0.95)]

    below = {(0, dark.id): 0.91}
    result = resolve(
        [candidate("User prefers light mode.", subject="ui_theme")],
        [],
        known(dark, cosine=below),
        RULES,
    )
    assert result.new_facts[0].supersedes == (Supersession(dark.id, "subject"),)

    replaced = resolve(
        [candidate("The user likes dark mode.", supersedes=(dark.id,))],
        [],
        known(dark, cosine=near),
        RULES,
    )
    assert replaced.reconfirmations == []
    assert replaced.new_facts[0].supersedes == (Supersession(dark.id, "explicit"),)


def test_a_similar_fact_with_a_new_value_for_the_same_subject_is_a_change_not_a_repeat() -> None:
    half = fact("User is training for a half marathon.", "knowledge", subject="running_goal")
    near = known(half, cosine={(0, half.id): 0.95})
    changed = resolve(
        [
            candidate(
                "User is training for a full marathon.",
                category="knowledge",
                subject="running_goal",
            )
        ],
        [],
        near,
        RULES,
    )
    assert changed.reconfirmations == []
    assert changed.new_facts[0].supersedes == (Supersession(half.id, "subject"),)
    repeated = resolve(
        [
            candidate(
                "The user is training for a half marathon.",
                category="knowledge",
                subject="running_goal",
            )
        ],
        [],
        near,
        RULES,
    )
    assert [r.fact_id for r in repeated.reconfirmations] == [half.id]


def test_at_most_max_facts_are_accepted_most_confident_first() -> None:
    candidates = [
        candidate(f"User fact number {n}.", n, category="context", confidence=0.8 + n / 100)
        for n in range(5)
    ]
    result = resolve(candidates, [], known(), RULES)
    assert [n.candidate.index for n in result.new_facts] == [4, 3, 2]
    assert sorted(d.candidate_index or 0 for d in result.dropped) == [0, 1]
    assert {d.reason for d in result.dropped} == {"over_limit"}


@pytest.mark.parametrize(
    ("text", "evidence", "reason"),
    [
        ("   ", "", "empty"),
        ("x" * 4001, "", "too_long"),
        ("User's API key is sk-abcdefghijklmnopqrstuvwx", "", "secret"),
        ("User's card is on file.", "my card is 4111 1111 1111 1111", "secret"),
        ("User's SSN is 123-45-6789.", "", "secret"),
        # What the model read masked: the placeholder says nothing worth remembering.
        ("User's card number is [secret removed].", "my card is [secret removed]", "secret"),
        ("User's password is [Secret Removed].", "", "secret"),
    ],
)
def test_candidates_the_api_would_refuse_are_dropped(text: str, evidence: str, reason: str) -> None:
    result = resolve([candidate(text, category="context", evidence=evidence)], [], known(), RULES)
    assert result.new_facts == []
    assert result.dropped == [Dropped(reason, 0)]


@pytest.mark.parametrize("confidence", [1e-300, 5e-324, -0.1, 1.5, float("nan"), float("inf")])
def test_a_confidence_the_api_would_refuse_is_dropped_even_with_no_threshold(
    confidence: float,
) -> None:
    anything_goes = replace(RULES, min_confidence=0.0)
    result = resolve(
        [candidate("User likes tea.", confidence=confidence)], [], known(), anything_goes
    )
    assert result.new_facts == []
    assert result.dropped == [Dropped("invalid_confidence", 0)]


def test_org_facts_need_the_appending_principals_admin_flag_and_an_org_category() -> None:
    policy = candidate(
        "Pricing answers end with 'Prices may change.'", scope="org", category="policy"
    )
    refused = resolve([policy], [], known(org_writes=False), RULES)
    assert refused.new_facts == [] and refused.dropped == [Dropped("org_not_allowed", 0)]

    allowed = resolve([policy], [], known(org_writes=True), RULES)
    assert allowed.new_facts[0].candidate.scope == "org"

    wrong_category = resolve(
        [candidate("Everyone likes tea.", scope="org", category="preference")],
        [],
        known(org_writes=True),
        RULES,
    )
    assert wrong_category.dropped == [Dropped("org_category", 0)]


def test_an_org_fact_replaces_org_facts_and_never_the_users_own() -> None:
    old_policy = fact("Prices are final.", "policy", scope="org", subject="pricing")
    user_policy = fact("User's own pricing note.", "policy", subject="pricing")
    result = resolve(
        [
            candidate(
                "Prices may change without notice.",
                scope="org",
                category="policy",
                subject="pricing",
            )
        ],
        [],
        known(old_policy, user_policy, org_writes=True),
        RULES,
    )
    assert result.new_facts[0].supersedes == (Supersession(old_policy.id, "subject"),)


def test_removals_are_honoured_only_for_what_the_user_owns() -> None:
    mine = fact("User is vegetarian.", "context")
    bobs = fact("Bob is vegan.", "context", user_id="bob")
    org = fact("Office closes at six.", "knowledge", scope="org")
    result = resolve([], [mine.id, bobs.id, org.id, mine.id], known(mine, bobs, org), RULES)
    assert result.removals == [mine.id]
    assert [(d.reason, d.fact_id) for d in result.dropped] == [
        ("remove_not_owned", bobs.id),
        ("remove_not_owned", org.id),
    ]
    with_admin = resolve([], [org.id], known(org, org_writes=True), RULES)
    assert with_admin.removals == [org.id]


def test_one_fact_is_decided_once_per_pass() -> None:
    dark = fact("User prefers dark mode.", subject="ui_theme")
    result = resolve(
        [
            candidate("User prefers light mode.", 0, subject="ui_theme", supersedes=(dark.id,)),
            candidate("User prefers dark mode.", 1, confidence=0.9),
            candidate("User prefers light mode.", 2, confidence=0.85),
        ],
        [dark.id],
        known(dark),
        RULES,
    )
    assert [n.candidate.index for n in result.new_facts] == [0]
    assert result.dropped == [
        Dropped("conflict", 1, dark.id),
        Dropped("duplicate_in_pass", 2),
        Dropped("remove_conflict", fact_id=dark.id),
    ]


def home(city: str, index: int, said_at: int, confidence: float = 0.95) -> Candidate:
    return candidate(
        f"User lives in {city}.",
        index,
        category="context",
        subject="home_city",
        confidence=confidence,
        said_at=said_at,
    )


def test_within_a_pass_the_later_message_decides_whatever_the_models_order_or_confidence() -> None:
    berlin = fact("User lives in Berlin.", "context", subject="home_city")
    result = resolve(
        [home("Porto", 0, said_at=6, confidence=0.85), home("Lisbon", 1, 0), home("Faro", 2, 2)],
        [],
        known(berlin),
        RULES,
    )
    lisbon, faro, porto = result.new_facts
    assert [n.candidate.index for n in result.new_facts] == [1, 2, 0]
    assert lisbon.supersedes == (Supersession(berlin.id, "subject"),)
    assert faro.supersedes_earlier == (EarlierSupersession(1, "subject"),)
    assert porto.supersedes_earlier == (EarlierSupersession(2, "subject"),)
    assert porto.supersedes == faro.supersedes == ()
    assert result.dropped == []


def test_a_fact_said_again_and_then_changed_in_one_pass_is_reconfirmed_then_superseded() -> None:
    lisbon = fact("User lives in Lisbon.", "context", subject="home_city")
    changed = resolve(
        [home("Lisbon", 0, said_at=0), home("Porto", 1, said_at=2, confidence=0.9)],
        [],
        known(lisbon),
        RULES,
    )
    assert [r.fact_id for r in changed.reconfirmations] == [lisbon.id]
    [porto] = changed.new_facts
    assert porto.supersedes == (Supersession(lisbon.id, "subject"),)

    # Said again after a change, the old value is current again: a new fact.
    back = resolve(
        [home("Porto", 0, said_at=0), home("Lisbon", 1, said_at=2)], [], known(lisbon), RULES
    )
    porto, again = back.new_facts
    assert porto.supersedes == (Supersession(lisbon.id, "subject"),)
    assert again.candidate.text == "User lives in Lisbon."
    assert again.supersedes_earlier == (EarlierSupersession(0, "subject"),)
    assert back.reconfirmations == [] and back.dropped == []


def test_within_one_message_the_most_confident_candidate_decides_a_topic() -> None:
    result = resolve(
        [home("Lisbon", 0, said_at=2, confidence=0.9), home("Porto", 1, said_at=2)],
        [],
        known(),
        RULES,
    )
    [porto] = result.new_facts
    assert (porto.candidate.index, porto.supersedes_earlier) == (1, ())
    assert result.dropped == [Dropped("conflict", 0)]


def test_candidates_of_a_replace_category_replace_similar_ones_said_before_them() -> None:
    result = resolve(
        [
            candidate("User prefers metric units.", 0, said_at=0),
            candidate("User prefers dark mode.", 1, said_at=0, confidence=0.9),
            candidate("User prefers imperial units.", 2, said_at=2),
        ],
        [],
        known(between={(0, 2): 0.82, (1, 2): 0.32}),
        RULES,
    )
    metric, dark, imperial = result.new_facts
    assert imperial.supersedes_earlier == (EarlierSupersession(0, "similar"),)
    assert metric.supersedes_earlier == dark.supersedes_earlier == ()


def test_a_confident_repeat_in_a_later_message_confirms_a_fact_the_pass_proposed() -> None:
    result = resolve(
        [
            candidate("User likes jazz.", 0, category="context", confidence=0.75, said_at=0),
            candidate("User likes jazz.", 1, category="context", confidence=0.95, said_at=2),
            candidate("User likes  JAZZ.", 2, category="context", confidence=0.9, said_at=4),
        ],
        [],
        known(),
        RULES,
    )
    [jazz] = result.new_facts
    assert (jazz.candidate.index, jazz.lifecycle, jazz.candidate.confidence) == (
        0,
        "confirmed",
        0.95,
    )
    assert result.dropped == [Dropped("duplicate_in_pass", 1), Dropped("duplicate_in_pass", 2)]


def test_a_confident_repeat_confirming_a_proposed_fact_replaces_what_it_names() -> None:
    lisbon = fact("User lives in Lisbon.", "context", subject="home_city")
    porto = replace(
        fact("User lives in Porto.", "context", subject="home_city", lifecycle="proposed"),
        proposed_supersedes=(lisbon.id,),
    )
    repeat = candidate("User lives in Porto.", category="context", subject="home_city")
    stored = resolve([repeat], [], known(lisbon, porto), RULES)
    assert stored.reconfirmations == [
        Reconfirmation(
            porto.id, 0, promote=True, confidence=0.95, cosine=None, supersedes=(lisbon.id,)
        )
    ]
    assert stored.new_facts == []
    # Within one pass: proposed for its low confidence, confirmed by a later message.
    in_one_pass = resolve(
        [
            replace(repeat, confidence=0.75, supersedes=(lisbon.id,), said_at=1),
            replace(repeat, index=1, said_at=3),
        ],
        [],
        known(lisbon),
        RULES,
    )
    [new] = in_one_pass.new_facts
    assert (new.lifecycle, new.proposed_supersedes) == ("confirmed", ())
    assert new.supersedes == (Supersession(lisbon.id, "confirmed"),)


def test_a_confident_repeat_leaves_a_deliberate_fact_to_the_user_on_weak_evidence() -> None:
    # The proposal named the deliberate fact: the model's word alone, said again with
    # confidence, is still no strong evidence against it.
    metric = replace(fact("User prefers metric units."), deliberate=True)
    dark = replace(
        fact("User prefers dark mode.", lifecycle="proposed"), proposed_supersedes=(metric.id,)
    )
    repeat = candidate("User prefers dark mode.")
    stored = resolve([repeat], [], known(metric, dark, cosine={(0, metric.id): 0.3}), RULES)
    [again] = stored.reconfirmations
    assert (again.fact_id, again.promote, again.supersedes) == (dark.id, False, ())
    assert stored.flagged == [metric.id]
    in_one_pass = resolve(
        [
            replace(repeat, confidence=0.75, supersedes=(metric.id,), said_at=1),
            replace(repeat, index=1, said_at=3),
        ],
        [],
        known(metric, cosine={(0, metric.id): 0.3, (1, metric.id): 0.3}),
        RULES,
    )
    [new] = in_one_pass.new_facts
    assert (new.lifecycle, new.supersedes, new.proposed_supersedes) == (
        "proposed",
        (),
        (metric.id,),
    )
    assert in_one_pass.flagged == [metric.id]
    # Its own subject key is strong evidence: confirmed, and the deliberate fact replaced.
    labelled = replace(metric, subject="units")
    light = replace(
        fact("User prefers imperial units.", subject="units", lifecycle="proposed"),
        proposed_supersedes=(metric.id,),
    )
    same_subject = resolve(
        [candidate("User prefers imperial units.", subject="units")],
        [],
        known(labelled, light),
        RULES,
    )
    [confirmed] = same_subject.reconfirmations
    assert (confirmed.promote, confirmed.supersedes) == (True, (metric.id,))
    assert same_subject.flagged == []


def test_a_proposal_naming_nothing_keeps_what_it_contradicts_for_whoever_confirms_it() -> None:
    lisbon = fact("User lives in Lisbon.", "context", subject="home_city")
    dark = fact("User prefers dark mode.")
    metric = fact("User prefers metric units.")
    result = resolve(
        [
            home("Porto", 0, said_at=0, confidence=0.75),
            candidate("User prefers light mode.", 1, confidence=0.75),
        ],
        [],
        known(lisbon, dark, metric, cosine={(1, dark.id): 0.8, (1, metric.id): 0.3}),
        RULES,
    )
    porto, light = result.new_facts
    assert (porto.lifecycle, porto.supersedes, porto.proposed_supersedes) == (
        "proposed",
        (),
        (lisbon.id,),
    )
    assert (light.lifecycle, light.supersedes, light.proposed_supersedes) == (
        "proposed",
        (),
        (dark.id,),
    )
    assert not porto.flagged and not light.flagged
    assert result.flagged == [] and result.reconfirmations == []


def test_a_proposal_against_a_deliberate_fact_waits_for_the_user_on_weak_evidence() -> None:
    metric = replace(fact("User prefers metric units."), deliberate=True)
    weak = resolve(
        [candidate("User prefers imperial units.", confidence=0.75)],
        [],
        known(metric, cosine={(0, metric.id): 0.82}),
        RULES,
    )
    [imperial] = weak.new_facts
    assert (imperial.lifecycle, imperial.flagged, imperial.proposed_supersedes) == (
        "proposed",
        True,
        (metric.id,),
    )
    assert weak.flagged == [metric.id]
    # Its own subject key is strong evidence: proposed for its low confidence alone.
    labelled = replace(metric, subject="units")
    strong = resolve(
        [candidate("User prefers imperial units.", subject="units", confidence=0.75)],
        [],
        known(labelled),
        RULES,
    )
    [imperial] = strong.new_facts
    assert (imperial.flagged, imperial.proposed_supersedes) == (False, (metric.id,))
    assert strong.flagged == []


def test_a_proposal_keeps_what_the_pass_wrote_before_it_and_a_later_repeat_replaces_it() -> None:
    proposed = resolve(
        [home("Lisbon", 0, said_at=0), home("Porto", 1, said_at=2, confidence=0.75)],
        [],
        known(),
        RULES,
    )
    lisbon, porto = proposed.new_facts
    assert lisbon.lifecycle == "confirmed"
    assert (porto.lifecycle, porto.supersedes_earlier, porto.proposed_supersedes_earlier) == (
        "proposed",
        (),
        (0,),
    )
    confirmed = resolve(
        [
            home("Lisbon", 0, said_at=0),
            home("Porto", 1, said_at=2, confidence=0.75),
            home("Porto", 2, said_at=4),
        ],
        [],
        known(),
        RULES,
    )
    lisbon, porto = confirmed.new_facts
    assert (porto.lifecycle, porto.proposed_supersedes_earlier) == ("confirmed", ())
    assert porto.supersedes_earlier == (EarlierSupersession(0, "confirmed"),)
    assert confirmed.dropped == [Dropped("duplicate_in_pass", 2)]


def test_a_proposal_keeps_what_a_more_confident_candidate_of_its_message_decided() -> None:
    lisbon = fact("User lives in Lisbon.", "context", subject="home_city")
    result = resolve(
        [home("Lisbon", 0, said_at=2), home("Porto", 1, said_at=2, confidence=0.75)],
        [],
        known(lisbon),
        RULES,
    )
    assert [r.fact_id for r in result.reconfirmations] == [lisbon.id]
    [porto] = result.new_facts
    assert (porto.lifecycle, porto.proposed_supersedes) == ("proposed", (lisbon.id,))
    written = resolve(
        [home("Faro", 0, said_at=2), home("Porto", 1, said_at=2, confidence=0.75)],
        [],
        known(lisbon),
        RULES,
    )
    faro, porto = written.new_facts
    assert faro.supersedes == (Supersession(lisbon.id, "subject"),)
    assert (porto.lifecycle, porto.proposed_supersedes, porto.proposed_supersedes_earlier) == (
        "proposed",
        (),
        (0,),
    )
    assert written.dropped == []


def test_episodes_follow_the_api_text_rules() -> None:
    assert resolve_episode(None) == (None, None)
    assert resolve_episode("  ") == (None, None)
    assert resolve_episode(" Alex asked\nabout  Lisbon. ") == ("Alex asked about Lisbon.", None)
    assert resolve_episode("Shared the key AKIAABCDEFGHIJKLMNOP") == (None, "secret")
    assert resolve_episode("Ada shared her [secret removed].") == (None, "secret")


def test_profile_attributes_need_confidence_a_valid_key_and_no_secret() -> None:
    proposals = [
        ProfileProposalIn("home_city", "Berlin", 0.95, "I live in Berlin"),
        ProfileProposalIn("home_city", "Lisbon", 0.9, "maybe Lisbon"),
        ProfileProposalIn("diet", "vegetarian", 0.75, "I mostly eat veggies"),
        ProfileProposalIn("email", "alex@example.com", 0.99, "mail me"),
        ProfileProposalIn("access_token", "abc", 0.99, ""),
        ProfileProposalIn("bad key!", "x", 0.99, ""),
        ProfileProposalIn("api", "password: hunter2hunter2", 0.99, ""),
        ProfileProposalIn("bank_card", "[secret removed]", 0.99, "my card is [secret removed]"),
    ]
    changes, dropped = resolve_profile(proposals, RULES)
    assert changes == [ProfileChange("home_city", "Berlin")]
    assert sorted(d.reason for d in dropped) == sorted(
        [
            "profile:duplicate_in_pass",
            "profile:low_confidence",
            "profile:profile_key",
            "profile:profile_key",
            "profile:profile_key",
            "profile:secret",
            "profile:secret",
        ]
    )


@pytest.mark.parametrize("character", ["\x00", "\ud800"], ids=["nul", "lone_surrogate"])
def test_a_proposal_holding_text_no_column_can_store_is_refused_alone(character: str) -> None:
    # The API refuses such text in any request (422 `nul_character`, `lone_surrogate`): so does
    # the write path, proposal by proposal, instead of failing the pass's write for all of them.
    kind = "nul_character" if character == "\x00" else "lone_surrogate"
    result = resolve(
        [
            candidate(f"User likes tea{character}."),
            candidate("User prefers oolong.", 1, evidence=f"oolong{character}"),
            candidate("User owns a bike.", 2, category="context"),
        ],
        [],
        known(),
        RULES,
    )
    assert [n.candidate.index for n in result.new_facts] == [2]
    assert result.dropped == [Dropped(kind, 0), Dropped(kind, 1)]
    assert resolve_episode(f"Talked{character} about tea.") == (None, kind)
    changes, dropped = resolve_profile(
        [
            ProfileProposalIn("drink", f"tea{character}", 0.95, "tea"),
            ProfileProposalIn("vehicle", "bike", 0.95, "bike"),
        ],
        RULES,
    )
    assert changes == [ProfileChange("vehicle", "bike")]
    assert dropped == [Dropped(f"profile:{kind}", 0)]
